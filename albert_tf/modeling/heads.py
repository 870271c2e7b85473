"""Pretraining heads: masked LM (tied to the word embeddings) and sentence order prediction."""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.activations import get_activation
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.embedding import LAYER_NORM_EPSILON, truncated_normal


class MaskedLMHead(tf_keras.layers.Layer):
  """The original's `cls/predictions`: dense H->E with the activation, LayerNorm, tied decoder.

  Inputs: `sequence_output [batch, seq, hidden]`, `masked_lm_positions` int `[batch, P]`.
  Output: float32 logits `[batch, P, vocab]` = transform(gathered) @ word_embeddings^T +
  output_bias (the matmul in the compute dtype under a mixed policy).

  With brightmart's layout (the embedding layer has `word_embeddings_2 [E, H]`) the transform
  is H -> H, LayerNorm in H, and the decoder is tied to both factors, as their
  run_pretraining: transform @ word_embeddings_2^T @ word_embeddings^T + output_bias.
  """

  def __init__(self, embedding_layer, activation, initializer_range, **kwargs):
    super().__init__(**kwargs)
    self.embedding_layer = embedding_layer
    self.activation = activation
    self.initializer_range = initializer_range
    self.dense = TokenDense(
        embedding_layer.output_size, activation=get_activation(activation),
        kernel_initializer=truncated_normal(initializer_range), name="dense")
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name="LayerNorm")

  def build(self, input_shape):
    self.output_bias = self.add_weight("output_bias", [self.embedding_layer.vocab_size],
                                       initializer="zeros")
    super().build(input_shape)

  def call(self, sequence_output, masked_lm_positions):
    gathered = tf.gather(sequence_output, tf.cast(masked_lm_positions, tf.int32), batch_dims=1)
    x = self.layer_norm(self.dense(gathered))
    # One 2-D [batch * P, E] x [E, V] product, not a batched matmul that broadcasts the table:
    # that one's gradient builds a [batch, V, E] tensor and sums it (3x slower on the CPU).
    batch, predictions = tf.shape(x)[0], tf.shape(x)[1]
    flat = tf.reshape(x, [-1, self.embedding_layer.output_size])
    projection = self.embedding_layer.word_embeddings_2
    if projection is not None:
      flat = tf.matmul(flat, tf.cast(projection, x.dtype), transpose_b=True)
    table = tf.cast(self.embedding_layer.word_embeddings, x.dtype)
    # Logits in float32 whatever the compute dtype: the softmax over V is taken on them.
    logits = tf.nn.bias_add(tf.cast(tf.matmul(flat, table, transpose_b=True), tf.float32),
                            tf.cast(self.output_bias, tf.float32))
    return tf.reshape(logits, [batch, predictions, self.embedding_layer.vocab_size])


class SentenceOrderHead(tf_keras.layers.Layer):
  """The original's `cls/seq_relationship`: float32 logits `[batch, 2]` = pooled @ W^T + b.

  Label 0 = segments in the original order, 1 = swapped (or B from another document).
  W is stored `[2, hidden]` (out, in) as in the original.
  """

  def __init__(self, hidden_size, initializer_range, num_classes=2, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.num_classes = num_classes

  def build(self, input_shape):
    self.output_weights = self.add_weight(
        "output_weights", [self.num_classes, self.hidden_size],
        initializer=truncated_normal(self.initializer_range), experimental_autocast=False)
    self.output_bias = self.add_weight("output_bias", [self.num_classes], initializer="zeros",
                                       experimental_autocast=False)
    super().build(input_shape)

  def call(self, pooled_output):
    # In float32 under a mixed policy too (as `ClassificationHead`, for the same reason).
    x = tf.cast(pooled_output, tf.float32)
    return tf.matmul(x, self.output_weights, transpose_b=True) + self.output_bias

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range,
                  num_classes=self.num_classes)
    return config
