"""Hugging Face ALBERT directories: names, config.json and tokenizer files (SPEC "Hugging Face
interop"), read and written with the `safetensors` package's numpy API (no torch).

    arrays = read_huggingface_weights("albert_base_hf")     # {HF name: np.ndarray}
    tf1_arrays, unused = to_tf1_names(arrays)               # {original TF1 name: np.ndarray}
    config = config_from_huggingface("albert_base_hf/config.json")

The map between the two name sets lives here once (`_PAIRS`, `_TOKEN_PAIRS`); checkpoints.py
loads a directory through it and convert.py writes one. Linear weights are `[out, in]` in
Hugging Face (the transpose of a TF kernel); the original's `output_weights` matrices are
already `[out, in]` and are copied as they are.
"""

import json
import os
import re

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.config_formats import (ACTIVATION_TO_HF, HF_DEFAULTS, LAYER_NORM_EPS, SHARED_HF_KEYS,
                                      ConfigError, from_huggingface)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
PREFIX = "albert."

# Head kinds and the transformers class whose layout each one is.
ARCHITECTURES = {
    "pretraining": "AlbertForPreTraining",
    "masked_lm": "AlbertForMaskedLM",
    "classification": "AlbertForSequenceClassification",
    "multiple_choice": "AlbertForMultipleChoice",
    "squad_v1": "AlbertForQuestionAnswering",
    "token_classification": "AlbertForTokenClassification",
    "encoder": "AlbertModel",
}
HEAD_OF_ARCHITECTURE = {v: k for k, v in ARCHITECTURES.items()}


def _architecture(values):
  architectures = (values.get("architectures") or []) if isinstance(values, dict) else []
  return architectures[0] if architectures else None


def unknown_architecture(values):
  """config.json's architecture when albert-tf has no model of it (a custom head class, whose
  `classifier` would pass for one of ours), else None."""
  architecture = _architecture(values)
  return architecture if architecture not in HEAD_OF_ARCHITECTURE else None


def head_of_architecture(values):
  """The head kind config.json's `architectures` names (None when it names none we know)."""
  return HEAD_OF_ARCHITECTURE.get(_architecture(values))


# ---------------------------------------------------------------------------------------------
# Names. Each pair is (TF1 name, Hugging Face name, transposed?); `{g}` and `{k}` stand for the
# group and the block inside it.


def _dense(tf1, hf):
  return [(tf1 + "/kernel", hf + ".weight", True), (tf1 + "/bias", hf + ".bias", False)]


def _layer_norm(tf1, hf):
  return [(tf1 + "/gamma", hf + ".weight", False), (tf1 + "/beta", hf + ".bias", False)]


def _matrix_head(tf1, hf):
  """The original's `output_weights [out, in]` / `output_bias [out]`: already Linear's layout."""
  return [(tf1 + "output_weights", hf + ".weight", False),
          (tf1 + "output_bias", hf + ".bias", False)]


_BLOCK_TF1 = "bert/encoder/transformer/group_{g}/inner_group_{k}/"
_BLOCK_HF = PREFIX + "encoder.albert_layer_groups.{g}.albert_layers.{k}."
_PAIRS = (
    [("bert/embeddings/word_embeddings", PREFIX + "embeddings.word_embeddings.weight", False),
     ("bert/embeddings/position_embeddings", PREFIX + "embeddings.position_embeddings.weight",
      False),
     ("bert/embeddings/token_type_embeddings",
      PREFIX + "embeddings.token_type_embeddings.weight", False)]
    + _layer_norm("bert/embeddings/LayerNorm", PREFIX + "embeddings.LayerNorm")
    + _dense("bert/encoder/embedding_hidden_mapping_in",
             PREFIX + "encoder.embedding_hidden_mapping_in")
    + _dense(_BLOCK_TF1 + "attention_1/self/query", _BLOCK_HF + "attention.query")
    + _dense(_BLOCK_TF1 + "attention_1/self/key", _BLOCK_HF + "attention.key")
    + _dense(_BLOCK_TF1 + "attention_1/self/value", _BLOCK_HF + "attention.value")
    + _dense(_BLOCK_TF1 + "attention_1/output/dense", _BLOCK_HF + "attention.dense")
    + _layer_norm(_BLOCK_TF1 + "LayerNorm", _BLOCK_HF + "attention.LayerNorm")
    + _dense(_BLOCK_TF1 + "ffn_1/intermediate/dense", _BLOCK_HF + "ffn")
    + _dense(_BLOCK_TF1 + "ffn_1/intermediate/output/dense", _BLOCK_HF + "ffn_output")
    + _layer_norm(_BLOCK_TF1 + "LayerNorm_1", _BLOCK_HF + "full_layer_layer_norm")
    + _dense("bert/pooler/dense", PREFIX + "pooler")
    + _dense("cls/predictions/transform/dense", "predictions.dense")
    + _layer_norm("cls/predictions/transform/LayerNorm", "predictions.LayerNorm")
    + [("cls/predictions/output_bias", "predictions.bias", False)]
    + _matrix_head("cls/seq_relationship/", "sop_classifier.classifier")
    + _matrix_head("", "classifier")
    + _matrix_head("cls/squad/", "qa_outputs"))
