"""AlbertPretrainer: the encoder plus the masked-LM and sentence-order heads."""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder, encoder_inputs
from albert_tf.modeling.heads import MaskedLMHead, SentenceOrderHead


class AlbertPretrainer(tf_keras.Model):
  """Encoder + MLM head + SOP head, as the original's run_pretraining builds them.

  Inputs: the encoder's dict plus `masked_lm_positions` int32 `[batch, P]`.
  Outputs: the encoder's outputs plus `mlm_logits [batch, P, vocab]` and `sop_logits [batch, 2]`.
  """

  def __init__(self, config, encoder=None, **kwargs):
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    encoder = encoder or AlbertEncoder(config, name="encoder")
    masked_lm = MaskedLMHead(encoder.embedding_layer, config.hidden_act,
                             config.initializer_range, name="predictions")
    sentence_order = SentenceOrderHead(config.hidden_size, config.initializer_range,
                                       name="seq_relationship")
    inputs = encoder_inputs()
    inputs["masked_lm_positions"] = tf_keras.Input(shape=(None,), dtype=tf.int32,
                                                   name="masked_lm_positions")
    encoder_out = encoder({k: inputs[k] for k in INPUT_NAMES})
    outputs = dict(encoder_out)
    outputs["mlm_logits"] = masked_lm(encoder_out["sequence_output"],
                                      inputs["masked_lm_positions"])
    outputs["sop_logits"] = sentence_order(encoder_out["pooled_output"])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.config = config
    self.encoder = encoder
    self.masked_lm = masked_lm
    self.sentence_order = sentence_order

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(AlbertConfig.from_dict(config["config"]), name=config.get("name"))
