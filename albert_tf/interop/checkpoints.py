"""Checkpoints: native `tf.train.Checkpoint`s and the original's TF1 name-based checkpoints.

Our own checkpoints' layout (`native_checkpoint`), what a path holds (`source_format`),
loading any starting point into a model (`load_checkpoint`) and writing a TF1 checkpoint
(`save_tf1_checkpoint`). The original's variable names (Google's, and brightmart/albert_zh's
for a model of that layout) live in tf1_names.py; loading and saving TF1 checkpoints both go
through its `tf1_variable_map`.
"""

import dataclasses
import logging
import os
import re

import tensorflow as tf

from albert_tf import files
from albert_tf.interop import huggingface, sources
from albert_tf.interop.saved_models import load_saved_model
from albert_tf.interop.tf1_names import (encoder_tf1_names, find_encoder, layout_of,
                                         masked_lm_tf1_names, tf1_variable_map)

logger = logging.getLogger(__name__)

HUB_PREFIX = "module/"
# Training state in original checkpoints, never model weights.
_SKIPPED = re.compile(r"(^|/)global_step$|/(adam|lamb|adamw)_[mv]$|/Momentum$|/Adam(_1)?$")
# What tells the two layouts' checkpoints apart (SPEC "brightmart/albert_zh's own checkpoints").
_BRIGHTMART_MARKERS = ("bert/encoder/layer_shared/", "bert/embeddings/word_embeddings_2")
_GOOGLE_MARKERS = ("bert/encoder/transformer/", "bert/encoder/embedding_hidden_mapping_in/")
_LAYOUT_NAMES = {"google": "Google's layout ('bert/encoder/transformer/group_*')",
                 "brightmart": "brightmart/albert_zh's layout ('bert/encoder/layer_shared', "
                               "'bert/embeddings/word_embeddings_2')"}


class CheckpointError(ValueError):
  """A checkpoint that cannot be loaded into the model; the message names the variables."""


@dataclasses.dataclass
class LoadReport:
  """What `load_checkpoint` did: which names were loaded, left unused, or not found."""
  path: str
  format: str  # "tf1", "native", "savedmodel" or "huggingface"
  loaded: list
  unused: list  # in the checkpoint, not in the model
  missing: list  # in the model, not in the checkpoint (left as initialised)
  skipped: list  # optimizer slots and global_step
  # The model's variables that received a value: unlike the names, the same whatever the
  # checkpoint's naming scheme (TF1, native, SavedModel).
  assigned: list = dataclasses.field(default_factory=list, repr=False, compare=False)

  def restored(self, variables):
    """Whether every one of the model's `variables` (e.g. a head's) was loaded."""
    assigned = {v.ref() for v in self.assigned}
    return bool(variables) and all(v.ref() in assigned for v in variables)

  def summary(self):
    lines = [f"Loaded {len(self.loaded)} variables from {self.format} checkpoint {self.path}"]
    if self.missing:
      lines.append(f"  not in the checkpoint (kept as initialised): {', '.join(self.missing)}")
    if self.unused:
      lines.append(f"  in the checkpoint but not used: {', '.join(self.unused)}")
    if self.skipped:
      lines.append(f"  skipped {len(self.skipped)} optimizer slots / step counters")
    return "\n".join(lines)


def _encoder_parts(encoder):
  """The encoder's weights by role and original scope, so native keys read like
  `encoder/transformer/group_0.Sinner_group_0/attention/query/kernel` and do not depend on
  Keras' layer numbering."""
  parts = dict(embeddings=encoder.embedding_layer, pooler=encoder.pooler_layer,
               attention_sublayers=dict(encoder.attention_sublayers),
               ffn_sublayers=dict(encoder.ffn_sublayers))
  if encoder.embedding_projection is not None:
    parts["embedding_hidden_mapping_in"] = encoder.embedding_projection
  return tf.train.Checkpoint(**parts)


