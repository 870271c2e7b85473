"""TF1 Hub modules of the original ALBERT (TF Hub google/albert_base/1..2 and their siblings,
as the original's export_to_tfhub.py wrote them), read as the original's TF1 names.

    weights = sources.read("albert_base_2")          # a folder with tfhub_module.pb
    weights.format                                   # "tfhub_tf1"
    weights.arrays["bert/embeddings/word_embeddings"]  # [vocab, E]
    weights.spm_model_file                           # albert_base_2/assets/30k-clean.model

A TF1 Hub module is a folder holding `tfhub_module.pb` (a `tensorflow_hub.ModuleDef`) beside a
SavedModel: `saved_model.pb` with one graph per tag set and its signatures (ALBERT's: `tokens`,
`sop`, `mlm`, `tokenization_info`), `variables/variables`, a name-based checkpoint under the
module's own variable names (the original's: `bert/...`, `cls/predictions/...`,
`cls/seq_relationship/...`), and `assets/` (the SentencePiece model `30k-clean.model`; the v2
modules also `albert_config.json`). Nothing of the graph is run: the weights are read from the
checkpoint, checked against the variables the graph declares; the SentencePiece model is the
asset behind `tokenization_info`'s `vocab_file`, and lower-casing its `do_lower_case` constant.
The config is `assets/albert_config.json`, or an `albert_config.json` put beside
`tfhub_module.pb`; the v1 modules carry none (then --albert_config_file is needed).
"""

import json
import logging
import os

from albert_tf.interop import checkpoints, sources

logger = logging.getLogger(__name__)

FORMAT = "tfhub_tf1"
MODULE_FILE = "tfhub_module.pb"
GRAPH_FILE = "saved_model.pb"
CONFIG_FILE = "albert_config.json"
TOKENIZATION_SIGNATURE = "tokenization_info"
# tensorflow_hub's ModuleDef.Format of the modules it can load (module_def.proto: FORMAT_V3 = 3).
_FORMAT_V3 = 3
_VARIABLE_OPS = ("VarHandleOp", "VariableV2", "Variable")
_ASSETS_COLLECTION = "saved_model_assets"  # tf.compat.v1.saved_model.ASSETS_KEY


def is_tf1_hub_module(path):
  """Whether `path` is a TF1 Hub module folder (it holds `tfhub_module.pb`)."""
  return os.path.isfile(os.path.join(os.fspath(path), MODULE_FILE))


def _module_format(path):
  """ModuleDef.format of `tfhub_module.pb`: field 1, a varint (its only set field)."""
  with open(os.path.join(path, MODULE_FILE), "rb") as f:
    data = f.read()
  if not data:
    return 0
  if data[0] != 0x08 or len(data) < 2 or data[1] & 0x80:
    return None
  return data[1]


def _graph(path):
  """The module's MetaGraphDef for no tags (its inference graph), else its first one."""
  # pylint: disable=g-import-not-at-top
  from google.protobuf.message import DecodeError
  from tensorflow.core.protobuf import saved_model_pb2
  graph_file = os.path.join(path, GRAPH_FILE)
  if not os.path.isfile(graph_file):
    raise checkpoints.CheckpointError(f"{path} has {MODULE_FILE} but no {GRAPH_FILE}: not a "
                                      "complete TF1 Hub module")
  if _module_format(path) != _FORMAT_V3:
    raise checkpoints.CheckpointError(f"{os.path.join(path, MODULE_FILE)} is not a TF1 Hub "
                                      "module of the format tensorflow_hub wrote (FORMAT_V3)")
  saved_model = saved_model_pb2.SavedModel()
  try:
    with open(graph_file, "rb") as f:
      saved_model.ParseFromString(f.read())
  except DecodeError as e:
    raise checkpoints.CheckpointError(f"cannot read {graph_file}: {e} (damaged or "
                                      "truncated?)") from None
  if not saved_model.meta_graphs:
    raise checkpoints.CheckpointError(f"{graph_file} holds no graph")
  untagged = [g for g in saved_model.meta_graphs if not g.meta_info_def.tags]
  return (untagged or saved_model.meta_graphs)[0], graph_file


def _node(graph, tensor_name):
  """The Const behind `tensor_name` ("name:0"), through Identity ops; None when not one."""
  nodes = {node.name: node for node in graph.graph_def.node}
  node = nodes.get(tensor_name.split(":")[0])
  while node is not None and node.op == "Identity" and node.input:
    node = nodes.get(node.input[0].lstrip("^").split(":")[0])
  return node if node is not None and node.op == "Const" else None


def _asset_files(graph):
  """{tensor name: file name in assets/} of the graph's asset constants."""
  # pylint: disable=g-import-not-at-top
  from tensorflow.core.protobuf import meta_graph_pb2
  assets = {a.tensor_info.name: a.filename for a in graph.asset_file_def}
  if _ASSETS_COLLECTION in graph.collection_def:
    for packed in graph.collection_def[_ASSETS_COLLECTION].any_list.value:
      asset = meta_graph_pb2.AssetFileDef()
      packed.Unpack(asset)
      assets[asset.tensor_info.name] = asset.filename
  return assets


