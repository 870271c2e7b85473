"""Dynamic masking: SPEC.md's n-gram masking drawn anew in tf.data each time a record is read.

`create_pretraining_data.py --no_masking` writes records with `input_ids` unmasked,
`token_boundary` (the word starts, jieba segmentation included) and empty `masked_lm_*`
features; `run_pretraining.py --dynamic_masking` masks them here, in the input pipeline, with
the rules `masking.ngram_mask` applies at creation time (SPEC.md "Instance creation"):

- candidates are the real tokens other than [CLS] / [SEP]; a candidate starts a word where
  `token_boundary` is 1 (or where it is the first candidate); with whole-word masking a
  non-starting piece joins the previous word, even across a [SEP], else every candidate is a
  word of its own;
- budget = min(max_predictions_per_seq, max(1, round(num_tokens * masked_lm_prob))), with
  num_tokens counting [CLS] and [SEP] and Python's rounding (half to even, in float64);
- the words are visited in a uniformly random order; at word i, n <= ngram is drawn with
  P(n) proportional to 1/n (or reversed) over the n available before the last word,
  shortened while words i..i+n-1 would exceed the budget, and skipped if nothing fits or a
  word is already masked;
- each masked token becomes [MASK] (80%), stays (10%) or becomes a uniformly random
  vocabulary id (10%); positions are sorted.

The random draws come from stateless ops seeded per example (`make_draws`), so a run is
reproducible from its seed, and every read of a record (each epoch) gets a new seed.
`mask_example` takes the draws as an argument, which lets a test feed the same draws to an
independent reference of the rules.
"""

import dataclasses

import tensorflow as tf

from albert_tf.data.pretraining.masking import ngram_cumulative_weights


@dataclasses.dataclass(frozen=True)
class DynamicMaskingOptions:
  """The masking flags (create_pretraining_data's names and defaults) and the special ids."""
  vocab_size: int
  mask_id: int
  cls_id: int
  sep_id: int
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  ngram: int = 3
  favor_shorter_ngram: bool = True
  do_whole_word_mask: bool = True

  def validate(self):
    if not 0.0 < self.masked_lm_prob <= 1.0:
      raise ValueError(f"--masked_lm_prob={self.masked_lm_prob!r}: must be in (0, 1] with "
                       "--dynamic_masking")
    if self.ngram < 1:
      raise ValueError(f"--ngram={self.ngram!r}: must be at least 1")
    if self.max_predictions_per_seq < 1:
      raise ValueError(f"--max_predictions_per_seq={self.max_predictions_per_seq!r}: must be "
                       "at least 1")


def make_draws(seed, length, vocab_size):
  """Every random number one example's masking may use, from a stateless `seed` ([2] int).

  `order_keys`: the words' visiting order is the argsort of these; `ngram_u[j]`: the n-gram
  draw at the j-th word visited; `action_u[p]` and `random_ids[p]`: what the token at
  position p becomes if it is masked.
  """
  seeds = tf.random.experimental.stateless_split(seed, 4)
  return {
      "order_keys": tf.random.stateless_uniform([length], seeds[0]),
      "ngram_u": tf.random.stateless_uniform([length], seeds[1], dtype=tf.float64),
      "action_u": tf.random.stateless_uniform([length], seeds[2]),
      "random_ids": tf.random.stateless_uniform([length], seeds[3], maxval=vocab_size,
                                                dtype=tf.int32),
  }


