"""The blocks' LayerNorm in training steps: Keras' function, its forward and gradient XLA-compiled.

Keras' `LayerNormalization` with ALBERT's epsilon (1e-12, below what its fused kernel accepts)
runs as about a dozen TensorFlow ops per application (moments, `batch_normalization`, and under
`mixed_bfloat16` a cast to float32 and back), and its gradient as about twenty more, each a pass
over `[tokens, hidden]`: 15% of an ALBERT-base bfloat16 pretraining step's op time on an AMX
CPU, where the matrix products are fast (benchmarks-history.md). `layer_norm_xla` computes the same
function as one compiled forward and one compiled gradient, which recomputes the statistics
from `x` instead of keeping the layer's intermediates. Exported models keep the Keras layer
(see `activations.plain_activations`).
"""

import tensorflow as tf


def _moments(x32):
  """The mean and (biased) variance over the last axis, kept as `[..., 1]`."""
  mean = tf.reduce_mean(x32, -1, keepdims=True)
  return mean, tf.reduce_mean(tf.math.squared_difference(x32, mean), -1, keepdims=True)


def _forward(x, gamma, beta, epsilon):
  """Keras' non-fused LayerNormalization: float32 statistics, `x * inv + (beta - mean * inv)`
  with `inv = rsqrt(variance + epsilon) * gamma` (`tf.nn.batch_normalization`), cast back to
  the input's dtype."""
  x32 = tf.cast(x, tf.float32)
  mean, variance = _moments(x32)
  inv = tf.math.rsqrt(variance + epsilon) * gamma
  return tf.cast(x32 * inv + (beta - mean * inv), x.dtype)


def _gradient(x, gamma, dy, epsilon):
  """(dx, dgamma, dbeta) of `_forward` at `x` for the upstream `dy`, in float32 inside."""
  x32, dy32 = tf.cast(x, tf.float32), tf.cast(dy, tf.float32)
  mean, variance = _moments(x32)
  rstd = tf.math.rsqrt(variance + epsilon)
  normalized = (x32 - mean) * rstd
  dnormalized = dy32 * gamma
  dx = rstd * (dnormalized - tf.reduce_mean(dnormalized, -1, keepdims=True)
               - normalized * tf.reduce_mean(dnormalized * normalized, -1, keepdims=True))
  rows = [-1, x.shape[-1]]
  dgamma = tf.reduce_sum(tf.reshape(dy32 * normalized, rows), 0)
  dbeta = tf.reduce_sum(tf.reshape(dy32, rows), 0)
  return tf.cast(dx, x.dtype), dgamma, dbeta


_forward_xla = tf.function(_forward, jit_compile=True)
_gradient_xla = tf.function(_gradient, jit_compile=True)


def layer_norm_xla(x, gamma, beta, epsilon):
  """LayerNorm of `x [..., hidden]` (any float dtype) with float32 `gamma`, `beta [hidden]`:
  the function of Keras' layer (within float32 rounding: XLA orders its sums its own way),
  one compiled pass forward and one backward. The output has `x`'s dtype."""

  @tf.custom_gradient
  def normalize(x, gamma, beta):
    def grad(dy):
      return _gradient_xla(x, gamma, dy, epsilon)
    return _forward_xla(x, gamma, beta, epsilon), grad

  return normalize(x, tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta))
