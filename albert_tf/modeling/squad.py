"""AlbertSquad: the encoder plus the original's SQuAD heads (v1.1 span head, v2.0 beam head).

    model = AlbertSquad(config)                                # v1.1
    out = model(inputs)        # {"start_logits", "end_logits"}: float32 [batch, seq]
    v2 = AlbertSquad(config, version_2=True, start_n_top=5, end_n_top=5)
    v2(inputs | {"p_mask": p, "start_positions": s}, training=True)   # log-probs for the loss
    v2(inputs | {"p_mask": p})  # beam: start/end top log-probs and indices, cls_logits

The variables carry the original's TF1 names (`tf1_head_variables`), so fine-tuned SQuAD
checkpoints of the original load: v1 `cls/squad/output_{weights [2,H], bias [2]}`; v2
`start_logits/dense`, `end_logits/{dense_0, LayerNorm, dense_1}`, `answer_class/{dense_0,
dense_1 (no bias)}`.
"""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.embedding import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder

_NEG = 1e30  # the original's mask value for impossible positions


class SquadV1Head(tf_keras.layers.Layer):
  """logits [batch, seq, 2] = sequence_output @ output_weights^T + output_bias, split into
  start and end logits (float32 [batch, seq] each)."""

  def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range

  def build(self, input_shape):
    self.output_weights = self.add_weight("output_weights", [2, self.hidden_size],
                                          initializer=truncated_normal(self.initializer_range),
                                          experimental_autocast=False)
    self.output_bias = self.add_weight("output_bias", [2], initializer="zeros",
                                       experimental_autocast=False)
    super().build(input_shape)

  def call(self, sequence_output):
    # In float32 under a mixed policy too (as `ClassificationHead`: logits feed a softmax).
    logits = tf.einsum("bsh,nh->nbs", tf.cast(sequence_output, tf.float32), self.output_weights)
    logits = logits + self.output_bias[:, None, None]
    return {"start_logits": logits[0], "end_logits": logits[1]}

  def tf1_variables(self):
    return {"cls/squad/output_weights": self.output_weights,
            "cls/squad/output_bias": self.output_bias}


def _masked(logits, p_mask):
  """The original's masking: logits where p_mask is 0, -1e30 where it is 1."""
  return logits * (1.0 - p_mask) - _NEG * p_mask


