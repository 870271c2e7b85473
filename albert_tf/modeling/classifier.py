"""AlbertClassifier: the encoder plus the original's sentence classification / regression head."""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.embedding import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder, encoder_inputs


class ClassificationHead(tf_keras.layers.Layer):
  """Dropout 0.1 on the pooled output, then float32 logits = x @ output_weights^T + output_bias.

  Weights are stored `[num_labels, hidden]` as the original's `output_weights`; one output
  (regression, STS-B) is squeezed to `[batch]`.

  `pooled_layer_norm`: a LayerNorm on the pooled output first, as brightmart/albert_zh's
  run_classifier adds for its pre-LN models (`loss/LayerNorm`: their encoder ends without one).
  """

  def __init__(self, num_labels, hidden_size, dropout_rate=0.1, initializer_range=0.02,
               pooled_layer_norm=False, **kwargs):
    super().__init__(**kwargs)
    self.num_labels = num_labels
    self.hidden_size = hidden_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.pooled_layer_norm = pooled_layer_norm
    self.layer_norm = None
    if pooled_layer_norm:
      self.layer_norm = tf_keras.layers.LayerNormalization(
          axis=-1, epsilon=LAYER_NORM_EPSILON, name="LayerNorm")
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape):
    # float32 reads under a mixed policy too: the head computes in float32 (see `call`).
    self.output_weights = self.add_weight(
        "output_weights", [self.num_labels, self.hidden_size],
        initializer=truncated_normal(self.initializer_range), experimental_autocast=False)
    self.output_bias = self.add_weight("output_bias", [self.num_labels], initializer="zeros",
                                       experimental_autocast=False)
    super().build(input_shape)

  def call(self, pooled_output, training=None):
    # In float32 whatever the compute dtype, as Keras' mixed-precision guide keeps the last
    # layer: in bfloat16 the gradient reaching the logits, (p - y) / batch with p near 1/2 at
    # the start of fine-tuning, keeps 8 bits, and its sum over the batch (the bias gradient)
    # is lost (all zeros for balanced labels). [batch, H] x [H, C] costs nothing.
    if self.layer_norm is not None:
      pooled_output = self.layer_norm(pooled_output)
    x = tf.cast(self.dropout(pooled_output, training=training), tf.float32)
    logits = tf.matmul(x, self.output_weights, transpose_b=True) + self.output_bias
    return tf.squeeze(logits, -1) if self.num_labels == 1 else logits

  def get_config(self):
    config = super().get_config()
    config.update(num_labels=self.num_labels, hidden_size=self.hidden_size,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
                  pooled_layer_norm=self.pooled_layer_norm)
    return config


class AlbertClassifier(tf_keras.Model):
  """Encoder + classification head. Inputs: the encoder's dict; output: logits `[batch, C]`
  (or `[batch]` for regression, `num_labels=1`)."""

  def __init__(self, config, num_labels, encoder=None, **kwargs):
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    encoder = encoder or AlbertEncoder(config, name="encoder")
    head = ClassificationHead(num_labels, config.hidden_size,
                              initializer_range=config.initializer_range,
                              pooled_layer_norm=config.is_brightmart
                              and config.ln_type == "preln", name="classifier")
    inputs = encoder_inputs()
    logits = head(encoder({k: inputs[k] for k in INPUT_NAMES})["pooled_output"])
    super().__init__(inputs=inputs, outputs=logits, **kwargs)
    self.config = config
    self.encoder = encoder
    self.head = head
    self.num_labels = num_labels

  def tf1_head_variables(self):
    """The original's names: `output_weights` and `output_bias` at the top level (and
    brightmart's `loss/LayerNorm` for its pre-LN models)."""
    names = {"output_weights": self.head.output_weights, "output_bias": self.head.output_bias}
    if self.head.layer_norm is not None:
      names["loss/LayerNorm/gamma"] = self.head.layer_norm.gamma
      names["loss/LayerNorm/beta"] = self.head.layer_norm.beta
    return names