# Parts of a model besides its encoder, by role; each role has its own key in our checkpoints,
# so a classifier's `head` never lands in a SQuAD model's `squad_head`.
HEAD_ROLES = ("masked_lm", "sentence_order", "head", "squad_head", "token_head", "crf")


def native_checkpoint(model, **extra):
  """The `tf.train.Checkpoint` layout of our own checkpoints.

  Parts are attached by role (`encoder`, then HEAD_ROLES: `masked_lm`, `sentence_order`, a
  task's `head` or `squad_head`, NER's `token_head` and `crf`), so an encoder restores from a
  pretrainer's or a classifier's checkpoint. Training adds `optimizer=`, `step=` and the like
  through `extra`.
  """
  parts = {"encoder": _encoder_parts(find_encoder(model))}
  for role in HEAD_ROLES:
    part = getattr(model, role, None)
    if part is not None:
      parts[role] = part
  parts.update(extra)
  return tf.train.Checkpoint(**parts)


def resolve_checkpoint_path(path):
  """A checkpoint prefix from a prefix, a directory, or a `.index`/`.data-*` file name (local,
  or on a file system TensorFlow reads, such as gs://)."""
  path = os.fspath(path)
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      indexes = sorted(f for f in tf.io.gfile.listdir(path) if f.endswith(".index"))
      if len(indexes) != 1:
        raise FileNotFoundError(f"no checkpoint found in directory {path}")
      latest = os.path.join(path, indexes[0][:-len(".index")])
    return latest
  match = re.match(r"^(.*)\.(index|data-\d+-of-\d+)$", path)
  if match:
    path = match.group(1)
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(f"checkpoint not found: {path} (no {path}.index)")
  return path


def _is_tf1(names):
  return any(n.startswith(("bert/", "cls/", HUB_PREFIX + "bert/")) for n in names)


# What each source format is, as its own names tell it (convert.py's --from names these).
FORMAT_NAMES = {
    "tf1": "an original TF1 checkpoint ('bert/...' names, Google's or brightmart/albert_zh's "
           "layout)",
    "native": "an albert-tf checkpoint (tf.train.Checkpoint names 'encoder/...')",
    "huggingface": "a Hugging Face directory (config.json + model.safetensors)",
    "savedmodel": "an encoder SavedModel (export_savedmodel.py)",
}


def format_name(fmt):
  """What a `source_format` value means, for messages."""
  if fmt in FORMAT_NAMES:
    return FORMAT_NAMES[fmt]
  return sources.readers()[fmt].description


def source_format(path):
  """"huggingface", "savedmodel", "tf1", "native" or a foreign reader's format (sources.py):
  what `path` holds, told by its files and its variables' own names, never by what a caller
  says it is."""
  if huggingface.is_huggingface_dir(path):
    return "huggingface"
  foreign = sources.detect(os.fspath(path))
  if foreign:
    return foreign
  if tf.io.gfile.exists(os.path.join(os.fspath(path), "saved_model.pb")):
    return "savedmodel"
  prefix = resolve_checkpoint_path(path)
  return _names_format(open_reader(prefix).get_variable_to_shape_map(), prefix)


def _names_format(names, prefix):
  if _is_tf1(names):
    return "tf1"
  if any(".ATTRIBUTES/VARIABLE_VALUE" in n for n in names):
    return "native"
  raise CheckpointError(f"{prefix} is neither an original ALBERT checkpoint (no 'bert/' "
                        "names) nor an albert-tf checkpoint")


def open_reader(prefix):
  """tf.train.load_checkpoint(prefix), with a damaged index named instead of TF's traceback."""
  try:
    return tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(f"cannot read checkpoint {prefix}: {getattr(e, 'message', e)} "
                          f"(is {prefix}.index damaged or truncated?)") from None


