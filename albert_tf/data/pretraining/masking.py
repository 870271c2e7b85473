"""N-gram masking for the masked-LM objective (paper section 4.1, the original's
`create_masked_lm_predictions`), on token ids.

Works on ids rather than piece strings, with a per-id word-start table, so one instance
costs a few tens of microseconds of Python.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
  """What `ngram_mask` needs to know; built once per tokenizer and flags."""
  vocab_size: int
  mask_id: int
  cls_id: int
  sep_id: int
  word_start: tuple  # word_start[id] -> bool (SPEC.md "Word starts")
  masked_lm_prob: float = 0.15
  max_predictions_per_seq: int = 20
  ngram: int = 3
  favor_shorter_ngram: bool = True
  do_whole_word_mask: bool = True
  # Ids may be `id + vocab_size`: a piece that continues a word found by segmentation (jieba),
  # not a word start whatever the piece, and written as plain `id` (see `mark_continued`).
  # `word_start` then covers 2 * vocab_size ids.
  continued_pieces: bool = False

  def __post_init__(self):
    if self.continued_pieces and len(self.word_start) != 2 * self.vocab_size:
      raise ValueError("continued_pieces needs word_start for 2 * vocab_size ids")

  @property
  def ngram_cumulative_weights(self):
    return ngram_cumulative_weights(self.ngram, self.favor_shorter_ngram)


def ngram_cumulative_weights(ngram, favor_shorter_ngram):
  """Cumulative P(n) for n = 1..ngram, unnormalised: proportional to 1/n (or reversed)."""
  weights = [1.0 / n for n in range(1, ngram + 1)]
  if not favor_shorter_ngram:
    weights = weights[::-1]
  total, cumulative = 0.0, []
  for w in weights:
    total += w
    cumulative.append(total)
  return tuple(cumulative)


def continued_word_start(word_start):
  """`word_start` extended with False for the continued ids `id + len(word_start)`."""
  return tuple(word_start) + (False,) * len(word_start)


def mark_continued(ids, word_starts, vocab_size):
  """`ids` with each piece whose `word_starts` flag is False as `id + vocab_size`.

  Carrying the flag inside the id lets sentences stay plain lists of ints through chunking,
  truncation and random-document partners; `ngram_mask` turns them back into plain ids.
  """
  return [i if start else i + vocab_size for i, start in zip(ids, word_starts)]


def num_to_predict(num_tokens, options):
  """min(max_predictions_per_seq, max(1, round(len * masked_lm_prob))), [CLS]/[SEP] counted."""
  return min(options.max_predictions_per_seq,
             max(1, int(round(num_tokens * options.masked_lm_prob))))


def candidate_words(ids, options):
  """Candidate words (lists of positions) and the token_boundary feature.

  [CLS]/[SEP] are boundaries but never candidates; with whole-word masking a piece that does
  not start a word joins the previous candidate (even across a [SEP], as in the original).
  """
  word_start = options.word_start
  cls_id, sep_id = options.cls_id, options.sep_id
  whole_word = options.do_whole_word_mask
  boundary = [0] * len(ids)
  words = []
  for i, token in enumerate(ids):
    if token == cls_id or token == sep_id:
      boundary[i] = 1
      continue
    start = word_start[token]
    if whole_word and words and not start:
      words[-1].append(i)
    else:
      words.append([i])
      if start:
        boundary[i] = 1
  return words, boundary


def ngram_mask(ids, rng, options, span_counts=None, drawn_counts=None):
  """Chooses n-gram spans to predict and replaces their tokens (80% [MASK], 10% kept, 10% random).

  Args:
    ids: token ids of `[CLS] A [SEP] B [SEP]`.
    rng: a `random.Random`; every draw comes from it, so a seeded rng reproduces the result.
    options: `MaskingOptions`.
    span_counts: optional list; `span_counts[n - 1]` is incremented per masked n-gram (in
      words, after any shortening to fit the budget).
    drawn_counts: optional list; `drawn_counts[n - 1]` counts the n drawn where all `ngram`
      lengths were available (so its shares are exactly the n-gram weights).

  Returns:
    (output_ids, masked_positions (sorted), masked_labels, token_boundary).
  """
  words, boundary = candidate_words(ids, options)
  if options.continued_pieces:
    vocab_size = options.vocab_size
    ids = [i - vocab_size if i >= vocab_size else i for i in ids]
  output = list(ids)
  if options.masked_lm_prob == 0 or not words:
    return output, [], [], boundary
  budget = num_to_predict(len(ids), options)
  cumulative = options.ngram_cumulative_weights
  max_n = options.ngram
  num_words = len(words)
  order = list(range(num_words))
  covered = set()
  masked = []
  random, randrange = rng.random, rng.randrange
  # Entries are visited in a uniformly random order, as the original's full shuffle; the
  # Fisher-Yates steps are taken lazily because the budget is met after a few entries.
  for j in range(num_words):
    # `>` would visit more entries, each skipped: no span fits a met budget.
    if len(masked) >= budget:  # pragma: no mutate
      break
    k = randrange(j, num_words)
    order[j], order[k] = order[k], order[j]
    first = order[j]
    available = min(max_n, num_words - first)
    draw = random() * cumulative[available - 1]
    n = 1
    # A continuous draw below cumulative[available - 1]: `<` for `<=` differs with probability
    # 0, and `n <= available` never lets n pass `available`.
    while cumulative[n - 1] <= draw and n < available:  # pragma: no mutate
      n += 1
    if drawn_counts is not None and available == max_n:
      drawn_counts[n - 1] += 1
    # Shorten while the n-gram would exceed the budget; skip it if even a unigram does.
    while n > 0:  # pragma: no mutate  (n = 0 takes no position, fits, and is skipped below)
      indexes = [i for word in words[first:first + n] for i in word]
      if len(masked) + len(indexes) <= budget:
        break
      n -= 1
    if n == 0 or any(i in covered for i in indexes):
      continue
    if span_counts is not None:
      span_counts[n - 1] += 1
    for i in indexes:
      covered.add(i)
      masked.append(i)
      # `<=` for `<` differs with probability 0 (tests/test_masking_rules.py holds the shares).
      if random() < 0.8:  # pragma: no mutate
        output[i] = options.mask_id
      elif random() < 0.5:  # pragma: no mutate
        pass  # keep the original token
      else:
        output[i] = randrange(options.vocab_size)  # any vocabulary entry, as the original
  masked.sort()
  return output, masked, [ids[i] for i in masked], boundary