# transformers names the token classifier's Linear `classifier` too (AlbertForTokenClassification
# differs from AlbertForSequenceClassification by its `architectures` alone); ours is
# `token_classifier/...`. On reading, config.json says which of the two a `classifier` is.
_TOKEN_PAIRS = _matrix_head("token_classifier/", "classifier")
# The MLM decoder is tied to the word embeddings and to predictions.bias in transformers; it is
# written for readers that expect it and checked on reading.
_TIED = {"predictions.decoder.weight": PREFIX + "embeddings.word_embeddings.weight",
         "predictions.decoder.bias": "predictions.bias"}
# Buffers, not weights (older transformers versions saved them).
_BUFFERS = re.compile(r"(^|\.)(position_ids|token_type_ids)$")


def _pattern(template):
  """A regex matching `template` with its `{g}` / `{k}` placeholders as named numbers."""
  escaped = re.escape(template).replace(r"\{g\}", r"(?P<g>\d+)").replace(r"\{k\}", r"(?P<k>\d+)")
  return re.compile("^" + escaped + "$")


_TO_HF = [(_pattern(tf1), hf, transposed) for tf1, hf, transposed in _PAIRS + _TOKEN_PAIRS]
_FROM_HF = [(_pattern(hf), tf1, transposed) for tf1, hf, transposed in _PAIRS]
# The first match wins: with the token pairs first, `classifier` is the token classifier.
_FROM_HF_TOKEN = [(_pattern(hf), tf1, transposed)
                  for tf1, hf, transposed in _TOKEN_PAIRS + _PAIRS]
# The original's SQuAD v2.0 head, which transformers has no class for.
UNSUPPORTED_TF1_HEADS = ("start_logits/", "end_logits/", "answer_class/")


def _from_hf_table(head):
  """The Hugging Face -> TF1 table for a directory whose config.json names `head`."""
  return _FROM_HF_TOKEN if head == "token_classification" else _FROM_HF


def _translate(name, table):
  for pattern, template, transposed in table:
    match = pattern.match(name)
    if match:
      return template.format(**match.groupdict()), transposed
  return None, False


def hf_name(tf1_name):
  """The Hugging Face name of an original TF1 variable name (None if it has none)."""
  return _translate(tf1_name, _TO_HF)[0]


def to_huggingface_names(tf1_arrays, with_prefix=True):
  """{TF1 name: array} -> {Hugging Face name: array}, transposing Linear kernels.

  Raises ValueError on a name with no Hugging Face counterpart (the v2 SQuAD head, an
  embedding without the E->H projection is caught earlier by `check_expressible`).
  """
  out = {}
  for name, value in tf1_arrays.items():
    target, transposed = _translate(name, _TO_HF)
    if target is None:
      raise ValueError(f"'{name}' has no counterpart in Hugging Face's ALBERT")
    if not with_prefix and target.startswith(PREFIX):
      target = target[len(PREFIX):]
    out[target] = np.ascontiguousarray(value.T if transposed else value)
  if "cls/predictions/output_bias" in tf1_arrays:
    out["predictions.decoder.weight"] = out[_TIED["predictions.decoder.weight"]]
    out["predictions.decoder.bias"] = out["predictions.bias"]
  return out