def _read_tensors(reader, names, prefix):
  """{name: ndarray} of checkpoint variables `names`, all read before any is assigned (so a
  damaged data file leaves the model untouched and is named, not a traceback)."""
  values = {}
  for name in names:
    try:
      values[name] = reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, ValueError) as e:
      raise CheckpointError(f"cannot read variable '{name}' of checkpoint {prefix}: "
                            f"{getattr(e, 'message', e)} (are its .data files damaged or "
                            "truncated?)") from None
  return values


_GROUP = re.compile(r"(group_)(\d+)(/|\.S)")


def _group0_name(name):
  """The name of group 0's copy of a variable of another group (for --init_from_group0)."""
  return _GROUP.sub(lambda m: m.group(1) + "0" + m.group(3), name, count=1)


def load_checkpoint(model, path, init_from_group0=False):
  """Loads an original TF1 checkpoint, a native one, or an encoder SavedModel exported by
  `albert_tf.export` into `model`; returns a `LoadReport`.

  TF1 checkpoints are recognised by their `bert/...` names (a TF-Hub module's `module/` prefix
  is accepted); optimizer slots and `global_step` are skipped. A Hugging Face directory
  (`config.json` + `model.safetensors`) is read through the name map of `huggingface.py`.
  Every shape is checked before anything is assigned, so a failed load leaves the model
  untouched. With `init_from_group0` (the original's flag), groups missing from the
  checkpoint start from group 0's weights.

  A web address is refused and an unreachable gs:// path named, each in one line, and so is a
  saved_model.pb that does not parse, whoever wrote it (`sources.detect` asks first).
  """
  if huggingface.is_huggingface_dir(path):
    report = _load_huggingface(model, os.fspath(path), init_from_group0)
    logger.info(report.summary())
    return report
  foreign = sources.detect(os.fspath(path))
  if foreign:
    report = _load_foreign(model, sources.read(os.fspath(path), foreign), init_from_group0)
    logger.info(report.summary())
    return report
  if tf.io.gfile.exists(os.path.join(os.fspath(path), "saved_model.pb")):
    report = _load_saved_model(model, os.fspath(path))
    logger.info(report.summary())
    return report
  prefix = resolve_checkpoint_path(path)
  reader = open_reader(prefix)
  shapes = reader.get_variable_to_shape_map()
  load = _load_tf1 if _names_format(shapes, prefix) == "tf1" else _load_native
  report = load(model, reader, shapes, prefix, init_from_group0)
  logger.info(report.summary())
  return report


def _match(targets, available, shapes, prefix, init_from_group0):
  """Pairs model variables with checkpoint names and checks every shape before any assignment.

  `available` maps a model-side name to the checkpoint's own name (e.g. with `module/`).
  Returns (loaded names, missing names, {name: source name}).
  """
  loaded, missing, sources = [], [], {}
  for name, variable in targets.items():
    source = name
    if name not in available and init_from_group0:
      source = _group0_name(name)
    if source not in available:
      missing.append(name)
      continue
    ckpt_shape = list(shapes[available[source]])
    if ckpt_shape != variable.shape.as_list():
      raise CheckpointError(
          f"shape mismatch: checkpoint variable '{available[source]}' {ckpt_shape} vs model "
          f"variable '{variable.name}' {variable.shape.as_list()} (checkpoint {prefix})")
    loaded.append(name)
    sources[name] = source
  return loaded, missing, sources


def _check_encoder_complete(missing, prefix):
  if missing:
    hint = (" (a checkpoint with fewer groups initialises every group with "
            "init_from_group0 / --init_from_group0)" if any("group_" in n for n in missing)
            else "")
    raise CheckpointError(f"{prefix} does not hold this encoder's variables (another "
                          f"config?): missing {missing[:3]}{hint}")


def _checkpoint_layout(names):
  """The layout a TF1 checkpoint's names belong to, or None (no encoder names)."""
  def has(markers):
    return any(n.startswith(m) or n.startswith(HUB_PREFIX + m) for n in names for m in markers)
  if has(_BRIGHTMART_MARKERS):
    return "brightmart"
  return "google" if has(_GOOGLE_MARKERS) else None


