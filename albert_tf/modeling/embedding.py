"""The factorized embedding (paper section 3.1): word, position and token-type tables of width E.

With brightmart/albert_zh's layout (SPEC "brightmart/albert_zh's own checkpoints") the word
vectors are projected E -> H at once (`word_embeddings_2`, no bias) and the position/type tables
and the LayerNorm are H wide.
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.dropout import dropout

LAYER_NORM_EPSILON = 1e-12  # the original's (tf.contrib layer_norm) epsilon, used everywhere


def truncated_normal(stddev):
  return tf_keras.initializers.TruncatedNormal(stddev=stddev)


class FactorizedEmbedding(tf_keras.layers.Layer):
  """Sum of word, position and token-type embeddings, then LayerNorm and dropout.

  Inputs: `input_word_ids` and `input_type_ids`, int `[batch, seq]`.
  Output: `[batch, seq, embedding_size]` (the original's embedding output, before the E -> H
  projection, which the encoder owns because the original names it under `encoder/`). With
  `hidden_size` (brightmart's layout): `[batch, seq, hidden_size]`, the gathered word vectors
  times `word_embeddings_2 [E, H]`, plus H-wide position/type vectors, LayerNorm, dropout.
  """

  def __init__(self, vocab_size, embedding_size, max_position_embeddings, type_vocab_size,
               dropout_rate, initializer_range, hidden_size=None, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.hidden_size = hidden_size
    # The width of the position/type tables and of the output.
    self.output_size = embedding_size if hidden_size is None else hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name="LayerNorm")
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape):
    init = lambda: truncated_normal(self.initializer_range)
    self.word_embeddings = self.add_weight(
        "word_embeddings", [self.vocab_size, self.embedding_size], initializer=init())
    self.word_embeddings_2 = None
    if self.hidden_size is not None:
      self.word_embeddings_2 = self.add_weight(
          "word_embeddings_2", [self.embedding_size, self.hidden_size], initializer=init())
    self.token_type_embeddings = self.add_weight(
        "token_type_embeddings", [self.type_vocab_size, self.output_size], initializer=init())
    self.position_embeddings = self.add_weight(
        "position_embeddings", [self.max_position_embeddings, self.output_size],
        initializer=init())
    super().build(input_shape)

  def call(self, input_word_ids, input_type_ids, training=None):
    seq_length = tf.shape(input_word_ids)[1]
    tf.debugging.assert_less_equal(
        seq_length, self.max_position_embeddings,
        message="sequence longer than max_position_embeddings")
    words = tf.gather(self.word_embeddings, input_word_ids)
    if self.word_embeddings_2 is not None:
      words = tf.matmul(words, tf.cast(self.word_embeddings_2, words.dtype))
    types = tf.gather(self.token_type_embeddings, input_type_ids)
    positions = self.position_embeddings[:seq_length]
    x = words + types + tf.cast(positions, words.dtype)[tf.newaxis]
    x = self.layer_norm(x)
    return dropout(self.dropout, x, training)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                  max_position_embeddings=self.max_position_embeddings,
                  type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, hidden_size=self.hidden_size)
    return config