def to_tf1_names(hf_arrays, head=None):
  """{Hugging Face name: array} -> ({TF1 name: array}, [unused Hugging Face names]).

  Accepts the prefixed layout (`albert.…`, the task classes) and AlbertModel's unprefixed
  one. The tied MLM decoder is checked against what it is tied to, buffers are dropped.
  `head`: the kind config.json's architectures names (`head_of_architecture`); with
  "token_classification", `classifier` is read as the token classifier.
  """
  table = _from_hf_table(head)
  prefixed = _is_prefixed(hf_arrays)
  out, unused = {}, []
  for name, value in sorted(hf_arrays.items()):
    key = _prefixed_name(name, prefixed)
    if _BUFFERS.search(key):
      continue
    if key in _TIED:
      tied = _TIED[key]
      if tied not in hf_arrays:
        if key == "predictions.decoder.bias":  # some writers keep only the decoder's copy
          out["cls/predictions/output_bias"] = np.asarray(value)
        continue
      if not np.array_equal(np.asarray(value), np.asarray(hf_arrays[tied])):
        raise ValueError(f"'{name}' differs from '{tied}', which it is tied to in ALBERT; "
                         "this model cannot be expressed with the original's MLM head")
      continue
    target, transposed = _translate(key, table)
    if target is None:
      unused.append(name)
      continue
    value = np.asarray(value)
    out[target] = np.ascontiguousarray(value.T if transposed else value)
  return out, unused


def _is_prefixed(hf_names):
  return any(n.startswith(PREFIX) for n in hf_names)


def _prefixed_name(name, prefixed):
  """`name` in the task classes' layout (AlbertModel's unprefixed names gain `albert.`)."""
  if prefixed or not name.startswith(("embeddings.", "encoder.", "pooler.")):
    return name
  return PREFIX + name


def to_tf1_shapes(hf_shapes, head=None):
  """{Hugging Face name: shape} -> {TF1 name: shape}: `to_tf1_names` without the data (to
  tell a directory's head from its safetensors headers alone)."""
  table = _from_hf_table(head)
  prefixed = _is_prefixed(hf_shapes)
  out = {}
  for name, shape in hf_shapes.items():
    key = _prefixed_name(name, prefixed)
    if key == "predictions.decoder.bias":
      key = "predictions.bias"
    target, transposed = _translate(key, table)
    if target is not None:
      out[target] = list(shape)[::-1] if transposed else list(shape)
  return out


def head_of(tf1_names):
  """The head kind a set of TF1 names holds: pretraining, masked_lm, classification (or
  multiple choice: the same names), squad_v1, squad_v2, token_classification or encoder."""
  names = set(tf1_names)
  if any(n.startswith(UNSUPPORTED_TF1_HEADS) for n in names):
    return "squad_v2"
  if "cls/squad/output_weights" in names:
    return "squad_v1"
  if "token_classifier/output_weights" in names:
    return "token_classification"
  if "output_weights" in names:
    return "classification"
  if "cls/predictions/output_bias" in names:
    return "pretraining" if "cls/seq_relationship/output_weights" in names else "masked_lm"
  return "encoder"


# ---------------------------------------------------------------------------------------------
# config.json


def check_expressible(config, head=None):
  """Raises ValueError when Hugging Face's ALBERT cannot hold this model (or its head)."""
  if config.is_brightmart:
    raise ValueError(
        "this model has brightmart/albert_zh's layout (config 'layout': 'brightmart'): its "
        "E->H projection comes before H-wide position/type embeddings and the embedding "
        "LayerNorm, and its MLM head is tied to both embedding factors; Hugging Face's ALBERT "
        "adds E-wide position/type embeddings and projects after them, so it cannot express "
        "this model. brightmart's Google-layout releases (albert_tiny_google_zh, "
        "albert_small_google_zh) and Google's albert_*_zh models convert; keep this one as a "
        "TF1 checkpoint (--to=tf1) or an albert-tf checkpoint")
  # The original (and our encoder) builds the projection only when E != H.
  if config.embedding_size == config.hidden_size:
    raise ValueError("this model has no E->H projection (embedding_size == hidden_size); "
                     "Hugging Face's ALBERT always has one (embedding_hidden_mapping_in), so "
                     "it cannot be expressed there without inventing weights")
  if config.sharing != "all":
    raise ValueError(f"sharing={config.sharing!r}: Hugging Face's ALBERT shares whole blocks "
                     "by group only (sharing='all'); a model with no sharing at all is "
                     "sharing='all' with num_hidden_groups=num_hidden_layers")
  if config.ln_type != "postln":
    raise ValueError(f"ln_type={config.ln_type!r}: Hugging Face's ALBERT is post-LayerNorm")
  # transformers picks layer i's group as int(i / (L / G)), the original as int(i / L * G):
  # the same numbers but for floating-point rounding, which is checked here.
  hf_groups = [int(i / (config.num_hidden_layers / config.num_hidden_groups))
               for i in range(config.num_hidden_layers)]
  if hf_groups != [config.layer_group(i) for i in range(config.num_hidden_layers)]:
    raise ValueError(f"num_hidden_layers={config.num_hidden_layers} with num_hidden_groups="
                     f"{config.num_hidden_groups}: transformers would assign layers to groups "
                     "differently from the original (floating-point rounding)")
  if config.hidden_act not in ACTIVATION_TO_HF:
    raise ValueError(f"hidden_act={config.hidden_act!r} has no transformers equivalent")
  if head == "squad_v2":
    raise ValueError("the SQuAD v2.0 head (start/end/answer-class, XLNet style) has no "
                     "counterpart in transformers (AlbertForQuestionAnswering is the v1 head: "
                     "one dense [2, H] on every token); convert a v1 model, or the encoder "
                     "alone with --head=encoder")