def _check_layout(model, names, prefix):
  """A checkpoint of the other layout is refused before anything is matched."""
  want = layout_of(find_encoder(model))
  found = _checkpoint_layout(names)
  if found is None or found == want:
    return
  config_hint = ("use brightmart's own albert_config_*.json (they select it), or set "
                 "\"layout\": \"brightmart\"" if found == "brightmart" else
                 "use a Google-layout albert_config.json (no \"layout\" key, or \"layout\": "
                 "\"google\"; brightmart's *_google.json files are Google's layout)")
  raise CheckpointError(
      f"{prefix} holds {_LAYOUT_NAMES[found]}, but the model was built with "
      f"{_LAYOUT_NAMES[want]} (albert_config.json key \"layout\": \"{want}\"); "
      f"{config_hint}")


def _load_tf1(model, reader, shapes, prefix, init_from_group0=False):
  _check_layout(model, shapes, prefix)
  stripped = {}
  for name in shapes:
    key = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else name
    stripped[key] = name
  skipped = sorted(k for k in stripped if _SKIPPED.search(k))
  available = {k: v for k, v in stripped.items() if not _SKIPPED.search(k)}
  targets = tf1_variable_map(model)
  loaded, missing, sources = _match(targets, available, shapes, prefix, init_from_group0)
  if not loaded:
    raise CheckpointError(f"no variable of {prefix} matches this model; names like "
                          f"{sorted(available)[:3]} were found")
  _check_encoder_complete([n for n in missing if n.startswith("bert/")], prefix)
  values = _read_tensors(reader, sorted({available[sources[n]] for n in loaded}), prefix)
  for name in loaded:
    targets[name].assign(values[available[sources[name]]])
  unused = sorted(set(available) - set(sources.values()))
  return LoadReport(prefix, "tf1", loaded, unused, missing, skipped,
                    [targets[n] for n in loaded])


def _load_huggingface(model, directory, init_from_group0=False):
  """Weights from a transformers ALBERT directory, by the original's names."""
  if layout_of(find_encoder(model)) == "brightmart":
    raise CheckpointError(
        f"{directory} is a Hugging Face ALBERT directory (Google's layout), but the model was "
        f"built with {_LAYOUT_NAMES['brightmart']} (albert_config.json key \"layout\": "
        "\"brightmart\"); Hugging Face's ALBERT cannot hold that layout. Use the "
        "directory's own config.json")
  values = huggingface.read_json(os.path.join(directory, huggingface.CONFIG_FILE))
  try:
    # AlbertForTokenClassification's `classifier` is the token head (only config.json says so).
    arrays, unused = huggingface.to_tf1_names(huggingface.read_huggingface_weights(directory),
                                              huggingface.head_of_architecture(values))
  except ValueError as e:
    raise CheckpointError(str(e)) from None
  unknown = huggingface.unknown_architecture(values)
  heads = sorted(n for n in arrays if not n.startswith("bert/")) if unknown else []
  if heads:  # the encoder is ALBERT's, the head is not one of ours: never loaded as one
    logger.warning("%s is an %s, which has no albert-tf model: its encoder is loaded, its head "
                   "(%s) is not", directory, unknown, ", ".join(map(huggingface.hf_name, heads)))
    unused += [huggingface.hf_name(n) for n in heads]
    arrays = {n: v for n, v in arrays.items() if n.startswith("bert/")}
  return _assign_arrays(model, arrays, directory, "huggingface", unused, init_from_group0,
                        own_name=huggingface.hf_name)


