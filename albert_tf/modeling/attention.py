"""Multi-head self-attention with the original's variable layout (q/k/v kernels [H, heads*d])."""

import math

import tensorflow as tf
import tf_keras

from albert_tf.modeling.activations import use_training_variants
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.dropout import dropout
from albert_tf.modeling.embedding import truncated_normal


def attention_bias(input_mask, dtype=tf.float32):
  """Additive attention bias `[batch, 1, 1, seq]`: 0 on real keys, -10000 on padded keys.

  -10000 (not -inf) is the original's value: a fully padded row still averages all keys.
  """
  mask = tf.cast(input_mask, dtype)[:, tf.newaxis, tf.newaxis, :]
  return (1.0 - mask) * -10000.0


def _exact_scale(scale):
  """Whether multiplying by `scale` is exact in binary floating point (a power of two: head
  sizes 4, 16, 64, 256). The original scales the scores `q k^T` by 1/sqrt(d); scaling q
  instead gives bit-identical scores when the scale is a power of two, and multiplies
  `[batch, seq, hidden]` rather than the `[batch, heads, seq, seq]` scores: seq / d times
  fewer elements (half at seq 128 with ALBERT's heads of 64). Other head sizes (albert_tiny's
  26) keep the original's order, whose rounding differs in the last bit.
  """
  return math.frexp(scale)[0] == 0.5


def _masked_softmax(scores, bias):
  """softmax(scores + bias) over the keys, in float32 (a mixed policy's scores included)."""
  return tf.nn.softmax(tf.cast(scores, tf.float32) + tf.cast(bias, tf.float32), axis=-1)


def _masked_softmax_forward(scores, bias, dtype):
  return tf.cast(_masked_softmax(scores, bias), dtype)


def _masked_softmax_gradient(scores, bias, dprobs):
  """The scores' gradient, `p * (dp - sum(dp * p))` with `p` recomputed from the scores."""
  probs = _masked_softmax(scores, bias)
  dprobs = tf.cast(dprobs, tf.float32)
  dscores = probs * (dprobs - tf.reduce_sum(dprobs * probs, -1, keepdims=True))
  return tf.cast(dscores, scores.dtype)


_masked_softmax_forward_xla = tf.function(_masked_softmax_forward, jit_compile=True)
_masked_softmax_gradient_xla = tf.function(_masked_softmax_gradient, jit_compile=True)


def masked_softmax_xla(scores, bias, dtype):
  """`softmax(scores + bias)` in float32, cast to `dtype`: the attention's float32 island (the
  casts, the mask's add, the softmax) as one XLA-compiled pass, and its gradient as another
  that recomputes the probabilities from the scores instead of keeping a float32 copy of them
  (`[batch, heads, seq, seq]` per layer). For training steps under a mixed policy; the same
  function within float32 rounding."""

  @tf.custom_gradient
  def run(scores):
    return (_masked_softmax_forward_xla(scores, bias, dtype),
            lambda dprobs: _masked_softmax_gradient_xla(scores, bias, dprobs))

  return run(scores)


class SelfAttention(tf_keras.layers.Layer):
  """Scaled dot-product self-attention over `num_heads` heads.

  Inputs: `x [batch, seq, hidden]`, `bias [batch, 1, 1, seq]` (see `attention_bias`).
  Output: the concatenated heads' context `[batch, seq, hidden]` (before the output dense).
  """

  def __init__(self, hidden_size, num_heads, dropout_rate, initializer_range, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.head_size = hidden_size // num_heads
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    dense = lambda name: TokenDense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name=name)
    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def _split_heads(self, x, batch, seq):
    """`[batch, seq, heads * d]` -> `[batch, heads, seq, d]`; `batch` and `seq` are read from
    the attention's input (see `call`)."""
    return tf.transpose(tf.reshape(x, [batch, seq, self.num_heads, self.head_size]), [0, 2, 1, 3])

  def call(self, x, bias, training=None, seed=None):
    """`seed` (int32 `[2]`): draw the dropout mask statelessly from it (see `dropout`)."""
    scale = 1.0 / math.sqrt(float(self.head_size))
    scale_q = _exact_scale(scale)
    # Batch and length read from the attention's input, not from each dense output: tf2onnx
    # 1.17 turns a reshape whose sizes are read from its own input into ONNX's "copy this
    # dimension" (`[0, 0, heads, d]`), then merges it with TokenDense's reshape from its 2-D
    # `[batch * seq, hidden]` product, so the zeros copied the 2-D product's sizes and
    # onnxruntime failed at run time at any dynamic shape (tests/test_onnx.py).
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    q = self.query(x)
    q = self._split_heads(q * scale if scale_q else q, batch, seq)
    k = self._split_heads(self.key(x), batch, seq)
    v = self._split_heads(self.value(x), batch, seq)
    # Heads first and plain batched matmuls (k transposed inside the matmul): the einsums
    # "bfnd,btnd->bnft" / "bnft,btnd->bfnd" copied their operands into this layout on every
    # call and in the gradient (ALBERT-base train step: -0.2 s; docs/benchmarks-history.md).
    # Same products.
    scores = tf.matmul(q, k, transpose_b=True)  # [batch, heads, from, to]
    if not scale_q:
      scores = scores * scale
    # Under a mixed policy the scores are bfloat16/float16: add the -10000 mask and normalise
    # in float32 (a no-op cast in float32), then mix the values in the compute dtype again.
    # Training calls under a mixed policy do it in one compiled pass each way
    # (`masked_softmax_xla`); in float32 there are no casts to remove and oneDNN's softmax, whose
    # gradient reuses its output, was faster (ALBERT-base fine-tuning step: 0.90x with XLA's).
    if use_training_variants(training) and scores.dtype != tf.float32:
      probs = masked_softmax_xla(scores, bias, v.dtype)
    else:
      probs = tf.cast(_masked_softmax(scores, bias), v.dtype)
    probs = dropout(self.dropout, probs, training, seed)
    context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [batch, seq, heads, d]
    return tf.reshape(context, [batch, seq, self.hidden_size])

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
    return config