def config_to_huggingface(config, head, num_labels=None, special_ids=None, labels=None):
  """The config.json dict of a transformers ALBERT model of kind `head`; a classifier's
  `id2label` / `label2id` name `labels` (in id order; transformers' `LABEL_i` without)."""
  check_expressible(config, head)
  values = {"architectures": [ARCHITECTURES[head]], "model_type": "albert"}
  for key in SHARED_HF_KEYS:
    values[key] = getattr(config, key)
  values["hidden_act"] = ACTIVATION_TO_HF[config.hidden_act]
  values.update(layer_norm_eps=LAYER_NORM_EPS, position_embedding_type="absolute",
                classifier_dropout_prob=HF_DEFAULTS["classifier_dropout_prob"])
  values.update(special_ids or {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3})
  if head in ("classification", "token_classification"):
    labels = list(labels) if labels else [f"LABEL_{i}" for i in range(num_labels)]
    values["id2label"] = {str(i): label for i, label in enumerate(labels)}
    values["label2id"] = {label: i for i, label in enumerate(labels)}
  if head == "classification":
    values["problem_type"] = ("regression" if num_labels == 1
                              else "single_label_classification")
  return values


def read_json(path):
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ConfigError(f"{path}: not valid JSON ({e})") from None


def config_from_huggingface(path_or_dict, source=None):
  """An AlbertConfig from a transformers ALBERT config.json (path or dict)."""
  if isinstance(path_or_dict, dict):
    values, source = path_or_dict, source or "<config.json>"
  else:
    values, source = read_json(path_or_dict), os.fspath(path_or_dict)
  return AlbertConfig.from_dict(from_huggingface(values, source), source=source)


def labels_of(values):
  """The label names of a config.json's `id2label` in id order, or None when it has none (or
  its ids are not 0 .. n-1)."""
  id2label = values.get("id2label")
  if not isinstance(id2label, dict) or not id2label:
    return None
  try:
    by_id = {int(i): str(label) for i, label in id2label.items()}
  except (TypeError, ValueError):
    return None
  if sorted(by_id) != list(range(len(by_id))):
    return None
  return [by_id[i] for i in range(len(by_id))]


def num_labels_of(values):
  """The label count a config.json says (id2label wins over num_labels, as in transformers)."""
  if "id2label" in values:
    return len(values["id2label"])
  return int(values.get("num_labels", 2))


# ---------------------------------------------------------------------------------------------
# Directories.


def is_huggingface_dir(path):
  """Whether `path` is a directory holding a transformers checkpoint (config + safetensors or
  a PyTorch pickle, the latter refused later with a message)."""
  path = os.fspath(path)
  if not os.path.isdir(path) or not os.path.exists(os.path.join(path, CONFIG_FILE)):
    return False
  return any(os.path.exists(os.path.join(path, f))
             for f in (WEIGHTS_FILE, WEIGHTS_INDEX_FILE, "pytorch_model.bin"))


def _weight_files(directory):
  """{safetensors file: the tensor names the shard index maps to it (None: one file)}."""
  index = os.path.join(directory, WEIGHTS_INDEX_FILE)
  if os.path.exists(os.path.join(directory, WEIGHTS_FILE)):
    return {os.path.join(directory, WEIGHTS_FILE): None}
  if os.path.exists(index):
    return _shards(directory, index)
  if os.path.exists(os.path.join(directory, "pytorch_model.bin")):
    raise ValueError(f"{directory} holds pytorch_model.bin (a torch pickle), which needs torch "
                     "to read; save it with safetensors (transformers' save_pretrained does by "
                     "default) and try again")
  raise FileNotFoundError(f"{directory} has no {WEIGHTS_FILE}")


