"""A linear-chain CRF over per-token tag scores, for NER heads.

  labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
  crf = CRF(len(labels), *allowed_transitions(labels))
  loss = -tf.reduce_mean(crf.log_likelihood(logits, gold_tags, mask))  # logits [b, s, 5]
  tags, score = crf.decode(logits, mask)  # [b, s] int32, padding 0; [b]

The score of a tag sequence y_1..y_n (the positions where `mask` is set) is

  start[y_1] + sum_t emissions[t, y_t] + sum_t transitions[y_{t-1}, y_t] + end[y_n]

and its log-likelihood that score minus the log of the sum over all sequences of exp(score),
the partition, which the forward algorithm computes in log space. `decode` is Viterbi.
Both loop over time with TensorFlow ops (`tf.foldl`, `tf.scan`), so a graph traced for
`[None, None, tags]` takes any batch and length, and a SavedModel carries them.

Choices:
- `start` and `end` are learned scores for the first and last tag of a sequence
  (`use_boundary_scores=True`, the default): without them nothing but the emissions says that a
  sentence rarely starts inside an entity. `use_boundary_scores=False` leaves them out (the
  plain transition-matrix CRF of TF1's `tf.contrib.crf`).
- The mask selects the positions that carry tags, in any pattern (not only a prefix): the
  chain runs over the selected positions in order and skips the rest, so a mask on the first
  word piece of each word gives a word-level CRF without gathering. Each sequence needs at
  least one selected position; one with none gets log-likelihood 0 and all-0 tags.
- Constraints (`allowed`, `allowed_start`, e.g. from `allowed_transitions`) are hard in
  `decode` (-inf: an invalid path is never chosen whatever the emissions) and a penalty of
  `DISALLOWED_SCORE` in `log_likelihood`, so the partition loses the invalid paths (exp(-1e4)
  is 0 in float32) while a gold sequence that breaks them, such as IOB1 data read as IOB2,
  gives a large finite loss rather than inf and NaN gradients.
- Math in float32 whatever the layer's policy: emissions are cast, the weights are read
  without autocast. Sums of up to `seq` scores and the logsumexp of the partition lose too
  much in bfloat16, and the layer costs nothing next to the encoder.
"""

import numpy as np
import tensorflow as tf
import tf_keras

DISALLOWED_SCORE = -1e4


def allowed_transitions(labels):
  """Which BIO (IOB2) tag may follow which: `I-X` only after `B-X` or `I-X`, never first.

  Args:
    labels: the tag names in id order, e.g. ["O", "B-PER", "I-PER"]. Anything without a B- or
      I- prefix (O, padding labels) is outside every entity.

  Returns:
    (allowed [tags, tags] bool, allowed[i, j]: tag j may follow tag i;
     allowed_start [tags] bool: the tag may open a sequence).
  """
  for label in labels:
    if label.startswith(("E-", "S-")):
      raise ValueError(f"label {label!r}: allowed_transitions reads BIO (IOB2) labels only")
  inside_type = [label[2:] if label.startswith("I-") else None for label in labels]
  entity_type = [label[2:] if label.startswith(("B-", "I-")) else None for label in labels]
  num_tags = len(labels)
  allowed = np.ones([num_tags, num_tags], dtype=bool)
  for j in range(num_tags):
    if inside_type[j] is not None:
      allowed[:, j] = [entity_type[i] == inside_type[j] for i in range(num_tags)]
  allowed_start = np.array([t is None for t in inside_type], dtype=bool)
  return allowed, allowed_start