def mask_example(input_ids, input_mask, token_boundary, draws, options):
  """Masks one example ([L] int32 tensors); returns the masked `input_ids` and the
  `masked_lm_positions` / `masked_lm_ids` / `masked_lm_weights` of max_predictions_per_seq."""
  o = options
  input_ids = tf.convert_to_tensor(input_ids, tf.int32)
  real = tf.convert_to_tensor(input_mask) > 0
  candidate = real & tf.not_equal(input_ids, o.cls_id) & tf.not_equal(input_ids, o.sep_id)
  candidate_i = tf.cast(candidate, tf.int32)
  if o.do_whole_word_mask:
    first_candidate = tf.equal(tf.cumsum(candidate_i, exclusive=True), 0)
    starts = candidate & ((tf.convert_to_tensor(token_boundary) > 0) | first_candidate)
  else:
    starts = candidate
  num_words = tf.reduce_sum(tf.cast(starts, tf.int32))
  # word_of[p]: the word of candidate p; num_words (a spare segment) for the others.
  word_of = tf.where(candidate, tf.cumsum(tf.cast(starts, tf.int32)) - 1, num_words)
  word_len = tf.math.unsorted_segment_sum(candidate_i, word_of, num_words + 1)[:num_words]
  word_prefix = tf.concat([[0], tf.cumsum(word_len)], 0)  # tokens of words [0, k)

  num_tokens = tf.reduce_sum(tf.cast(real, tf.int32))
  wanted = tf.cast(tf.round(tf.cast(num_tokens, tf.float64) * o.masked_lm_prob), tf.int32)
  budget = tf.minimum(o.max_predictions_per_seq, tf.maximum(1, wanted))
  cumulative = tf.constant(ngram_cumulative_weights(o.ngram, o.favor_shorter_ngram),
                           tf.float64)
  order = tf.argsort(draws["order_keys"][:num_words], stable=True)
  ngram_u = draws["ngram_u"]
  lengths = tf.range(1, o.ngram + 1)  # n = 1..ngram
  word_index = tf.range(num_words)

  def visit(j, masked, covered):
    first = order[j]
    available = tf.minimum(o.ngram, num_words - first)
    draw = ngram_u[j] * cumulative[available - 1]
    below = tf.logical_and(cumulative <= draw, lengths < available)  # k = n - 1 < available - 1
    n = 1 + tf.reduce_sum(tf.cast(below, tf.int32))
    # The longest n' <= n whose words still fit the budget (0 if not even a unigram does).
    ends = tf.minimum(first + lengths, num_words)
    tokens = tf.gather(word_prefix, ends) - word_prefix[first]
    fits = (lengths <= n) & (masked + tokens <= budget)
    n = tf.reduce_sum(tf.cast(fits, tf.int32))
    span = (word_index >= first) & (word_index < first + n)
    take = (n > 0) & tf.logical_not(tf.reduce_any(span & covered))
    covered = covered | (span & take)
    masked += tf.where(take, word_prefix[first + n] - word_prefix[first], 0)
    return j + 1, masked, covered

  _, _, covered = tf.while_loop(
      lambda j, masked, covered: (j < num_words) & (masked < budget), visit,
      (tf.constant(0), tf.constant(0), tf.zeros([num_words], tf.bool)))

  covered_with_spare = tf.concat([covered, [False]], 0)
  chosen = tf.gather(covered_with_spare, word_of) & candidate
  positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)  # ascending
  labels = tf.gather(input_ids, positions)
  action = tf.gather(draws["action_u"], positions)
  replaced = tf.where(action < 0.8, o.mask_id,
                      tf.where(action < 0.9, labels, tf.gather(draws["random_ids"], positions)))
  masked_ids = tf.tensor_scatter_nd_update(input_ids, positions[:, None], replaced)
  count = tf.shape(positions)[0]
  pad = o.max_predictions_per_seq - count
  masked_ids = tf.ensure_shape(masked_ids, input_ids.shape)
  return {
      "input_ids": masked_ids,
      "masked_lm_positions": tf.ensure_shape(tf.pad(positions, [[0, pad]]),
                                             [o.max_predictions_per_seq]),
      "masked_lm_ids": tf.ensure_shape(tf.pad(labels, [[0, pad]]), [o.max_predictions_per_seq]),
      "masked_lm_weights": tf.ensure_shape(tf.pad(tf.ones([count], tf.float32), [[0, pad]]),
                                           [o.max_predictions_per_seq]),
  }


def dynamic_mask(example, seed, options):
  """`example` (a parsed unmasked record: input_ids, input_mask, token_boundary, ...) with
  fresh masks drawn from `seed` ([2] int64); the other features pass through."""
  length = tf.shape(example["input_ids"])[0]
  draws = make_draws(seed, length, options.vocab_size)
  masked = mask_example(example["input_ids"], example["input_mask"], example["token_boundary"],
                        draws, options)
  return dict(example, **masked)