def _shards(directory, index):
  """The shards of `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}); a
  shard it names that the directory lacks is refused here, before any tensor is read."""
  values = read_json(index)
  weight_map = values.get("weight_map") if isinstance(values, dict) else None
  if not (isinstance(weight_map, dict) and weight_map
          and all(isinstance(f, str) for f in weight_map.values())):
    raise ValueError(f"{index}: no 'weight_map' of tensor name -> shard file")
  shards = {}
  for name, shard in sorted(weight_map.items()):
    shards.setdefault(os.path.join(directory, shard), set()).add(name)
  missing = sorted(os.path.basename(s) for s in shards if not os.path.isfile(s))
  if missing:
    raise FileNotFoundError(f"{index} names {len(missing)} shard(s) that {directory} does not "
                            f"have: {', '.join(missing)} (an incomplete download?)")
  return shards


# The numpy types of the safetensors dtypes read here (BF16's raw bits; widened to float32).
_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
           "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
           "BOOL": np.bool_}
_MAX_HEADER = 100_000_000  # the format's limit on the JSON header


def _read_header(f, path):
  """The safetensors layout: an 8-byte header size, a JSON header ({name: dtype, shape,
  data_offsets}, and `__metadata__`), then the raw data. The header is checked against itself
  and the file's size, so a truncated or damaged file is one error naming it and what is
  wrong, before any tensor is read (the safetensors package would say only "incomplete
  metadata", and not which file)."""
  size = os.fstat(f.fileno()).st_size
  if size < 8:
    raise ValueError(f"{path}: not a safetensors file ({size} bytes, fewer than its 8-byte "
                     "header size)")
  length = int.from_bytes(f.read(8), "little")
  if length > min(size - 8, _MAX_HEADER):
    raise ValueError(f"{path}: truncated or not a safetensors file (its header size says "
                     f"{length} bytes, the file has {size - 8} after it)")
  try:
    header = json.loads(f.read(length))
  except (ValueError, UnicodeDecodeError):
    header = None
  if not isinstance(header, dict):
    raise ValueError(f"{path}: not a safetensors file (unreadable header)")
  header.pop("__metadata__", None)
  data_end = 0
  for name, info in header.items():
    try:
      dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
      elements, begin, end = int(np.prod(shape, dtype=np.int64)), int(begin), int(end)
    except (TypeError, KeyError, ValueError):
      raise ValueError(f"{path}: damaged header: tensor '{name}' has no valid dtype, shape "
                       f"and data_offsets ({info!r:.200})") from None
    if not isinstance(dtype, str) or dtype not in _DTYPES:
      raise ValueError(f"{path}: tensor '{name}' has dtype {dtype}, not supported")
    needed = elements * np.dtype(_DTYPES[dtype]).itemsize
    if end - begin != needed or begin < 0:
      raise ValueError(f"{path}: damaged header: tensor '{name}' ({dtype} {shape}) needs "
                       f"{needed} bytes but its data_offsets span [{begin}, {end})")
    data_end = max(data_end, end)
  if data_end > size - 8 - length:
    raise ValueError(f"{path} is truncated: its header describes {data_end} bytes of tensor "
                     f"data, the file holds {size - 8 - length} (an interrupted download or "
                     "copy? fetch the file again)")
  return header


def _load_safetensors(path):
  """{name: float32/int ndarray}; bfloat16 tensors (numpy has no such type) are widened."""
  from safetensors import SafetensorError  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  with open(path, "rb") as f:
    if any(info["dtype"] == "BF16" for info in _read_header(f, path).values()):
      return _load_bfloat16_safetensors(path)
  try:
    out = load_file(path)
  except (SafetensorError, TypeError, ValueError, OSError) as e:
    raise ValueError(f"cannot read {path}: {e}") from None
  return {n: v.astype(np.float32) if v.dtype == np.float16 else v for n, v in out.items()}


