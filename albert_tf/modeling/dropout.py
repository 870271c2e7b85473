"""Dropout for training steps: masks from a keyed counter hash, applied in one compiled pass.

TensorFlow's dropout draws one Philox number per element (`RandomUniform`), compares it and
selects, and keeps the boolean mask for the gradient. In an ALBERT-base fine-tuning step
(batch 32 x seq 128, dropout 0.1: the attention probabilities and two sublayer outputs per
layer application) that was about a tenth of a bfloat16 step's op time on a CPU without AMX
(docs/benchmarks-history.md). Here element `i` of a call keyed by `seed` (int32 `[2]`) is kept when
`mix(mix(i * 0x9E3779B9 + seed[0]) ^ seed[1]) >= round(rate * 2**32)`, `mix` being MurmurHash3's
32-bit finalizer: a few integer operations per element that XLA vectorises, fused with the
scaling; the backward pass recomputes the mask from the seed instead of keeping it. Kept
elements are scaled by `1 / (1 - rate)` in float32 and rounded once to the input's dtype. The
drop probability is `rate` to within 2**-32, as with TensorFlow's float32 uniform draw; the
draws differ from TensorFlow's (no two dropout implementations share a random stream).
"""

import tensorflow as tf

from albert_tf.modeling.activations import use_training_variants

_STEP = 0x9E3779B9  # 2**32 / golden ratio: consecutive indices land far apart before mixing


def _uint32(value):
  return tf.constant(value, tf.uint32)


def _mix(h):
  """MurmurHash3's 32-bit finalizer (a bijection of uint32 with full avalanche)."""
  shift, xor = tf.bitwise.right_shift, tf.bitwise.bitwise_xor
  h = xor(h, shift(h, _uint32(16))) * _uint32(0x85EBCA6B)
  h = xor(h, shift(h, _uint32(13))) * _uint32(0xC2B2AE35)
  return xor(h, shift(h, _uint32(16)))


def keep_mask(shape, seed, threshold):
  """Boolean `shape`: whether each element is kept for this `seed` (int32 `[2]`); `threshold`
  (uint32) is `round(rate * 2**32)`. Elements are numbered in row-major order (int32: up to
  2**31 elements per call)."""
  index = tf.bitcast(tf.reshape(tf.range(tf.reduce_prod(shape), dtype=tf.int32), shape),
                     tf.uint32)
  key = tf.bitcast(tf.cast(seed, tf.int32), tf.uint32)
  h = _mix(tf.bitwise.bitwise_xor(_mix(index * _uint32(_STEP) + key[0]), key[1]))
  return h >= threshold


def _masked_scaled(x, seed, threshold, scale):
  keep = keep_mask(tf.shape(x), seed, threshold)
  scaled = tf.cast(tf.cast(x, tf.float32) * scale, x.dtype)
  return tf.where(keep, scaled, tf.zeros([], x.dtype))


_masked_scaled_xla = tf.function(_masked_scaled, jit_compile=True)


def threshold_of(rate):
  """The uint32 threshold below which an element's hash drops it: `round(rate * 2**32)`."""
  return min(int(round(float(rate) * 2.0**32)), 2**32 - 1)


def hashed_dropout(x, rate, seed=None):
  """Dropout of `x` at `rate` (0 <= rate < 1) with the mask of `keep_mask`; `seed` (int32
  `[2]`) fixes the mask, else one is drawn per call from TensorFlow's stateful generator (so
  `tf.random.set_seed` makes a run repeatable). Its gradient is `dy` under the same mask and
  scale, recomputed from the seed."""
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"dropout rate {rate} is outside [0, 1)")
  if rate == 0.0:
    return tf.identity(x)
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  seed = tf.cast(seed, tf.int32)
  threshold = _uint32(threshold_of(rate))
  scale = tf.constant(1.0 / (1.0 - rate), tf.float32)

  @tf.custom_gradient
  def run(x):
    return (_masked_scaled_xla(x, seed, threshold, scale),
            lambda dy: _masked_scaled_xla(dy, seed, threshold, scale))

  return run(x)


def dropout(layer, x, training, seed=None):
  """The Keras `Dropout` `layer`'s dropout on `x`. Training calls (`use_training_variants`)
  draw the mask from a counter hash in one compiled pass (`hashed_dropout`), from `seed`
  (int32 `[2]`) when given, so that recomputing it gives the same mask; other calls (and
  exports) run the Keras layer, or with `seed` TensorFlow's stateless dropout."""
  if not layer.rate:
    return layer(x, training=training)
  if use_training_variants(training):
    return hashed_dropout(x, layer.rate, seed)
  if seed is not None and training is True:
    return tf.nn.experimental.stateless_dropout(x, layer.rate, seed)
  return layer(x, training=training)
