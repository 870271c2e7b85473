"""AlbertMultipleChoice: the original's RACE head (one logit per choice, softmax over choices)."""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.classifier import ClassificationHead
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder


class AlbertMultipleChoice(tf_keras.Model):
  """Inputs: the encoder's three int32 tensors of shape `[batch, choices, seq]`; output: logits
  `[batch, choices]`.

  Every choice runs through the encoder as its own row; dropout (`dropout_prob`, 0.1 as the
  original) on the pooled output; `output_weights [1, H]` and `output_bias [1]` (the original's
  TF1 names, no scope) give each row one logit, reshaped to one row of choices.
  """

  def __init__(self, config, dropout_prob=0.1, encoder=None, **kwargs):
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    super().__init__(**kwargs)
    self.config = config
    self.encoder = encoder or AlbertEncoder(config, name="encoder")
    self.head = ClassificationHead(1, config.hidden_size, dropout_rate=dropout_prob,
                                   initializer_range=config.initializer_range,
                                   name="classifier")
    self.dropout_prob = dropout_prob

  def call(self, inputs, training=None):
    ids = inputs["input_word_ids"]
    batch, choices = tf.shape(ids)[0], tf.shape(ids)[1]
    seq = ids.shape[2] if ids.shape[2] is not None else tf.shape(ids)[2]
    # The sequence length is given, not inferred: an empty batch has no size to infer it from.
    rows = {n: tf.reshape(inputs[n], [batch * choices, seq]) for n in INPUT_NAMES}
    pooled = self.encoder(rows, training=training)["pooled_output"]
    return tf.reshape(self.head(pooled, training=training), [batch, choices])

  def build_for(self, num_choices=4, seq_length=8):
    """Creates the variables (a call on zeros)."""
    zeros = tf.zeros([1, num_choices, seq_length], tf.int32)
    self({n: zeros for n in INPUT_NAMES})
    return self

  def tf1_head_variables(self):
    """The original's names: `output_weights` and `output_bias` at the top level."""
    return {"output_weights": self.head.output_weights, "output_bias": self.head.output_bias}
