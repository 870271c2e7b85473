"""Fine-tuning batches cut to their longest real row.

The features stay the original's fixed-length TFRecords (every row padded to max_seq_length),
but real inputs are short (SST-2's dev sentences are about 25 SentencePiece pieces), so most
of a fixed-length batch's positions are padding that every layer computes. `trim_batch` slices
a parsed batch's sequence features to its longest row, rounded up to a multiple of
`LENGTH_MULTIPLE`, so that XLA and oneDNN see a handful of shapes rather than one per batch.

The outputs are the fixed-length batch's to float32 rounding: padded positions are masked keys,
whose attention weights are exactly zero (exp of about -10000), no real position reads them,
and a per-example head reads [CLS] at position 0 either way; only the order of float32 sums may
differ. Positions that index the sequence (a SQuAD answer span, a token's label) stay valid: a
position past the longest real row is no real token.
"""

import tensorflow as tf

# Batches are computed at a multiple of this many positions: SST-2 on tiny.json at
# max_seq_length 128, batch 32, on a shared 2-core EPYC (benchmarks/trim_batches_bench.py)
# trained at 1646, 1740 and 1340 examples/s with multiples 8, 16 and 32 (600 untrimmed); 16
# leaves at most 32 shapes to compile at max_seq_length 512.
LENGTH_MULTIPLE = 16


def trimmed_length(input_mask, max_seq_length, multiple=None):
  """int32 scalar: the positions a batch with `input_mask` (int [..., seq], 1 for real tokens)
  needs: its longest row rounded up to `multiple` (default `LENGTH_MULTIPLE`), at least 1, at
  most `max_seq_length`."""
  multiple = LENGTH_MULTIPLE if multiple is None else multiple
  longest = tf.reduce_max(tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=-1))
  rounded = (tf.maximum(longest, 1) + multiple - 1) // multiple * multiple
  return tf.minimum(rounded, max_seq_length)


def bucketed(examples, batch_size, max_seq_length, multiple=None):
  """Batches of `batch_size` from `examples` (a dataset of dicts with `input_mask`
  [max_seq_length]), each of examples whose real lengths share one bucket of `multiple`
  positions (1-16, 17-32, ...: the lengths `trimmed_length` rounds to), so that a trimmed batch
  is nearly all real tokens. Buckets fill in the stream's order and a batch leaves when its
  bucket is full: the examples are the stream's, the batches (and so the losses) are not the
  unbucketed run's."""
  multiple = LENGTH_MULTIPLE if multiple is None else multiple
  boundaries = list(range(multiple + 1, max_seq_length + 1, multiple))
  batches = examples.bucket_by_sequence_length(
      lambda example: tf.reduce_sum(tf.cast(example["input_mask"], tf.int32)),
      bucket_boundaries=boundaries, bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
      drop_remainder=True)
  # Every batch is full: say so in the shapes, as a plain batch with drop_remainder does.
  return batches.map(lambda batch: tf.nest.map_structure(
      lambda value: tf.ensure_shape(value, [batch_size] + value.shape[1:].as_list()), batch))


def trim_batch(batch, names, max_seq_length, multiple=None):
  """`batch` (a dict of tensors) with the features `names` (each [..., max_seq_length], its
  last axis the sequence) cut to `trimmed_length` of its `input_mask`; the rest as they are."""
  length = trimmed_length(batch["input_mask"], max_seq_length, multiple)
  return {name: value[..., :length] if name in names else value
          for name, value in batch.items()}
