"""The config files an ALBERT model can be described by, told apart and read in one place.

Four formats reach `AlbertConfig.from_json_file`:
  - Google's `albert_config.json` (the original's keys; ours adds `sharing`, `ln_type` and
    `layout`): read as it is.
  - brightmart/albert_zh's `albert_config_{tiny,base,large,xlarge,xxlarge}.json`: BERT's keys
    (`pooler_*`, `directionality`) plus `embedding_size` and `ln_type`, and no
    `num_hidden_groups` / `inner_group_num`. Those files describe brightmart's own layout
    (SPEC "brightmart/albert_zh's own checkpoints"), so they select `layout: "brightmart"`.
    brightmart's Google-layout releases (`albert_config_{tiny,small}_google.json`) carry the
    original's keys and read as Google's.
  - Hugging Face's `config.json` (`model_type: "albert"`), translated to the original's keys.
  - keras-hub's preset `config.json`: Keras' serialization of an `AlbertBackbone`
    (`{"module": ..., "class_name": "AlbertBackbone", "config": {"vocabulary_size": ...}}`),
    translated to the original's keys; another class (a `BertBackbone`) is refused.

This module knows file formats only (dicts in, albert_config.json dicts out); `config.py`
builds and validates the AlbertConfig, `huggingface.py` writes config.json with the tables here.
"""

GOOGLE = "google"
BRIGHTMART = "brightmart"
LAYOUTS = (GOOGLE, BRIGHTMART)

# BERT's keys in brightmart's files: their model reads none of them, nor does ours.
BRIGHTMART_KEYS = ("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                   "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")
_GROUP_KEYS = ("num_hidden_groups", "inner_group_num")


class ConfigError(ValueError):
  """An albert_config.json that cannot describe a model; the message names file and key."""


def is_huggingface(values):
  return isinstance(values, dict) and "model_type" in values


def is_keras_serialized(values):
  """Whether a dict is a Keras object's serialization (a keras-hub preset's config.json)."""
  return (isinstance(values, dict) and "class_name" in values
          and isinstance(values.get("config"), dict) and "model_type" not in values)


def is_brightmart(values):
  """Whether a dict without a `layout` key is one of brightmart's own config files."""
  if (not isinstance(values, dict) or "layout" in values or is_huggingface(values)
      or is_keras_serialized(values)):
    return False
  if any(key in values for key in _GROUP_KEYS):
    return False
  return "ln_type" in values or any(key in values for key in BRIGHTMART_KEYS)


def albert_config_values(values, source):
  """The albert_config.json dict (ours) that `values`, read from `source`, stands for."""
  if is_keras_serialized(values):
    return from_keras_hub(values, source)
  if is_huggingface(values):
    return from_huggingface(values, source)
  if is_brightmart(values):
    values = dict(values)
    values["layout"] = BRIGHTMART
    # Their modeling.py: "postln" or a missing/null ln_type is post-LN.
    if values.get("ln_type") is None:
      values["ln_type"] = "postln"
  return values


# ---------------------------------------------------------------------------------------------
# Hugging Face's config.json

# albert_config.json hidden_act -> transformers' ACT2FN name. The original's `gelu` is the tanh
# approximation, which transformers calls `gelu_new`; its `gelu` is the exact (erf) one.
ACTIVATION_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
                    "swish": "silu", "linear": "linear"}
# gelu_fast and gelu_pytorch_tanh are the same tanh formula (within 1e-12).
ACTIVATION_FROM_HF = {"gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu",
                      "gelu": "gelu_exact",
                      "relu": "relu", "tanh": "tanh", "swish": "swish", "silu": "swish",
                      "linear": "linear"}
# transformers' AlbertConfig defaults: its save_pretrained leaves out keys equal to them.
HF_DEFAULTS = {
    "vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096, "num_hidden_layers": 12,
    "num_hidden_groups": 1, "num_attention_heads": 64, "intermediate_size": 16384,
    "inner_group_num": 1, "hidden_act": "gelu_new", "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02, "layer_norm_eps": 1e-12, "classifier_dropout_prob": 0.1,
    "position_embedding_type": "absolute",
}
# Keys with the same name and meaning in both formats.
SHARED_HF_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                  "num_hidden_groups", "num_attention_heads", "intermediate_size",
                  "inner_group_num", "hidden_dropout_prob", "attention_probs_dropout_prob",
                  "max_position_embeddings", "type_vocab_size", "initializer_range")