def _load_bfloat16_safetensors(path):
  """A safetensors file read by hand (numpy has no bfloat16; it is widened to float32)."""
  with open(path, "rb") as f:
    header = _read_header(f, path)
    data = f.read()
  out = {}
  for name, info in header.items():
    begin, end = info["data_offsets"]
    value = np.frombuffer(data[begin:end], _DTYPES[info["dtype"]])
    if info["dtype"] == "BF16":
      value = (value.astype(np.uint32) << 16).view(np.float32)
    elif info["dtype"] == "F16":
      value = value.astype(np.float32)
    out[name] = value.reshape(info["shape"])
  return out


def _check_shard(path, names, arrays_or_shapes):
  """Every tensor the shard index maps to `path` is in it (else it would be silently missing)."""
  absent = sorted(set(names or ()) - set(arrays_or_shapes))
  if absent:
    raise ValueError(f"{path} lacks {len(absent)} tensor(s) that {WEIGHTS_INDEX_FILE} maps to "
                     f"it: {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''} "
                     "(a shard of another model?)")


def read_huggingface_weights(directory):
  """{Hugging Face name: ndarray} of every safetensors file of a transformers directory."""
  arrays = {}
  for path, names in _weight_files(os.fspath(directory)).items():
    shard = _load_safetensors(path)
    _check_shard(path, names, shard)
    arrays.update(shard)
  return arrays


def read_huggingface_shapes(directory):
  """{Hugging Face name: shape} from the safetensors headers, reading no tensor data (the
  headers are checked against the files' sizes, so damaged files are named here already)."""
  shapes = {}
  for path, names in _weight_files(os.fspath(directory)).items():
    with open(path, "rb") as f:
      shard = {name: info["shape"] for name, info in _read_header(f, path).items()}
    _check_shard(path, names, shard)
    shapes.update(shard)
  return shapes


def write_safetensors(arrays, path):
  """Writes `arrays` with transformers' metadata (`format: pt`, which it requires)."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, path,
            metadata={"format": "pt"})


# ---------------------------------------------------------------------------------------------
# Tokenizer files.

SPM_FILE = "spiece.model"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


def tokenizer_files(spm_model_file=None, vocab_file=None, do_lower_case=True,
                    model_max_length=512):
  """{file name: bytes} of the tokenizer files that make transformers tokenize as we do.

  SentencePiece: `spiece.model` + AlbertTokenizer settings (`keep_accents: false`, so accents
  are stripped as the original's preprocess_text does). WordPiece: `vocab.txt` +
  BertTokenizer settings (CJK characters split, accents stripped when lowercasing).
  """
  if spm_model_file:
    with open(spm_model_file, "rb") as f:
      files = {SPM_FILE: f.read()}
    special = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>",
               "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
               "mask_token": "[MASK]"}
    settings = {"tokenizer_class": "AlbertTokenizer", "do_lower_case": bool(do_lower_case),
                "remove_space": True, "keep_accents": False}
  elif vocab_file:
    with open(vocab_file, "rb") as f:
      files = {VOCAB_FILE: f.read()}
    special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
               "cls_token": "[CLS]", "mask_token": "[MASK]"}
    settings = {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(do_lower_case),
                "do_basic_tokenize": True, "tokenize_chinese_chars": True,
                "strip_accents": None}
  else:
    return {}
  settings.update(special, model_max_length=int(model_max_length))
  files[TOKENIZER_CONFIG_FILE] = (json.dumps(settings, indent=2) + "\n").encode()
  files["special_tokens_map.json"] = (json.dumps(special, indent=2) + "\n").encode()
  return files


def tokenizer_defaults(directory, spm_model_file=None, vocab_file=None, do_lower_case=None):
  """(spm_model_file, vocab_file, do_lower_case): the given ones, else a transformers
  directory's (`spiece.model` before `vocab.txt`; `tokenizer_config.json`'s do_lower_case,
  None when it has none). `do_lower_case=None` means not given."""
  directory = os.fspath(directory)
  if not (spm_model_file or vocab_file):
    spm = os.path.join(directory, SPM_FILE)
    vocab = os.path.join(directory, VOCAB_FILE)
    if os.path.exists(spm):
      spm_model_file = spm
    elif os.path.exists(vocab):
      vocab_file = vocab
  settings_file = os.path.join(directory, TOKENIZER_CONFIG_FILE)
  if do_lower_case is None and os.path.exists(settings_file):
    do_lower_case = read_json(settings_file).get("do_lower_case")
  return spm_model_file, vocab_file, do_lower_case
