"""AlbertConfig: the original `albert_config.json`, read and written verbatim.

Every key of the released configs is kept (the legacy ones the model ignores too), unknown keys
are kept with a warning, and three keys of ours extend the format: `sharing` (paper Table 4),
`ln_type` (albert_zh's name for post-/pre-LayerNorm blocks) and `layout` ("google", the
original's, or "brightmart": brightmart/albert_zh's own checkpoints). Which file formats exist
(brightmart's and Hugging Face's besides) is decided in `config_formats.py`.
"""

import copy
import json
import logging
import os

from albert_tf import config_formats
from albert_tf import files
from albert_tf.config_formats import BRIGHTMART, BRIGHTMART_KEYS, LAYOUTS, ConfigError

logger = logging.getLogger(__name__)

# The files beside a run's checkpoints that say what model they hold: the config, and the flags
# that shape the model's variables besides it (a fine-tuning head's labels, say).
CONFIG_NAME = "albert_config.json"
MODEL_FLAGS_NAME = "model_flags.json"

# The original's keys with the defaults of its AlbertConfig constructor (they are xxlarge's
# shapes; `vocab_size` has no default). One source of truth for the key set.
ORIGINAL_DEFAULTS = {
    "attention_probs_dropout_prob": 0.0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "embedding_size": 128,
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 16384,
    "max_position_embeddings": 512,
    "num_attention_heads": 64,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": None,
}
# Present in the original's files, ignored by its model and by ours; kept for round trips.
LEGACY_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor",
               "layers_to_keep")
EXTENSION_DEFAULTS = {"sharing": "all", "ln_type": "postln", "layout": "google"}

SHARING_MODES = ("all", "attention", "ffn", "none")
LN_TYPES = ("postln", "preln")
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "swish", "linear")

_INT_KEYS = ("embedding_size", "hidden_size", "intermediate_size", "max_position_embeddings",
             "num_attention_heads", "num_hidden_layers", "num_hidden_groups", "inner_group_num",
             "type_vocab_size", "vocab_size")
_PROB_KEYS = ("attention_probs_dropout_prob", "hidden_dropout_prob")