LAYER_NORM_EPS = 1e-12  # the original's, the only one our model computes with
# The original's legacy keys, written at its defaults so a translated config has its full set.
_LEGACY_DEFAULTS = {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
                    "down_scale_factor": 1}


def from_huggingface(values, source):
  """A transformers ALBERT config.json dict -> the original's albert_config.json dict."""
  if values.get("model_type", "albert") != "albert":
    raise ConfigError(f"{source}: model_type is {values.get('model_type')!r}, not 'albert'")
  full = dict(HF_DEFAULTS)
  full.update(values)
  if full["position_embedding_type"] != "absolute":
    raise ConfigError(f"{source}: position_embedding_type={full['position_embedding_type']!r}; "
                      "ALBERT (the original) has absolute position embeddings only")
  if abs(float(full["layer_norm_eps"]) - LAYER_NORM_EPS) > 1e-15:
    raise ConfigError(f"{source}: layer_norm_eps={full['layer_norm_eps']} but the original "
                      f"(and this model) use {LAYER_NORM_EPS}; outputs would differ")
  act = full["hidden_act"]
  if act not in ACTIVATION_FROM_HF:
    raise ConfigError(f"{source}: hidden_act={act!r} has no counterpart here "
                      f"(known: {', '.join(sorted(ACTIVATION_FROM_HF))})")
  original = {key: full[key] for key in SHARED_HF_KEYS}
  original.update(_LEGACY_DEFAULTS)
  original["hidden_act"] = ACTIVATION_FROM_HF[act]
  return original


# ---------------------------------------------------------------------------------------------
# keras-hub's preset config.json

KERAS_HUB_BACKBONE = "AlbertBackbone"
# AlbertBackbone argument -> albert_config.json key (same meaning).
KERAS_HUB_KEYS = {"vocabulary_size": "vocab_size", "embedding_dim": "embedding_size",
                  "hidden_dim": "hidden_size", "num_layers": "num_hidden_layers",
                  "num_groups": "num_hidden_groups", "num_inner_repetitions": "inner_group_num",
                  "num_heads": "num_attention_heads", "intermediate_dim": "intermediate_size",
                  "max_sequence_length": "max_position_embeddings",
                  "num_segments": "type_vocab_size"}
# AlbertBackbone's defaults for the arguments it may leave out.
KERAS_HUB_DEFAULTS = {"num_groups": 1, "num_inner_repetitions": 1, "dropout": 0.0,
                      "max_sequence_length": 512, "num_segments": 2}


def from_keras_hub(values, source):
  """A keras-hub preset's config.json dict (`AlbertBackbone` serialized) -> the original's
  albert_config.json dict.

      from_keras_hub({"class_name": "AlbertBackbone", "config": {"vocabulary_size": 30000,
                      "num_layers": 12, ...}}, "albert_base_en_uncased/config.json")

  What AlbertBackbone fixes rather than configures is the original's: the tanh-approximated
  GELU (the original's `gelu`), LayerNorm epsilon 1e-12, truncated-normal init with stddev
  0.02. Its one `dropout` stands for both of the original's dropout probabilities.
  """
  name = values.get("class_name")
  if name != KERAS_HUB_BACKBONE:
    raise ConfigError(f"{source}: a keras-hub preset of class_name {name!r} "
                      f"(module {values.get('module')!r}), not {KERAS_HUB_BACKBONE!r}; "
                      "albert-tf reads ALBERT presets only")
  full = dict(KERAS_HUB_DEFAULTS)
  full.update(values["config"])
  absent = sorted(k for k in KERAS_HUB_KEYS if k not in full)
  if absent:
    raise ConfigError(f"{source}: the AlbertBackbone config lacks {', '.join(absent)}")
  original = {ours: full[theirs] for theirs, ours in KERAS_HUB_KEYS.items()}
  original["hidden_dropout_prob"] = full["dropout"]
  original["attention_probs_dropout_prob"] = full["dropout"]
  original["hidden_act"] = "gelu"
  original["initializer_range"] = 0.02
  original.update(_LEGACY_DEFAULTS)
  return original
