"""The ALBERT block, split into its two sub-layers so either can be shared (paper Table 4).

A block is `attention sub-layer -> FFN sub-layer`. Each sub-layer owns its LayerNorm, matching
the original's names: `LayerNorm` after attention, `LayerNorm_1` after the FFN. Sharing means
passing the same sub-layer object to several blocks, so shared variables exist once.
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.activations import get_activation, training_variants_enabled
from albert_tf.modeling.attention import SelfAttention, dropout
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.embedding import LAYER_NORM_EPSILON, truncated_normal


class _ResidualSublayer(tf_keras.layers.Layer):
  """`LN(x + dropout(f(x)))` (post-LN, the original) or `x + dropout(f(LN(x)))` (pre-LN)."""

  def __init__(self, dropout_rate, ln_type, layer_norm_name, **kwargs):
    super().__init__(**kwargs)
    if ln_type not in ("postln", "preln"):
      raise ValueError(f"ln_type must be 'postln' or 'preln', got {ln_type!r}")
    self.ln_type = ln_type
    self.dropout_rate = dropout_rate
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name=layer_norm_name)
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def transform(self, x, training, **kwargs):
    raise NotImplementedError

  def call(self, x, training=None, seed=None, **kwargs):
    """`seed` (int32 `[2]`, optional): stateless dropout masks drawn from it (`seed`, and for
    the transform's own dropout `seed + [0, 1]`)."""
    if seed is not None:
      kwargs["seed"] = seed + tf.constant([0, 1], seed.dtype)
    if self.ln_type == "preln":
      y = self.transform(self.layer_norm(x), training=training, **kwargs)
      return x + dropout(self.dropout, y, training, seed)
    y = self.transform(x, training=training, **kwargs)
    return self.layer_norm(x + dropout(self.dropout, y, training, seed))


class AttentionSublayer(_ResidualSublayer):
  """Self-attention, output dense, dropout, residual and `LayerNorm`.

  Inputs: `x [batch, seq, hidden]`, `bias [batch, 1, 1, seq]`. Output: `[batch, seq, hidden]`.
  Original names: `attention_1/self/{query,key,value}`, `attention_1/output/dense`, `LayerNorm`.
  """

  def __init__(self, hidden_size, num_heads, attention_dropout_rate, dropout_rate,
               initializer_range, ln_type="postln", **kwargs):
    super().__init__(dropout_rate, ln_type, "LayerNorm", **kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.attention_dropout_rate = attention_dropout_rate
    self.initializer_range = initializer_range
    self.attention = SelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                   initializer_range, name="self")
    self.output_dense = TokenDense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="dense")

  def transform(self, x, training, bias, seed=None):
    return self.output_dense(self.attention(x, bias, training=training, seed=seed))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  attention_dropout_rate=self.attention_dropout_rate,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
                  ln_type=self.ln_type)
    return config


class FeedForwardSublayer(_ResidualSublayer):
  """Dense to `intermediate_size` with the activation, dense back, dropout, residual, `LayerNorm_1`.

  Input and output: `[batch, seq, hidden]`. Original names: `ffn_1/intermediate/dense`,
  `ffn_1/intermediate/output/dense`, `LayerNorm_1`.
  """

  def __init__(self, hidden_size, intermediate_size, activation, dropout_rate,
               initializer_range, ln_type="postln", **kwargs):
    super().__init__(dropout_rate, ln_type, "LayerNorm_1", **kwargs)
    self.hidden_size = hidden_size
    self.intermediate_size = intermediate_size
    self.activation = activation
    self.initializer_range = initializer_range
    # The activation is applied in `transform`: training calls use its faster variant.
    self.intermediate = TokenDense(
        intermediate_size, kernel_initializer=truncated_normal(initializer_range),
        name="intermediate")
    self._activation = get_activation(activation)
    self._training_activation = get_activation(activation, training=True)
    self.output_dense = TokenDense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="output")

  def transform(self, x, training, seed=None):
    del seed  # no dropout inside the FFN
    # A symbolic `training` (Keras traces both modes when saving) keeps the plain activation.
    fast = training is True and training_variants_enabled()
    activation = self._training_activation if fast else self._activation
    return self.output_dense(activation(self.intermediate(x)))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                  activation=self.activation, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, ln_type=self.ln_type)
    return config


class TransformerBlock(tf_keras.layers.Layer):
  """One block application: `ffn(attention(x, bias))`; its sub-layers may be shared objects.

  Inputs: `x [batch, seq, hidden]`, `bias [batch, 1, 1, seq]`. Output: `[batch, seq, hidden]`.

  With `recompute_grad` set (see `set_recompute_grad`), a training call keeps only its input
  for the backward pass and runs the block again there (`tf.recompute_grad`): activation
  memory of one block instead of all, for one more forward pass. Its dropout masks then come
  from a seed drawn per call, so the recomputation drops the same units.
  """

  def __init__(self, attention_sublayer, ffn_sublayer, **kwargs):
    super().__init__(**kwargs)
    self.attention_sublayer = attention_sublayer
    self.ffn_sublayer = ffn_sublayer
    self.recompute_grad = False

  def apply_block(self, x, bias, training=None, seed=None):
    """The block on `x`; with `seed`, stateless dropout (`seed`, `seed + [0, 2]`)."""
    ffn_seed = None if seed is None else seed + tf.constant([0, 2], seed.dtype)
    x = self.attention_sublayer(x, bias=bias, training=training, seed=seed)
    return self.ffn_sublayer(x, training=training, seed=ffn_seed)

  def call(self, x, bias, training=None):
    if not (self.recompute_grad and training is True):  # not when saving (symbolic training)
      return self.apply_block(x, bias, training=training)
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
    # bias and seed are captured, not arguments: only x and the variables need gradients.
    return tf.recompute_grad(lambda h: self.apply_block(h, bias, True, seed))(x)


def set_recompute_grad(model, enabled=True):
  """Turn block recomputation (`TransformerBlock`) on or off in every block of `model`; takes
  effect at the next trace of a training call. Returns the number of blocks changed."""
  blocks = [layer for layer in model.submodules if isinstance(layer, TransformerBlock)]
  for block in blocks:
    block.recompute_grad = bool(enabled)
  return len(blocks)