class AlbertConfig:
  """The hyperparameters of an ALBERT model, with the original's key names.

  Example:
    >>> config = AlbertConfig.from_json_file("configs/albert_base_v2.json")
    >>> config.hidden_size, config.embedding_size
    (768, 128)
  """

  def __init__(self, vocab_size, **kwargs):
    values = dict(ORIGINAL_DEFAULTS)
    values.update(EXTENSION_DEFAULTS)
    values["vocab_size"] = vocab_size
    values.update(kwargs)
    # Keys written by to_dict: the original's full set, plus whatever was given explicitly.
    self._keys = list(ORIGINAL_DEFAULTS) + [k for k in kwargs if k not in ORIGINAL_DEFAULTS]
    self.__dict__.update(values)
    self._source = "<AlbertConfig>"
    self.validate()

  # --- construction -------------------------------------------------------------------------
  @classmethod
  def from_dict(cls, values, source="<dict>"):
    """Builds a config from a dict of albert_config.json keys; missing keys get the defaults."""
    if not isinstance(values, dict):
      raise ConfigError(f"{source}: an ALBERT config must be a JSON object, got "
                        f"{type(values).__name__}")
    known = (set(ORIGINAL_DEFAULTS) | set(EXTENSION_DEFAULTS) | {"layers_to_keep"}
             | set(BRIGHTMART_KEYS))
    unknown = sorted(set(values) - known)
    if unknown:
      logger.warning("%s: unknown config keys %s are kept but not used", source, unknown)
    if "vocab_size" not in values:
      raise ConfigError(f"{source}: missing required key 'vocab_size'")
    config = cls.__new__(cls)
    merged = dict(ORIGINAL_DEFAULTS)
    merged.update(EXTENSION_DEFAULTS)
    merged.update(values)
    config.__dict__.update(merged)
    config._keys = list(values)
    config._source = source
    config.validate()
    return config

  @classmethod
  def from_json_file(cls, json_file):
    """Reads an albert_config.json (the original's or ours), one of brightmart/albert_zh's
    config files (they select `layout: "brightmart"`), or a Hugging Face ALBERT config.json
    (recognised by its `model_type`); see `config_formats.py`."""
    path = os.fspath(json_file)
    if not os.path.exists(path):
      raise FileNotFoundError(f"ALBERT config file not found: {path}")
    with open(path, "r", encoding="utf-8") as f:
      text = f.read()
    try:
      values = json.loads(text)
    except json.JSONDecodeError as e:
      raise ConfigError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: "
                        f"{e.msg})") from None
    if isinstance(values, dict):
      values = config_formats.albert_config_values(values, path)
    return cls.from_dict(values, source=path)

  # --- serialisation ------------------------------------------------------------------------
  def to_dict(self):
    """The config as albert_config.json keys: the keys it was read with, plus changed extras."""
    keys = list(self._keys)
    for key, default in EXTENSION_DEFAULTS.items():
      if key not in keys and getattr(self, key) != default:
        keys.append(key)
    return {k: copy.deepcopy(getattr(self, k)) for k in keys}

  def to_json_string(self):
    # The original writes sorted keys with a two-space indent.
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def to_json_file(self, json_file):
    """Writes the config; the file appears only whole."""
    files.write_text(json_file, self.to_json_string())

  def replace(self, **changes):
    """A copy with some keys changed (validated)."""
    values = self.to_dict()
    values.update(changes)
    return AlbertConfig.from_dict(values, source=self._source)

  def __eq__(self, other):
    return isinstance(other, AlbertConfig) and self.to_dict() == other.to_dict()

  def __repr__(self):
    return f"AlbertConfig({self.to_dict()})"

  # --- derived values -----------------------------------------------------------------------
  @property
  def attention_head_size(self):
    return self.hidden_size // self.num_attention_heads

  def layer_group(self, layer_index):
    """The group used by layer `layer_index`, as in the original: int(i / L * G)."""
    return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

  @property
  def shares_attention(self):
    return self.sharing in ("all", "attention")

  @property
  def shares_ffn(self):
    return self.sharing in ("all", "ffn")

  @property
  def is_brightmart(self):
    """brightmart/albert_zh's layout: E->H projection inside the embeddings, H-wide
    position/type tables, one `layer_shared` block, an MLM head tied to both factors."""
    return self.layout == BRIGHTMART

  # --- validation ---------------------------------------------------------------------------
  def validate(self):
    src = self._source

    def fail(key, why):
      raise ConfigError(f"{src}: '{key}' {why} (got {getattr(self, key, None)!r})")

    for key in _INT_KEYS:
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, int):
        fail(key, "must be an integer")
      if value <= 0:
        fail(key, "must be positive")
    for key in _PROB_KEYS:
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(key, "must be a number")
      if not 0.0 <= value < 1.0:
        fail(key, "must be a probability in [0, 1)")
    r = self.initializer_range
    if isinstance(r, bool) or not isinstance(r, (int, float)) or r <= 0:
      fail("initializer_range", "must be a positive number")
    if not isinstance(self.hidden_act, str) or self.hidden_act.lower() not in ACTIVATIONS:
      fail("hidden_act", f"is not a supported activation; choose one of {list(ACTIVATIONS)}")
    if self.hidden_size % self.num_attention_heads:
      fail("hidden_size", f"must be divisible by num_attention_heads "
                          f"({self.num_attention_heads})")
    if self.num_hidden_groups > self.num_hidden_layers:
      fail("num_hidden_groups", f"cannot exceed num_hidden_layers ({self.num_hidden_layers})")
    if self.sharing not in SHARING_MODES:
      fail("sharing", f"must be one of {list(SHARING_MODES)}")
    if self.ln_type not in LN_TYPES:
      fail("ln_type", f"must be one of {list(LN_TYPES)}")
    if self.layout not in LAYOUTS:
      fail("layout", f"must be one of {list(LAYOUTS)}")
    if self.is_brightmart:
      # brightmart's modeling.py shares one block across every layer (`layer_shared`).
      for key, want in (("num_hidden_groups", 1), ("inner_group_num", 1), ("sharing", "all")):
        if getattr(self, key) != want:
          fail(key, f"must be {want!r} with layout 'brightmart' (brightmart/albert_zh shares "
                    "one block, 'layer_shared', across all layers)")
