"""keras-hub presets (`albert_base_en_uncased` and its siblings), read without keras-hub.

    weights = sources.read("albert_base_en_uncased")  # a preset directory, detected
    weights.format                                     # "keras_hub"
    weights.config_file                                # ".../config.json": AlbertConfig reads it
    weights.spm_model_file                             # ".../assets/tokenizer/vocabulary.spm"
    weights.do_lower_case                              # False: keras-hub does not lower-case

    python -m albert_tf.cli.convert --from=keras_hub --to=tf1 albert_base_en_uncased out/

A preset, as keras-hub's `save_to_preset` writes it for an `AlbertBackbone` (and a task model
built on one), is a directory of:
  - `config.json`: Keras' serialization of the `AlbertBackbone` (`class_name`, `config` with
    `vocabulary_size`, `num_layers`, ...); `config_formats.from_keras_hub` translates it, so it
    also stands for --albert_config_file;
  - `model.weights.h5`: the backbone's weights as Keras 3 stores them,
    `layers/<layer key>/[<sub-layer attribute>/]vars/<index>`;
  - optionally `task.json` + `task.weights.h5`: an `AlbertTextClassifier`'s `logits` Dense
    (read as the original's classifier `output_weights` [labels, H] / `output_bias`) or an
    `AlbertMaskedLM`'s `mlm_head` (read as `cls/predictions/...`; its decoder is the tied word
    embedding, as in the original);
  - `tokenizer.json` and `assets/tokenizer/vocabulary.spm` (the SentencePiece model), and
    `metadata.json`.

The layer keys in the h5 file are Keras' own (`dense`, `dense_1`, `transformer_encoder_3`, in
the model's layer order); newer Keras also stores each layer's name (`embedding_projection`,
`group_1_inner_layer_0`) as an attribute of its `vars` group, which is used when present.

keras-hub computes what the original computes, with two differences a user should know:
  - its AlbertTokenizer runs SentencePiece on the text as it is: no lower-casing (the original's
    `do_lower_case=True` for the English models) and no accent stripping (the original's
    `preprocess_text`). Its ids are reproduced with do_lower_case=False for text without
    accents; the README says so.
  - its masked-LM head normalizes with LayerNorm epsilon 1e-5, the original's with 1e-12. The
    weights are the original's (keras-hub converted them), so this model computes the
    original's logits; keras-hub's own differ from them slightly.
"""

import json
import logging
import os

import numpy as np

from albert_tf import config_formats
from albert_tf.interop import checkpoints, sources

logger = logging.getLogger(__name__)

FORMAT = "keras_hub"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
METADATA_FILE = "metadata.json"  # keras-hub's save_to_preset: keras_hub_version and the like
SPM_FILE = os.path.join("assets", "tokenizer", "vocabulary.spm")
_MAX_CONFIG_BYTES = 1 << 20  # a preset's config.json is a few hundred bytes

CLASSIFIER = "AlbertTextClassifier"
MASKED_LM = "AlbertMaskedLM"
_TASK_HEADS = {CLASSIFIER: "classification", MASKED_LM: "pretraining"}
_LINEAR = (None, "linear")

# Keras' layer key in model.weights.h5 (class name in snake case, numbered in the model's
# layer order) -> AlbertBackbone's layer name, for files written without the name attributes.
_BACKBONE_KEYS = {"reversible_embedding": "token_embedding",
                  "position_embedding": "position_embedding",
                  "embedding": "segment_embedding",
                  "layer_normalization": "embeddings_layer_norm",
                  "dense": "embedding_projection", "dense_1": "pooled_dense"}
_TASK_KEYS = {"dense": "logits", "masked_lm_head": "mlm_head"}


def _read_json(path):
  if os.path.getsize(path) > _MAX_CONFIG_BYTES:
    raise ValueError(f"{path} is too large for a keras-hub config")
  with open(path, encoding="utf-8") as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None


def _keras_hub_object(values):
  """Whether a dict is a Keras serialization of a keras-hub class."""
  if not config_formats.is_keras_serialized(values):
    return False
  return (str(values.get("module", "")).startswith("keras_hub")
          or str(values.get("registered_name", "")).startswith("keras_hub>"))


def _json_or_fault(path):
  """(the file's JSON, None) or (None, what is wrong with it); (None, None) when it is absent."""
  if not os.path.isfile(path):
    return None, None
  try:
    return _read_json(path), None
  except (OSError, ValueError, UnicodeDecodeError) as e:
    return None, str(e)