class CRF(tf_keras.layers.Layer):
  """Linear-chain CRF: `log_likelihood` for training, `decode` (Viterbi) for prediction.

  Args:
    num_tags: the number of tags, the last dimension of the emissions.
    allowed: optional [num_tags, num_tags] bool, allowed[i, j] when tag j may follow tag i.
    allowed_start: optional [num_tags] bool, the tags a sequence may start with.
    use_boundary_scores: learn `start` and `end` scores [num_tags] (see the module docstring).
    transitions_initializer: for `transitions` [num_tags, num_tags] (from, to).

  Calling the layer on emissions [batch, seq, num_tags] (with an optional mask [batch, seq])
  returns `decode`'s tags [batch, seq] int32.
  """

  def __init__(self, num_tags, allowed=None, allowed_start=None, use_boundary_scores=True,
               transitions_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.num_tags = int(num_tags)
    self.allowed = None if allowed is None else np.asarray(allowed, dtype=bool)
    self.allowed_start = None if allowed_start is None else np.asarray(allowed_start, bool)
    if self.allowed is not None and self.allowed.shape != (self.num_tags, self.num_tags):
      raise ValueError(f"allowed has shape {self.allowed.shape}, not "
                       f"{(self.num_tags, self.num_tags)}")
    if self.allowed_start is not None and self.allowed_start.shape != (self.num_tags,):
      raise ValueError(f"allowed_start has shape {self.allowed_start.shape}, not "
                       f"{(self.num_tags,)}")
    self.use_boundary_scores = use_boundary_scores
    self.transitions_initializer = tf_keras.initializers.get(transitions_initializer)
    self.supports_masking = True

  def build(self, input_shape=None):
    # Read in float32 under a mixed policy too (experimental_autocast=False), as the math is.
    self.transitions = self.add_weight(
        "transitions", [self.num_tags, self.num_tags], initializer=self.transitions_initializer,
        experimental_autocast=False)
    if self.use_boundary_scores:
      self.start_scores = self.add_weight("start_scores", [self.num_tags], initializer="zeros",
                                          experimental_autocast=False)
      self.end_scores = self.add_weight("end_scores", [self.num_tags], initializer="zeros",
                                        experimental_autocast=False)
    super().build(input_shape)

  def _scores(self, disallowed):
    """(transitions [tags, tags], start [tags], end [tags]) in float32, `disallowed` in place
    of every transition and start the constraints forbid."""
    if not self.built:
      self.build()
    transitions = tf.convert_to_tensor(self.transitions)
    if self.use_boundary_scores:
      start, end = tf.convert_to_tensor(self.start_scores), tf.convert_to_tensor(self.end_scores)
    else:
      start = end = tf.zeros([self.num_tags], tf.float32)
    if self.allowed is not None:
      transitions = tf.where(tf.constant(self.allowed), transitions, disallowed)
    if self.allowed_start is not None:
      start = tf.where(tf.constant(self.allowed_start), start, disallowed)
    return transitions, start, end

  def _time_major(self, emissions, mask):
    """emissions [seq, batch, tags] float32 and mask [seq, batch] bool (all set if None)."""
    emissions = tf.cast(emissions, tf.float32)
    if emissions.shape[-1] is not None and emissions.shape[-1] != self.num_tags:
      raise ValueError(f"emissions have {emissions.shape[-1]} tags, the CRF {self.num_tags}")
    if mask is None:
      mask = tf.ones(tf.shape(emissions)[:2], tf.bool)
    return tf.transpose(emissions, [1, 0, 2]), tf.transpose(tf.cast(mask, tf.bool))

  def log_likelihood(self, emissions, tags, mask=None):
    """log p(tags | emissions) of each sequence.

    Args:
      emissions: [batch, seq, num_tags] float, unnormalised tag scores.
      tags: [batch, seq] int, the gold tags (any value where the mask is not set).
      mask: optional [batch, seq] bool or 0/1, the positions in the chain.

    Returns:
      [batch] float32: score(tags) - log partition, 0 for a sequence with no position.
    """
    transitions, start, end = self._scores(DISALLOWED_SCORE)
    emissions, mask = self._time_major(emissions, mask)
    tags = tf.transpose(tf.cast(tags, tf.int32))

    def step(carry, inputs):
      # alpha [batch, tags]: log of the summed exp(score) of all paths so far ending in each
      # tag; gold [batch]: the score of the gold path so far; last [batch]: its last tag.
      alpha, gold, last, started = carry
      emission, tag, valid = inputs
      moved = tf.reduce_logsumexp(alpha[:, :, None] + transitions, axis=1)
      new_alpha = tf.where(started[:, None], moved, start) + emission
      gain = tf.where(started, tf.gather_nd(transitions, tf.stack([last, tag], -1)),
                      tf.gather(start, tag)) + tf.gather(emission, tag, batch_dims=1)
      return (tf.where(valid[:, None], new_alpha, alpha), gold + tf.where(valid, gain, 0.0),
              tf.where(valid, tag, last), started | valid)

    initial = (tf.zeros_like(emissions[0]), tf.zeros_like(emissions[0, :, 0]),
               tf.zeros_like(tags[0]), tf.zeros_like(mask[0]))
    alpha, gold, last, started = tf.foldl(step, (emissions, tags, mask), initial)
    log_partition = tf.reduce_logsumexp(alpha + end, axis=1)
    return tf.where(started, gold + tf.gather(end, last) - log_partition, 0.0)

  def decode(self, emissions, mask=None):
    """The highest-scoring tag sequence (Viterbi), never one the constraints forbid.

    Args:
      emissions: [batch, seq, num_tags] float.
      mask: optional [batch, seq] bool or 0/1.

    Returns:
      (tags [batch, seq] int32, 0 where the mask is not set; score [batch] float32, the
       sequence score of those tags, 0 for a sequence with no position).
    """
    transitions, start, end = self._scores(-np.inf)
    emissions, mask = self._time_major(emissions, mask)
    # One more position, masked off (skipped, tagged 0) and dropped from the tags at the end:
    # a sequence may have no position at all (seq 0: an NER request whose texts hold no word),
    # and tf.scan can neither start from nor stack zero steps of an unknown batch.
    emissions = tf.pad(emissions, [[0, 1], [0, 0], [0, 0]])
    mask = tf.pad(tf.cast(mask, tf.int32), [[0, 1], [0, 0]]) > 0
    identity = tf.range(self.num_tags, dtype=tf.int32)

    def step(carry, inputs):
      # delta [batch, tags]: the best score of a path so far ending in each tag; pointers
      # [batch, tags]: the previous selected position's tag on that path (itself where this
      # position is skipped, so backtracking walks through it).
      delta, started, _ = carry
      emission, valid = inputs
      candidates = delta[:, :, None] + transitions  # [batch, from, to]
      new_delta = tf.where(started[:, None], tf.reduce_max(candidates, axis=1), start) + emission
      best_previous = tf.argmax(candidates, axis=1, output_type=tf.int32)
      pointers = tf.where((valid & started)[:, None], best_previous, identity)
      return tf.where(valid[:, None], new_delta, delta), started | valid, pointers

    batch_identity = tf.zeros_like(emissions[0], tf.int32) + identity
    initial = (tf.zeros_like(emissions[0]), tf.zeros_like(mask[0]), batch_identity)
    deltas, started, pointers = tf.scan(step, (emissions, mask), initial)
    final = deltas[-1] + end
    best_last = tf.argmax(final, axis=1, output_type=tf.int32)

    def backtrack(carry, inputs):
      current, _ = carry
      step_pointers, valid = inputs
      return (tf.gather(step_pointers, current, batch_dims=1),
              tf.where(valid, current, tf.zeros_like(current)))

    _, tags = tf.scan(backtrack, (pointers, mask), (best_last, tf.zeros_like(best_last)),
                      reverse=True)
    score = tf.where(started[-1], tf.reduce_max(final, axis=1), 0.0)
    return tf.transpose(tags)[:, :-1], score

  def call(self, emissions, mask=None):
    return self.decode(emissions, mask)[0]

  def compute_mask(self, inputs, mask=None):
    return mask

  def get_config(self):
    config = super().get_config()
    config.update(
        num_tags=self.num_tags,
        allowed=None if self.allowed is None else self.allowed.tolist(),
        allowed_start=None if self.allowed_start is None else self.allowed_start.tolist(),
        use_boundary_scores=self.use_boundary_scores,
        transitions_initializer=tf_keras.initializers.serialize(self.transitions_initializer))
    return config
