"""TF Hub's TF2 ALBERT SavedModels (`albert_en_base/3` and its siblings), read.

    weights = sources.read("albert_en_base_3")   # detected as "tfhub"
    weights.config["num_hidden_layers"], weights.spm_model_file, weights.do_lower_case
    # (12, 'albert_en_base_3/assets/30k-clean.model', True)

These are what Model Garden's `export_tfhub` (official/nlp/tools/export_tfhub_lib.py,
`export_model`) writes for an AlbertEncoder: a Keras model around the encoder, saved with its
variables (Keras names, as in a Model Garden checkpoint: model_garden.py maps them), with an
`mlm` sub-object holding the masked-LM head when exported `with_mlm`, and the tokenizer as an
asset: `sp_model_file` (SentencePiece; lower-casing implied, as for every public ALBERT) or
`vocab_file` with a `do_lower_case` variable. The weights are read from `variables/` through
the checkpoint's object graph, without loading the SavedModel's functions.

The config comes from the Keras metadata the SavedModel keeps (`keras_metadata.pb`, or
`saved_model.pb`'s own before TF 2.5): the AlbertEncoder's constructor arguments (layers,
activation, dropout), the rest from the weights' shapes. Where there is none, it is None and
--albert_config_file is needed.

Not claimed: our own encoder exports (albert_tf/export/encoder.py; checkpoints.py loads them),
TF1 Hub modules (`tfhub_module.pb`), SavedModels without a Model Garden encoder (the
preprocessing companion `albert_en_preprocess`, which keeps its SentencePiece model inside its
graph, not as an asset). A BERT encoder export is claimed and refused by name.
"""

import functools
import json
import logging
import os
import re

from albert_tf.config import ACTIVATIONS, AlbertConfig
from albert_tf.interop import checkpoints, model_garden, sources

logger = logging.getLogger(__name__)

FORMAT = "tfhub"
DESCRIPTION = "a TF Hub TF2 SavedModel (Model Garden's export_tfhub of an AlbertEncoder)"
_SAVED_MODEL = "saved_model.pb"
_KERAS_METADATA = "keras_metadata.pb"
_TF1_HUB_MODULE = "tfhub_module.pb"
_ENCODER_CLASSES = ("AlbertEncoder", "AlbertTransformerEncoder")
_LOWER_CASE_KEY = "do_lower_case/.ATTRIBUTES/VARIABLE_VALUE"


@functools.lru_cache(maxsize=8)
def _object_graph(saved_model_file, stamp):
  """What detection and reading need of saved_model.pb's object graph (the file is parsed
  once per version of it): root children {name: node id}, variables [(name, shape)],
  assets {root child: file name}, Keras metadata strings."""
  del stamp
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  with open(saved_model_file, "rb") as f:
    saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  meta_graph = saved_model.meta_graphs[0]
  graph = meta_graph.object_graph_def
  if not graph.nodes:  # a TF1 SavedModel
    return {}, [], {}, []
  children = {c.local_name: c.node_id for c in graph.nodes[0].children}
  variables, metadata = [], []
  for node in graph.nodes:
    kind = node.WhichOneof("kind")
    if kind == "variable":
      variables.append((node.variable.name, [d.size for d in node.variable.shape.dim]))
    elif kind == "user_object" and node.user_object.metadata:
      metadata.append(node.user_object.metadata)
  assets = {}
  for name, node_id in children.items():
    node = graph.nodes[node_id]
    if node.WhichOneof("kind") == "asset":
      assets[name] = meta_graph.asset_file_def[node.asset.asset_file_def_index].filename
  return children, variables, assets, metadata


def _info(path):
  saved_model_file = os.path.join(path, _SAVED_MODEL)
  return _object_graph(saved_model_file, os.stat(saved_model_file).st_mtime_ns)


def _is_model_garden_encoder(variables):
  """Whether the variables are those of a Model Garden transformer encoder (ALBERT's shared
  block or BERT's per-layer ones)."""
  for name, shape in variables:
    name = model_garden._keras_name(name)  # pylint: disable=protected-access
    if len(shape) == 3 and re.search(r"(^|/)transformer(/layer_\d+)?/self_attention/query/"
                                     r"kernel$", name):
      return True
  return False


def detect(path):
  """Whether `path` is a TF2 SavedModel holding a Model Garden encoder (not one of ours, whose
  root keeps its `config_json`)."""
  path = os.fspath(path)
  if not (os.path.isdir(path) and os.path.exists(os.path.join(path, _SAVED_MODEL))):
    return False
  if os.path.exists(os.path.join(path, _TF1_HUB_MODULE)):
    return False
  try:
    children, variables, _, _ = _info(path)
  except Exception:  # pylint: disable=broad-except  # a damaged file: not ours to claim
    return False
  return "config_json" not in children and _is_model_garden_encoder(variables)


