"""AlbertEncoder: factorized embedding -> E->H projection -> L applications of shared blocks -> pooler."""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.attention import attention_bias
from albert_tf.modeling.dense import TokenDense, kernels_cast_once
from albert_tf.modeling.embedding import FactorizedEmbedding, truncated_normal
from albert_tf.modeling.transformer import (AttentionSublayer, FeedForwardSublayer,
                                            TransformerBlock, recomputed_rounds)

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(seq_length=None):
  """Keras inputs of the encoder: int32 `[batch, seq]` each."""
  return {name: tf_keras.Input(shape=(seq_length,), dtype=tf.int32, name=name)
          for name in INPUT_NAMES}


def block_plan(config):
  """Which sub-layers each block application uses: a list, per layer, of per-inner-block keys.

  Returns `[[(attention_group, ffn_group, inner_index), ...] * K] * L`. A shared sub-layer
  follows the config's groups (layer i uses group int(i / L * G), as in the original); a
  sub-layer that is not shared is per layer (group index = layer index). The same numbers name
  the variables (`transformer/group_{n}/inner_group_{k}`), so `all` is the original layout and
  `none` is BERT's.
  """
  plan = []
  for i in range(config.num_hidden_layers):
    group = config.layer_group(i)
    a = group if config.shares_attention else i
    f = group if config.shares_ffn else i
    plan.append([(a, f, k) for k in range(config.inner_group_num)])
  return plan


def _scope(group, inner):
  return f"group_{group}/inner_group_{inner}"


class AlbertEncoder(tf_keras.Model):
  """The ALBERT encoder network, identical to the original's given the same weights.

  Example:
    >>> config = AlbertConfig.from_json_file("configs/tiny.json")
    >>> encoder = AlbertEncoder(config)
    >>> out = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    >>> out["sequence_output"].shape  # [batch, seq, hidden]

  Inputs: dict of int32 `[batch, seq]`: `input_word_ids`, `input_mask`, `input_type_ids`.
  Outputs: dict with `sequence_output [batch, seq, hidden]`, `pooled_output [batch, hidden]`,
  `encoder_outputs` (list of L * inner_group_num `[batch, seq, hidden]`, one per block
  application) and `embedding_output [batch, seq, embedding_size]` (`hidden_size` with
  brightmart's layout, whose embeddings project E -> H themselves).
  """

  def __init__(self, config, **kwargs):
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    c = config
    embedding_layer = FactorizedEmbedding(
        c.vocab_size, c.embedding_size, c.max_position_embeddings, c.type_vocab_size,
        c.hidden_dropout_prob, c.initializer_range,
        hidden_size=c.hidden_size if c.is_brightmart else None, name="embeddings")
    # The original projects E -> H only when they differ (modeling.py transformer_model).
    projection = None
    if c.embedding_size != c.hidden_size and not c.is_brightmart:
      projection = TokenDense(c.hidden_size,
                              kernel_initializer=truncated_normal(c.initializer_range),
                              name="embedding_hidden_mapping_in")
    plan = block_plan(c)
    attention_sublayers, ffn_sublayers, blocks = {}, {}, {}
    for layer_plan in plan:
      for a, f, k in layer_plan:
        if (a, k) not in attention_sublayers:
          attention_sublayers[(a, k)] = AttentionSublayer(
              c.hidden_size, c.num_attention_heads, c.attention_probs_dropout_prob,
              c.hidden_dropout_prob, c.initializer_range, c.ln_type,
              name=f"group_{a}_inner_group_{k}_attention_1")
        if (f, k) not in ffn_sublayers:
          ffn_sublayers[(f, k)] = FeedForwardSublayer(
              c.hidden_size, c.intermediate_size, c.hidden_act, c.hidden_dropout_prob,
              c.initializer_range, c.ln_type, name=f"group_{f}_inner_group_{k}_ffn_1")
        if (a, f, k) not in blocks:
          blocks[(a, f, k)] = TransformerBlock(attention_sublayers[(a, k)],
                                               ffn_sublayers[(f, k)],
                                               name=f"block_{a}_{f}_{k}")
    pooler = TokenDense(c.hidden_size, activation="tanh",
                        kernel_initializer=truncated_normal(c.initializer_range), name="pooler")

    inputs = encoder_inputs()
    embedding_output = embedding_layer(inputs["input_word_ids"], inputs["input_type_ids"])
    x = projection(embedding_output) if projection is not None else embedding_output
    bias = tf_keras.layers.Lambda(attention_bias, name="attention_bias")(inputs["input_mask"])
    encoder_outputs = []
    for layer_plan in plan:
      for key in layer_plan:
        x = blocks[key](x, bias=bias)
        encoder_outputs.append(x)
    first_token = tf_keras.layers.Lambda(lambda t: t[:, 0, :], name="first_token")(x)
    pooled_output = pooler(first_token)
    outputs = {
        "sequence_output": x,
        "pooled_output": pooled_output,
        "encoder_outputs": encoder_outputs,
        "embedding_output": embedding_output,
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.config = config
    self.embedding_layer = embedding_layer
    self.embedding_projection = projection
    # Keyed by the original's variable scope, "group_{n}/inner_group_{k}" (string keys keep
    # the dicts trackable, so native checkpoints name them too).
    self.attention_sublayers = {_scope(*key): layer for key, layer in attention_sublayers.items()}
    self.ffn_sublayers = {_scope(*key): layer for key, layer in ffn_sublayers.items()}
    self.blocks = list(blocks.values())
    self.pooler_layer = pooler

  def call(self, inputs, training=None, mask=None):
    with kernels_cast_once():  # under a mixed policy a shared kernel is cast once per call
      if training is True and any(block.recompute_grad for block in self.blocks):
        return self._recomputed_call(inputs)
      return super().call(inputs, training=training, mask=mask)

  def _recomputed_call(self, inputs):
    """The training call with `--recompute_grad`: the layers graph above, with each run of
    consecutive layers that apply the same blocks recomputed as one loop
    (`recomputed_rounds`: one running sum per shared weight's gradient; a layer sharing
    nothing with its neighbours is a run of one)."""
    embedding_output = self.embedding_layer(inputs["input_word_ids"], inputs["input_type_ids"],
                                            training=True)
    x = embedding_output
    if self.embedding_projection is not None:
      x = self.embedding_projection(x)
    bias = attention_bias(inputs["input_mask"])
    by_name = {block.name: block for block in self.blocks}
    runs = []  # [blocks of a layer, number of consecutive layers applying them]
    for layer_plan in block_plan(self.config):
      blocks = [by_name[f"block_{a}_{f}_{k}"] for a, f, k in layer_plan]
      if runs and runs[-1][0] == blocks:
        runs[-1][1] += 1
      else:
        runs.append([blocks, 1])
    encoder_outputs = []
    for blocks, rounds in runs:
      x, outputs = recomputed_rounds(blocks, rounds, x, bias)
      encoder_outputs.extend(tf.unstack(outputs, num=rounds * len(blocks)))
    return {"sequence_output": x, "pooled_output": self.pooler_layer(x[:, 0, :]),
            "encoder_outputs": encoder_outputs, "embedding_output": embedding_output}

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(AlbertConfig.from_dict(config["config"]), name=config.get("name"))

  def dummy_inputs(self, batch_size=1, seq_length=8):
    """Zero-valued inputs of the encoder's dtypes, for building and tracing."""
    return {name: tf.zeros([batch_size, seq_length], tf.int32) for name in INPUT_NAMES}
