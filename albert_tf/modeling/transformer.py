"""The ALBERT block, split into its two sub-layers so either can be shared (paper Table 4).

A block is `attention sub-layer -> FFN sub-layer`. Each sub-layer owns its LayerNorm, matching
the original's names: `LayerNorm` after attention, `LayerNorm_1` after the FFN. Sharing means
passing the same sub-layer object to several blocks, so shared variables exist once.
"""

import tf_keras

from albert_tf.modeling.activations import get_activation
from albert_tf.modeling.attention import SelfAttention
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

  def call(self, x, training=None, **kwargs):
    if self.ln_type == "preln":
      y = self.transform(self.layer_norm(x), training=training, **kwargs)
      return x + self.dropout(y, training=training)
    y = self.transform(x, training=training, **kwargs)
    return self.layer_norm(x + self.dropout(y, training=training))


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
    self.output_dense = tf_keras.layers.Dense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="dense")

  def transform(self, x, training, bias):
    return self.output_dense(self.attention(x, bias, training=training))

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
    self.intermediate = tf_keras.layers.Dense(
        intermediate_size, activation=get_activation(activation),
        kernel_initializer=truncated_normal(initializer_range), name="intermediate")
    self.output_dense = tf_keras.layers.Dense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="output")

  def transform(self, x, training):
    return self.output_dense(self.intermediate(x))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                  activation=self.activation, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, ln_type=self.ln_type)
    return config


class TransformerBlock(tf_keras.layers.Layer):
  """One block application: `ffn(attention(x, bias))`; its sub-layers may be shared objects.

  Inputs: `x [batch, seq, hidden]`, `bias [batch, 1, 1, seq]`. Output: `[batch, seq, hidden]`.
  """

  def __init__(self, attention_sublayer, ffn_sublayer, **kwargs):
    super().__init__(**kwargs)
    self.attention_sublayer = attention_sublayer
    self.ffn_sublayer = ffn_sublayer

  def call(self, x, bias, training=None):
    x = self.attention_sublayer(x, bias=bias, training=training)
    return self.ffn_sublayer(x, training=training)