class SquadV2Head(tf_keras.layers.Layer):
  """The original's v2.0 head (XLNet style), on `sequence_output [batch, seq, hidden]`.

  - start: dense -> 1 per position, masked by `p_mask`, log-softmax over positions.
  - end: dense_0 (tanh) over [token; start token] -> LayerNorm -> dense_1 -> 1 per position,
    masked, log-softmax. Training conditions on the true start (`start_positions`);
    inference on each of the start_n_top best starts, keeping end_n_top ends for each.
  - answer class: dense_0 (tanh) over [softmax(start)-weighted token; [CLS] token] ->
    dropout -> dense_1 (no bias): `cls_logits [batch]`, the no-answer score.
  """

  def __init__(self, hidden_size, initializer_range=0.02, start_n_top=5, end_n_top=5,
               dropout_rate=0.1, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.start_n_top, self.end_n_top = start_n_top, end_n_top
    self.dropout_rate = dropout_rate
    init = lambda: truncated_normal(initializer_range)  # one initializer per layer
    # The three logit layers compute in float32 under a mixed policy too (as
    # `ClassificationHead`: their outputs feed a softmax, their gradients its residuals).
    self.start_dense = TokenDense(1, kernel_initializer=init(), name="start_dense",
                                  dtype="float32")
    self.end_dense_0 = TokenDense(hidden_size, activation="tanh", kernel_initializer=init(),
                                  name="end_dense_0")
    self.end_layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name="end_LayerNorm")
    self.end_dense_1 = TokenDense(1, kernel_initializer=init(), name="end_dense_1",
                                  dtype="float32")
    self.answer_dense_0 = TokenDense(hidden_size, activation="tanh", kernel_initializer=init(),
                                     name="answer_dense_0")
    self.answer_dropout = tf_keras.layers.Dropout(dropout_rate)
    self.answer_dense_1 = TokenDense(1, use_bias=False, kernel_initializer=init(),
                                     name="answer_dense_1", dtype="float32")

  def _end_logits(self, sequence_output, start_features):
    """sequence_output and start_features [batch, k, seq, H] -> float32 [batch, k, seq].

    Always rank 4 (k = 1 in training): Keras' LayerNormalization fixes its input rank."""
    x = self.end_dense_0(tf.concat([sequence_output, start_features], axis=-1))
    x = self.end_layer_norm(x)
    return tf.cast(tf.squeeze(self.end_dense_1(x), -1), tf.float32)

  def call(self, sequence_output, p_mask, start_positions=None, training=None):
    p_mask = tf.cast(p_mask, tf.float32)
    seq_length = tf.shape(sequence_output)[1]
    start_logits = tf.cast(tf.squeeze(self.start_dense(sequence_output), -1), tf.float32)
    start_masked = _masked(start_logits, p_mask)
    start_log_probs = tf.nn.log_softmax(start_masked, -1)
    outputs = {}
    if start_positions is not None:
      start_features = tf.gather(sequence_output, tf.cast(start_positions, tf.int32),
                                 batch_dims=1)  # [batch, H]
      start_features = tf.tile(start_features[:, None, None], [1, 1, seq_length, 1])
      end_logits = self._end_logits(sequence_output[:, None], start_features)[:, 0]
      end_masked = _masked(end_logits, p_mask)
      outputs["start_log_probs"] = start_log_probs
      outputs["end_log_probs"] = tf.nn.log_softmax(end_masked, -1)
    else:
      start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, self.start_n_top)
      start_features = tf.gather(sequence_output, start_top_index, batch_dims=1)  # [b, k, H]
      tiled_output = tf.tile(sequence_output[:, None], [1, self.start_n_top, 1, 1])
      tiled_start = tf.tile(start_features[:, :, None], [1, 1, seq_length, 1])
      end_logits = self._end_logits(tiled_output, tiled_start)  # [batch, k, seq]
      end_log_probs = tf.nn.log_softmax(_masked(end_logits, p_mask[:, None]), -1)
      end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, self.end_n_top)
      k = self.start_n_top * self.end_n_top
      outputs.update(start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                     end_top_log_probs=tf.reshape(end_top_log_probs, [-1, k]),
                     end_top_index=tf.reshape(end_top_index, [-1, k]))
    start_p = tf.cast(tf.nn.softmax(start_masked, -1), sequence_output.dtype)
    start_feature = tf.einsum("bsh,bs->bh", sequence_output, start_p)
    answer = self.answer_dense_0(tf.concat([start_feature, sequence_output[:, 0]], -1))
    answer = self.answer_dropout(answer, training=training)
    outputs["cls_logits"] = tf.cast(tf.squeeze(self.answer_dense_1(answer), -1), tf.float32)
    return outputs

  def tf1_variables(self):
    names = {}
    for scope, layer in (("start_logits/dense", self.start_dense),
                         ("end_logits/dense_0", self.end_dense_0),
                         ("end_logits/dense_1", self.end_dense_1),
                         ("answer_class/dense_0", self.answer_dense_0)):
      names[f"{scope}/kernel"], names[f"{scope}/bias"] = layer.kernel, layer.bias
    names["end_logits/LayerNorm/gamma"] = self.end_layer_norm.gamma
    names["end_logits/LayerNorm/beta"] = self.end_layer_norm.beta
    names["answer_class/dense_1/kernel"] = self.answer_dense_1.kernel
    return names


class AlbertSquad(tf_keras.Model):
  """Encoder + SQuAD head. Inputs: the encoder's three int32 [batch, seq] tensors, and for v2
  `p_mask` (1 where no answer can be) and, to train, `start_positions` [batch]."""

  def __init__(self, config, version_2=False, start_n_top=5, end_n_top=5, dropout_rate=0.1,
               encoder=None, **kwargs):
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    self.config = config
    self.version_2 = version_2
    self.encoder = encoder or AlbertEncoder(config, name="encoder")
    if version_2:
      self.squad_head = SquadV2Head(config.hidden_size, config.initializer_range, start_n_top,
                                    end_n_top, dropout_rate, name="squad_v2")
    else:
      self.squad_head = SquadV1Head(config.hidden_size, config.initializer_range,
                                    name="squad_v1")
    dummy = self.encoder.dummy_inputs(1, max(8, start_n_top))
    if version_2:
      dummy["p_mask"] = tf.zeros_like(dummy["input_mask"])
    self(dummy)  # create every variable, so checkpoints load before the first step

  def call(self, inputs, training=None):
    sequence_output = self.encoder({k: inputs[k] for k in INPUT_NAMES},
                                   training=training)["sequence_output"]
    if not self.version_2:
      return self.squad_head(sequence_output)
    start_positions = inputs.get("start_positions") if training else None
    return self.squad_head(sequence_output, inputs["p_mask"], start_positions,
                           training=training)

  def tf1_head_variables(self):
    return self.squad_head.tf1_variables()