def _tokenizer(path, graph):
  """(SentencePiece model file or None, do_lower_case) from `tokenization_info`."""
  assets_dir = os.path.join(path, "assets")
  signature = graph.signature_def.get(TOKENIZATION_SIGNATURE)
  spm_model_file, do_lower_case = None, None
  if signature is not None:
    if "vocab_file" in signature.outputs:
      name = _asset_files(graph).get(signature.outputs["vocab_file"].name)
      if name and os.path.isfile(os.path.join(assets_dir, name)):
        spm_model_file = os.path.join(assets_dir, name)
    if "do_lower_case" in signature.outputs:
      const = _node(graph, signature.outputs["do_lower_case"].name)
      if const is not None and const.attr["value"].tensor.bool_val:
        do_lower_case = bool(const.attr["value"].tensor.bool_val[0])
  if spm_model_file is None and os.path.isdir(assets_dir):
    models = sorted(f for f in os.listdir(assets_dir) if f.endswith(".model"))
    if len(models) == 1:
      spm_model_file = os.path.join(assets_dir, models[0])
  if do_lower_case is None:
    # export_to_tfhub.py's default; every ALBERT module Google released is uncased.
    logger.info("%s: no do_lower_case in its %s signature; lower-casing, as the original's "
                "modules do", path, TOKENIZATION_SIGNATURE)
    do_lower_case = True
  return spm_model_file, do_lower_case


def _config(path):
  """(albert_config.json dict, its file) from the module's assets or beside it, else Nones."""
  for candidate in (os.path.join(path, "assets", CONFIG_FILE), os.path.join(path, CONFIG_FILE)):
    if os.path.isfile(candidate):
      with open(candidate) as f:
        return json.load(f), candidate
  return None, None


def _graph_variables(graph):
  """{variable name: shape} the module's graph declares."""
  variables = {}
  for node in graph.graph_def.node:
    if node.op in _VARIABLE_OPS:
      variables[node.name] = [d.size for d in node.attr["shape"].shape.dim]
  return variables


def _arrays(path, graph, graph_file):
  """{TF1 name: ndarray} of the module's variables, each checked against its graph."""
  prefix = os.path.join(path, "variables", "variables")
  if not os.path.isfile(prefix + ".index"):
    raise checkpoints.CheckpointError(f"{path} is a TF1 Hub module without its variables "
                                      f"({prefix}.index is missing)")
  reader = checkpoints.open_reader(prefix)
  shapes = reader.get_variable_to_shape_map()
  # {name in the module: name in the checkpoint} (a `module/` prefix, as hub.Module's own
  # checkpoints have it, is accepted).
  stored = {(n[len(checkpoints.HUB_PREFIX):] if n.startswith(checkpoints.HUB_PREFIX) else n): n
            for n in shapes}
  declared = _graph_variables(graph) or {n: list(shapes[s]) for n, s in stored.items()}
  if not any(n.startswith("bert/encoder/transformer/") for n in declared):
    raise checkpoints.CheckpointError(
        f"{path} is a TF1 Hub module, but not of ALBERT (the original's names, "
        f"'bert/encoder/transformer/group_*'): its variables are {sorted(declared)[:4]}...")
  for name, shape in sorted(declared.items()):
    if name not in stored:
      raise checkpoints.CheckpointError(
          f"{prefix} lacks the variable '{name}' that the module's graph ({graph_file}) uses: "
          "an incomplete module (an interrupted download or copy?)")
    if list(shapes[stored[name]]) != shape:
      raise checkpoints.CheckpointError(
          f"variable '{name}' is {list(shapes[stored[name]])} in {prefix} but {shape} in the "
          f"module's graph ({graph_file})")
  values = checkpoints._read_tensors(  # pylint: disable=protected-access
      reader, sorted(stored[n] for n in declared), prefix)
  return {name: values[stored[name]] for name in declared}


def read(path, with_arrays=True):
  """The module at `path` as `sources.ForeignWeights` (`with_arrays=False`: the config and the
  tokenizer only)."""
  path = os.fspath(path)
  graph, graph_file = _graph(path)
  spm_model_file, do_lower_case = _tokenizer(path, graph)
  config, config_file = _config(path)
  arrays = _arrays(path, graph, graph_file) if with_arrays else {}
  return sources.ForeignWeights(FORMAT, path, arrays, config=config,
                                spm_model_file=spm_model_file, do_lower_case=do_lower_case,
                                config_file=config_file)


sources.register(FORMAT, "a TF1 Hub module of ALBERT (tfhub_module.pb beside saved_model.pb "
                 "and variables/, as the original's export_to_tfhub.py wrote them)",
                 is_tf1_hub_module, read)