def _assign_arrays(model, arrays, path, fmt, unused=(), init_from_group0=False,
                   own_name=lambda name: name):
  """Loads {TF1 name: ndarray} read from `path` into `model`, every shape checked first; a
  LoadReport of format `fmt` (`unused`: the source's own names already left out; `own_name`
  gives a TF1 name's name in the source, for the report)."""
  shapes = {name: list(value.shape) for name, value in arrays.items()}
  targets = tf1_variable_map(model)
  loaded, missing, sources_of = _match(targets, {k: k for k in arrays}, shapes, path,
                                       init_from_group0)
  if not loaded:
    raise CheckpointError(f"no weight of {path} matches this model")
  # transformers' AlbertForQuestionAnswering has no pooler: ours then keeps its initial one.
  has_pooler = any(n.startswith("bert/pooler/") for n in arrays)
  _check_encoder_complete([n for n in missing if n.startswith("bert/")
                           and (has_pooler or not n.startswith("bert/pooler/"))], path)
  for name in loaded:
    targets[name].assign(arrays[sources_of[name]])
  unused = sorted(list(unused) + [own_name(n) for n in set(arrays) - set(sources_of.values())])
  return LoadReport(path, fmt, loaded, unused, missing, [], [targets[n] for n in loaded])


def _load_foreign(model, weights, init_from_group0=False):
  """Weights of another library's artifact (`sources.ForeignWeights`), by the original's
  names."""
  encoder = find_encoder(model)
  if layout_of(encoder) == "brightmart":
    raise CheckpointError(f"{weights.path} holds Google's layout, but the model was built with "
                          f"{_LAYOUT_NAMES['brightmart']}; use the artifact's own config")
  heads = weights.num_attention_heads
  if heads is not None and encoder.config.num_attention_heads != heads:
    raise CheckpointError(
        f"{weights.path}: its attention weights are split into {heads} heads, but the model's "
        f"config says num_attention_heads={encoder.config.num_attention_heads} (the outputs "
        "would be wrong without an error): use the artifact's own config")
  return _assign_arrays(model, weights.arrays, weights.path, weights.format, weights.unused,
                        init_from_group0)


def _load_saved_model(model, path):
  """Weights from an encoder SavedModel written by `albert_tf.export` (TF1 names as the key)."""
  from google.protobuf.message import DecodeError  # pylint: disable=g-import-not-at-top
  try:
    loaded = load_saved_model(path)
  except (OSError, ValueError, IndexError, DecodeError, tf.errors.OpError) as e:
    raise CheckpointError(f"cannot load the SavedModel {path}: "
                          f"{getattr(e, 'message', None) or e} (is its saved_model.pb or "
                          "variables/ folder damaged or incomplete?)") from None
  encoder = getattr(loaded, "encoder", None)
  if encoder is None or not hasattr(encoder, "embedding_layer"):
    raise CheckpointError(f"{path} is a SavedModel but not an albert-tf encoder export")
  sources = encoder_tf1_names(encoder)
  if getattr(loaded, "masked_lm", None) is not None:
    sources.update(masked_lm_tf1_names(loaded.masked_lm))
  shapes = {name: v.shape.as_list() for name, v in sources.items()}
  targets = tf1_variable_map(model)
  loaded_names, missing, matched = _match(targets, {k: k for k in shapes}, shapes, path, False)
  _check_encoder_complete([n for n in missing if n.startswith("bert/")], path)
  for name in loaded_names:
    targets[name].assign(sources[matched[name]])
  unused = sorted(set(shapes) - set(matched.values()))
  return LoadReport(path, "savedmodel", loaded_names, unused, missing, [],
                    [targets[n] for n in loaded_names])