def detect(path):
  """Whether `path` is a keras-hub preset directory (of any model: another model's preset is
  claimed, so that reading it says what it is): a config.json that is a keras-hub class's
  serialization, or model.weights.h5 (Keras 3's name) with no config.json that says otherwise,
  or keras-hub's metadata.json. An incomplete preset is claimed too, so that `read` names what
  it lacks instead of "no checkpoint found". Hugging Face's config.json (`model_type`) and
  ours are not."""
  path = os.fspath(path)
  if not os.path.isdir(path):
    return False
  config, _ = _json_or_fault(os.path.join(path, CONFIG_FILE))
  if config is not None:
    return _keras_hub_object(config)
  metadata, _ = _json_or_fault(os.path.join(path, METADATA_FILE))
  return (os.path.isfile(os.path.join(path, WEIGHTS_FILE))
          or (isinstance(metadata, dict) and "keras_hub_version" in metadata))


def _check_complete(path):
  """Refuses a preset missing a file or holding a config.json that is not JSON, in one line
  naming the file and the fix (before anything is read: a script reads the config first)."""
  advice = ("download the whole preset again (keras_hub's from_preset, or "
            "kagglehub.model_download) and pass its folder")
  config_path = os.path.join(path, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise checkpoints.CheckpointError(f"{path} looks like a keras-hub preset but has no "
                                      f"{CONFIG_FILE} (the backbone's config): {advice}")
  _, fault = _json_or_fault(config_path)
  if fault:
    raise checkpoints.CheckpointError(f"{fault}: the keras-hub preset's config is damaged; "
                                      f"{advice}")
  if not os.path.isfile(os.path.join(path, WEIGHTS_FILE)):
    raise checkpoints.CheckpointError(f"{path} is a keras-hub preset without {WEIGHTS_FILE} "
                                      f"(its weights): {advice}")


def read(path, with_arrays=True):
  """The preset at `path` as `sources.ForeignWeights` (the original's TF1 names)."""
  path = os.fspath(path)
  _check_complete(path)
  config_path = os.path.join(path, CONFIG_FILE)
  values = _read_json(config_path)
  config = config_formats.from_keras_hub(values, config_path)  # refuses a BertBackbone
  task, head = _task(path)
  spm_model_file = os.path.join(path, SPM_FILE)
  weights = sources.ForeignWeights(
      format=FORMAT, path=path, arrays={}, config=config,
      spm_model_file=spm_model_file if os.path.isfile(spm_model_file) else None,
      do_lower_case=False, head=head, config_file=config_path,
      num_attention_heads=config.get("num_attention_heads"))
  if not with_arrays:
    return weights
  keras_config = dict(config_formats.KERAS_HUB_DEFAULTS, **values["config"])
  weights.arrays = _backbone_arrays(os.path.join(path, WEIGHTS_FILE), keras_config)
  if task is not None:
    arrays, unused = _task_arrays(os.path.join(path, TASK_WEIGHTS_FILE), task, keras_config)
    weights.arrays.update(arrays)
    weights.unused.extend(unused)
  return weights


def _task(path):
  """(task.json's dict, our head name) of the preset's task model; (None, None) without one."""
  task_path = os.path.join(path, TASK_CONFIG_FILE)
  if not os.path.isfile(task_path):
    return None, None
  task = _read_json(task_path)
  name = task.get("class_name") if isinstance(task, dict) else None
  if name not in _TASK_HEADS:
    raise ValueError(f"{task_path}: a keras-hub task of class_name {name!r}; albert-tf reads "
                     f"{', '.join(_TASK_HEADS)} (remove task.json and task.weights.h5 to read "
                     "the backbone alone)")
  if not os.path.isfile(os.path.join(path, TASK_WEIGHTS_FILE)):
    raise ValueError(f"{task_path} has no {TASK_WEIGHTS_FILE} beside it")
  task_config = task.get("config") or {}
  if name == CLASSIFIER and task_config.get("activation") not in _LINEAR:
    logger.warning("%s: the classifier applies %r to its logits; this model's head gives the "
                   "logits themselves", task_path, task_config.get("activation"))
  return task, _TASK_HEADS[name]


# ---------------------------------------------------------------------------------------------
# model.weights.h5 and task.weights.h5


class _H5Layers:
  """A Keras 3 weights file's layers by keras-hub layer name; `get` reads one variable,
  checking its shape against what the preset's config says."""

  def __init__(self, h5, file_path, fallback_names):
    self.file_path = file_path
    self.layers = {}
    group = h5.get("layers")
    if group is None:
      raise checkpoints.CheckpointError(f"{file_path} has no 'layers' group: not a Keras 3 "
                                        "weights file")
    for key, layer in group.items():
      name = None
      vars_group = layer.get("vars") if hasattr(layer, "get") else None
      if vars_group is not None:
        name = vars_group.attrs.get("name")
      if isinstance(name, bytes):
        name = name.decode("utf-8")
      name = name or fallback_names(key)
      if name:
        self.layers[name] = (key, layer)

  def get(self, layer_name, index, shape, tf1_name, sub=None):
    where = f"layer '{layer_name}'" + (f" ({sub})" if sub else "")
    if layer_name not in self.layers:
      raise checkpoints.CheckpointError(f"{self.file_path} has no {where}, needed for "
                                        f"'{tf1_name}'")
    key, layer = self.layers[layer_name]
    h5_path = "/".join(["layers", key] + ([sub] if sub else []) + ["vars", str(index)])
    dataset = layer.get("/".join(([sub] if sub else []) + ["vars", str(index)]))
    if dataset is None:
      raise checkpoints.CheckpointError(f"{self.file_path}: no variable '{h5_path}' of {where}, "
                                        f"needed for '{tf1_name}'")
    if list(dataset.shape) != list(shape):
      raise checkpoints.CheckpointError(
          f"{self.file_path}: variable '{h5_path}' of {where} has shape {list(dataset.shape)}, "
          f"but the preset's config.json makes '{tf1_name}' {list(shape)}")
    return np.asarray(dataset[()], dtype=np.float32)


def _open_h5(file_path):
  import h5py  # pylint: disable=g-import-not-at-top
  if not os.path.isfile(file_path):
    raise checkpoints.CheckpointError(f"{file_path} is missing")
  try:
    return h5py.File(file_path, "r")
  except OSError as e:
    raise checkpoints.CheckpointError(f"cannot read {file_path}: {e}") from None


def _dims(keras_config):
  c = keras_config
  hidden, heads = c["hidden_dim"], c["num_heads"]
  if hidden % heads:
    raise ValueError(f"hidden_dim={hidden} is not a multiple of num_heads={heads}")
  return (c["vocabulary_size"], c["embedding_dim"], hidden, heads, hidden // heads,
          c["intermediate_dim"])


def _backbone_arrays(file_path, keras_config):
  """{TF1 name: ndarray} of model.weights.h5."""
  vocab, emb, hidden, heads, head_dim, inner = _dims(keras_config)
  groups, per_group = keras_config["num_groups"], keras_config["num_inner_repetitions"]

  def fallback(key):
    if key.startswith("transformer_encoder"):
      number = int(key.rpartition("_")[2]) if key != "transformer_encoder" else 0
      return f"group_{number // per_group}_inner_layer_{number % per_group}"
    return _BACKBONE_KEYS.get(key)

  arrays = {}
  with _open_h5(file_path) as h5:
    layers = _H5Layers(h5, file_path, fallback)

    def put(tf1_name, layer_name, index, shape, sub=None, new_shape=None):
      value = layers.get(layer_name, index, shape, tf1_name, sub)
      arrays[tf1_name] = value.reshape(new_shape) if new_shape else value

    put("bert/embeddings/word_embeddings", "token_embedding", 0, [vocab, emb])
    put("bert/embeddings/position_embeddings", "position_embedding", 0,
        [keras_config["max_sequence_length"], emb])
    put("bert/embeddings/token_type_embeddings", "segment_embedding", 0,
        [keras_config["num_segments"], emb])
    put("bert/embeddings/LayerNorm/gamma", "embeddings_layer_norm", 0, [emb])
    put("bert/embeddings/LayerNorm/beta", "embeddings_layer_norm", 1, [emb])
    put("bert/encoder/embedding_hidden_mapping_in/kernel", "embedding_projection", 0,
        [emb, hidden])
    put("bert/encoder/embedding_hidden_mapping_in/bias", "embedding_projection", 1, [hidden])
    for g in range(groups):
      for i in range(per_group):
        layer = f"group_{g}_inner_layer_{i}"
        scope = f"bert/encoder/transformer/group_{g}/inner_group_{i}/"
        attention = "_self_attention_layer/"
        # keras' MultiHeadAttention keeps heads apart ([H, heads, head_dim]); the original's
        # [H, H] is the same matrix with the heads side by side (head-major).
        for ours, theirs in (("query", "query_dense"), ("key", "key_dense"),
                             ("value", "value_dense")):
          put(f"{scope}attention_1/self/{ours}/kernel", layer, 0, [hidden, heads, head_dim],
              attention + theirs, [hidden, hidden])
          put(f"{scope}attention_1/self/{ours}/bias", layer, 1, [heads, head_dim],
              attention + theirs, [hidden])
        put(f"{scope}attention_1/output/dense/kernel", layer, 0, [heads, head_dim, hidden],
            attention + "output_dense", [hidden, hidden])
        put(f"{scope}attention_1/output/dense/bias", layer, 1, [hidden],
            attention + "output_dense")
        put(f"{scope}LayerNorm/gamma", layer, 0, [hidden], "_self_attention_layer_norm")
        put(f"{scope}LayerNorm/beta", layer, 1, [hidden], "_self_attention_layer_norm")
        put(f"{scope}ffn_1/intermediate/dense/kernel", layer, 0, [hidden, inner],
            "_feedforward_intermediate_dense")
        put(f"{scope}ffn_1/intermediate/dense/bias", layer, 1, [inner],
            "_feedforward_intermediate_dense")
        put(f"{scope}ffn_1/intermediate/output/dense/kernel", layer, 0, [inner, hidden],
            "_feedforward_output_dense")
        put(f"{scope}ffn_1/intermediate/output/dense/bias", layer, 1, [hidden],
            "_feedforward_output_dense")
        put(f"{scope}LayerNorm_1/gamma", layer, 0, [hidden], "_feedforward_layer_norm")
        put(f"{scope}LayerNorm_1/beta", layer, 1, [hidden], "_feedforward_layer_norm")
    put("bert/pooler/dense/kernel", "pooled_dense", 0, [hidden, hidden])
    put("bert/pooler/dense/bias", "pooled_dense", 1, [hidden])
    extra = sorted(f"layers/{key}" for name, (key, _) in layers.layers.items()
                   if name.startswith("group_") and name not in {
                       f"group_{g}_inner_layer_{i}" for g in range(groups)
                       for i in range(per_group)})
    if extra:
      raise checkpoints.CheckpointError(
          f"{file_path} holds transformer layers {extra} that config.json's num_groups="
          f"{groups}, num_inner_repetitions={per_group} have no place for")
  return arrays


def _task_arrays(file_path, task, keras_config):
  """({TF1 name: ndarray}, unused names) of task.weights.h5."""
  vocab, emb, hidden = _dims(keras_config)[:3]
  arrays = {}
  with _open_h5(file_path) as h5:
    layers = _H5Layers(h5, file_path, _TASK_KEYS.get)
    if task["class_name"] == CLASSIFIER:
      num_classes = (task.get("config") or {}).get("num_classes")
      if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"{file_path}: task.json's num_classes is {num_classes!r}")
      # Dense(num_classes) on the pooled output: kernel [H, labels]; the original's
      # `output_weights` is [labels, H] (logits = pooled @ output_weights^T + output_bias).
      arrays["output_weights"] = layers.get("logits", 0, [hidden, num_classes],
                                            "output_weights").T.copy()
      arrays["output_bias"] = layers.get("logits", 1, [num_classes], "output_bias")
    else:
      if layers.layers.get("mlm_head", (None, {}))[1].get("vars/1") is not None:
        raise checkpoints.CheckpointError(
            f"{file_path}: the masked-LM head has its own output kernel; ALBERT's (and this "
            "model's) decoder is the word embedding")
      get = layers.get
      arrays["cls/predictions/transform/dense/kernel"] = get(
          "mlm_head", 0, [hidden, emb], "cls/predictions/transform/dense/kernel",
          "_intermediate_dense")
      arrays["cls/predictions/transform/dense/bias"] = get(
          "mlm_head", 1, [emb], "cls/predictions/transform/dense/bias", "_intermediate_dense")
      arrays["cls/predictions/transform/LayerNorm/gamma"] = get(
          "mlm_head", 0, [emb], "cls/predictions/transform/LayerNorm/gamma",
          "_intermediate_layer_norm")
      arrays["cls/predictions/transform/LayerNorm/beta"] = get(
          "mlm_head", 1, [emb], "cls/predictions/transform/LayerNorm/beta",
          "_intermediate_layer_norm")
      arrays["cls/predictions/output_bias"] = get("mlm_head", 0, [vocab],
                                                  "cls/predictions/output_bias")
      logger.info("%s: keras-hub's masked-LM head normalizes with epsilon 1e-5, the original's "
                  "(and this model's) with 1e-12; masked-LM logits differ slightly from "
                  "keras-hub's", file_path)
  return arrays, []


sources.register(FORMAT, "a keras-hub preset directory (config.json + model.weights.h5)",
                 detect, read)