def keras_metadata(path):
  """The Keras metadata of each saved Keras object, as dicts (keras_metadata.pb, else the
  object graph's own)."""
  metadata_file = os.path.join(path, _KERAS_METADATA)
  if os.path.exists(metadata_file):
    from tf_keras.protobuf import saved_metadata_pb2  # pylint: disable=g-import-not-at-top
    with open(metadata_file, "rb") as f:
      strings = [n.metadata for n in saved_metadata_pb2.SavedMetadata.FromString(f.read()).nodes]
  else:
    strings = _info(path)[3]
  found = []
  for text in strings:
    try:
      found.append(json.loads(text))
    except ValueError:
      continue
  return found


def _class_name(metadata):
  return str(metadata.get("class_name", "")).split(">")[-1]


def _activation(value):
  """albert_config's hidden_act for a serialized Keras activation: Model Garden's
  `Text>gelu` is the tanh approximation (the original's "gelu"), Keras' "gelu" the exact."""
  if isinstance(value, dict):
    value = value.get("config")
  if not isinstance(value, str):
    return None
  if value.startswith("Text>"):
    name = value[len("Text>"):]
  else:
    name = "gelu_exact" if value == "gelu" else value
  return name if name in ACTIVATIONS else None


def config_of(path, shapes, heads):
  """An albert_config.json dict for the SavedModel's AlbertEncoder, or None: layer count,
  activation, dropout and initializer from its Keras config, sizes from `shapes` (the
  original's names)."""
  encoder = [m for m in keras_metadata(path) if _class_name(m) in _ENCODER_CLASSES]
  if not encoder:
    return None
  values = encoder[0].get("config") or {}
  hidden_act = _activation(values.get("activation"))
  if hidden_act is None or "num_layers" not in values:
    logger.warning("%s: its AlbertEncoder's config (activation %r) is not one albert-tf "
                   "reads; pass --albert_config_file", path, values.get("activation"))
    return None
  initializer = (values.get("initializer") or {}).get("config") or {}
  vocab_size, embedding_size = shapes["bert/embeddings/word_embeddings"]
  block = "bert/encoder/transformer/group_0/inner_group_0/"
  return {
      "vocab_size": vocab_size,
      "embedding_size": embedding_size,
      "hidden_size": shapes["bert/pooler/dense/kernel"][0],
      "num_hidden_layers": int(values["num_layers"]),
      "num_attention_heads": heads,
      "intermediate_size": shapes[block + "ffn_1/intermediate/dense/kernel"][1],
      "hidden_act": hidden_act,
      "hidden_dropout_prob": float(values.get("dropout_rate", 0.0)),
      "attention_probs_dropout_prob": float(values.get("attention_dropout_rate", 0.0)),
      "max_position_embeddings": shapes["bert/embeddings/position_embeddings"][0],
      "type_vocab_size": shapes["bert/embeddings/token_type_embeddings"][0],
      "initializer_range": float(initializer.get("stddev", 0.02)),
      "num_hidden_groups": 1,
      "inner_group_num": 1,
  }


def _asset(path, assets, name):
  if name not in assets:
    return None
  asset = os.path.join(path, "assets", assets[name])
  if not os.path.exists(asset):
    raise FileNotFoundError(f"{path}: its {name} asset {asset} is missing")
  return asset


def read(path, with_arrays=True):
  """A TF Hub SavedModel directory as `sources.ForeignWeights`."""
  path = os.fspath(path)
  if not detect(path):
    raise ValueError(f"{path} is not {DESCRIPTION}")
  _, _, assets, _ = _info(path)
  prefix = os.path.join(path, "variables", "variables")
  reader = checkpoints.open_reader(prefix)
  keys = model_garden.variable_keys(reader, prefix)
  keys = {name: key for name, key in keys.items() if key != _LOWER_CASE_KEY}
  shape_map = reader.get_variable_to_shape_map()
  if with_arrays:
    values = checkpoints._read_tensors(  # pylint: disable=protected-access
        reader, sorted(keys.values()), prefix)
    named = {name: values[key] for name, key in keys.items()}
  else:
    named = {name: list(shape_map[key]) for name, key in keys.items()}
  arrays, _, unused = model_garden.to_tf1(named, path, shape_only=not with_arrays)
  shapes = {n: (list(v.shape) if with_arrays else v) for n, v in arrays.items()}
  config = config_of(path, shapes, model_garden.heads_of(named))
  if config is not None:
    model_garden.check_config(AlbertConfig.from_dict(config), named, path,
                              f"{path}'s Keras metadata")
  spm_model_file = _asset(path, assets, "sp_model_file")
  vocab_file = _asset(path, assets, "vocab_file")
  do_lower_case = None
  if spm_model_file:
    do_lower_case = True  # export_tfhub_lib: implied for SentencePiece (every public ALBERT)
  elif _LOWER_CASE_KEY in shape_map:
    do_lower_case = bool(checkpoints._read_tensors(  # pylint: disable=protected-access
        reader, [_LOWER_CASE_KEY], prefix)[_LOWER_CASE_KEY])
  return sources.ForeignWeights(FORMAT, path, arrays if with_arrays else {}, config,
                                spm_model_file, vocab_file, do_lower_case, unused,
                                num_attention_heads=model_garden.heads_of(named))


sources.register(FORMAT, DESCRIPTION, detect, read)