def _native_variable_keys(checkpoint):
  """`{checkpoint key: tf.Variable}` for the variables a `tf.train.Checkpoint` would write."""
  # The object-graph traversal is what Checkpoint.write uses to name values; TF exposes it only
  # internally, and the version is pinned in requirements.txt.
  from tensorflow.python.checkpoint import graph_view  # pylint: disable=g-import-not-at-top
  from tensorflow.python.trackable import trackable_utils  # pylint: disable=g-import-not-at-top
  objects, paths = graph_view.ObjectGraphView(checkpoint).breadth_first_traversal()
  keys = {}
  for obj in objects:
    if isinstance(obj, tf.Variable):
      path = "/".join(trackable_utils.escape_local_name(ref.name) for ref in paths[obj])
      keys[path + "/.ATTRIBUTES/VARIABLE_VALUE"] = obj
  return keys


_TRAINING_STATE = ("optimizer", "save_counter", "distill_projection")


def _load_native(model, reader, shapes, prefix, init_from_group0=False):
  roots = {n.split("/")[0] for n in shapes}
  if "encoder" not in roots:
    raise CheckpointError(f"{prefix} has no 'encoder' object; it is not an albert-tf model "
                          "checkpoint")
  ckpt = native_checkpoint(model)
  parts = {role: getattr(ckpt, role) for role in ("encoder",) + HEAD_ROLES
           if hasattr(ckpt, role)}
  targets = _native_variable_keys(tf.train.Checkpoint(**parts))
  loaded, missing, sources = _match(targets, {k: k for k in shapes}, shapes, prefix,
                                    init_from_group0)
  _check_encoder_complete([k for k in missing if k.startswith("encoder/")], prefix)
  values = _read_tensors(reader, sorted(set(sources.values())), prefix)
  for key in loaded:
    targets[key].assign(values[sources[key]])
  variables = [n for n in shapes if n.endswith("/.ATTRIBUTES/VARIABLE_VALUE")]
  # A training checkpoint's state (optimizer slots, iterations, distillation's projection of
  # the student's hidden states onto the teacher's) is counted, not listed: no model has it.
  state = {n for n in variables
           if ".OPTIMIZER_SLOT/" in n or n.split("/")[0] in _TRAINING_STATE}
  unused = sorted(set(variables) - set(sources.values()) - state)
  return LoadReport(prefix, "native", sorted(loaded), unused, sorted(missing), sorted(state),
                    [targets[k] for k in loaded])


def save_tf1_checkpoint(model, path, global_step=None, variables=None):
  """Writes `model`'s weights under the original's names (TF1 name-based checkpoint format).

  `variables`: only these of the model's variables (e.g. `LoadReport.assigned`, so a converted
  model writes what it was given and no freshly initialised head).

  The files appear atomically: they are written under a temporary prefix and renamed, index
  last, and a `checkpoint` state file makes the directory loadable by `latest_checkpoint`.
  Returns the checkpoint prefix.
  """
  path = os.fspath(path)
  directory = os.path.dirname(path) or "."
  files.makedirs(directory)
  names = tf1_variable_map(model)
  if variables is not None:
    keep = {v.ref() for v in variables}
    names = {n: v for n, v in names.items() if v.ref() in keep}
  tensor_names = sorted(names)
  tensors = [names[n].read_value() for n in tensor_names]
  if global_step is not None:
    tensor_names.append("global_step")
    tensors.append(tf.constant(global_step, tf.int64))
  # Saved into a temporary folder (files.py's rule), then renamed into place, index last.
  tmp = files.temporary_name(path)
  files.makedirs(tmp)
  try:
    with tf.device("CPU:0"):
      tf.raw_ops.SaveV2(prefix=os.path.join(tmp, "ckpt"), tensor_names=tensor_names,
                        shape_and_slices=[""] * len(tensor_names), tensors=tensors)
    for data_file in sorted(files.glob(os.path.join(tmp, "ckpt.data-*"))):
      files.rename(data_file, path + os.path.basename(data_file)[len("ckpt"):])
    files.rename(os.path.join(tmp, "ckpt.index"), path + ".index")
  finally:
    files.remove(tmp)
  base = os.path.basename(path)
  files.write_text(os.path.join(directory, "checkpoint"),
                   f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
  return path
