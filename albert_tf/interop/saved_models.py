"""Loading a SavedModel without leaving its graphs behind: `load_saved_model`.

`tf.saved_model.load` registers each custom gradient saved in the model (our GELU, LayerNorm,
softmax, dropout and casts are `tf.custom_gradient` functions) in TensorFlow's global gradient
registry under a fresh name, and nothing ever removes it: the registry keeps the loaded
gradient functions, their graphs and every function they call alive for the life of the
process, about 60 MB per load of a tiny encoder export and 150 MB per load of a tiny classifier
saved with its gradients (issue 56). Serving exports are now saved without them
(export/saving.py), but the encoder export keeps them (fine-tuning differentiates through it)
and exports written before still carry them.

`load_saved_model` loads as `tf.saved_model.load` does and removes the registrations that load
made once the loaded object is garbage-collected. While the object lives its gradients work
(`hub.KerasLayer(load_saved_model(path), trainable=True)` fine-tunes); keep the object itself,
not only one of its functions, for as long as you differentiate through them.

    loaded = load_saved_model("/tmp/albert_encoder")
    outputs = loaded.signatures["serving_default"](**inputs)
"""

import functools
import os
import threading
import weakref

import tensorflow as tf

# Loads through this module one at a time: the registrations of a load are the names added to
# the registry while it ran, so two loads must not interleave.
_LOCK = threading.Lock()


def _registry():
  """TensorFlow's global gradient registry: {op type name: {"type": gradient function, ...}}.
  Private to TensorFlow (there is no public way to unregister a gradient)."""
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  return ops.gradient_registry._registry  # pylint: disable=protected-access


def registered_gradients():
  """How many gradient functions TensorFlow's registry holds now (TensorFlow's own ops', plus
  every custom gradient registered since the process started): what a load that leaks grows."""
  return len(_registry())


def _unregister(entries):
  """Removes each of `entries` (name -> weak reference to the gradient function registered under
  it) still registered to that same function (a name is never reused, but be sure)."""
  registry = _registry()
  for name, gradient in entries.items():
    entry = registry.get(name)
    if entry is not None and entry["type"] is gradient():
      del registry[name]


def load_saved_model(export_dir, tags=None, options=None):
  """`tf.saved_model.load(export_dir, tags, options)` whose gradient registrations go when the
  returned object is garbage-collected (the module doc says why). Returns the loaded object."""
  registry = _registry()
  with _LOCK:
    before = set(registry)
    loaded = tf.saved_model.load(export_dir, tags=tags, options=options)
    added = {name: weakref.ref(registry[name]["type"]) for name in set(registry) - before}
  if added:
    weakref.finalize(loaded, _unregister, added)
  return loaded


class DamagedSavedModel(ValueError):
  """A saved_model.pb that does not parse: a truncated download or copy, whoever wrote it."""


@functools.lru_cache(maxsize=8)
def _parse_error(graph_file, stamp):
  """Why `graph_file` is no SavedModel proto, or None (parsed once per version of the file)."""
  del stamp
  # pylint: disable=g-import-not-at-top
  from google.protobuf.message import DecodeError
  from tensorflow.core.protobuf import saved_model_pb2
  try:
    with open(graph_file, "rb") as f:
      saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  except (DecodeError, RuntimeWarning) as e:
    return str(e) or type(e).__name__
  return None if saved_model.meta_graphs else "it holds no graph"


def check_saved_model_file(directory):
  """Raises DamagedSavedModel when `directory` holds a local saved_model.pb that does not parse.

  Asked before a SavedModel is told apart (another library's, ours), since a file that does
  not parse says nothing of whose it is: without this, a truncated TF Hub download reads as
  one of our encoder exports, with that advice."""
  graph_file = os.path.join(os.fspath(directory), "saved_model.pb")
  if not os.path.isfile(graph_file):
    return
  status = os.stat(graph_file)
  reason = _parse_error(graph_file, (status.st_mtime_ns, status.st_size))
  if reason:
    raise DamagedSavedModel(
        f"cannot load the SavedModel {directory}: its saved_model.pb ({status.st_size} bytes) "
        f"does not parse ({' '.join(reason.split())}): damaged or incomplete, e.g. a download "
        "cut short; download and extract it again (or export it again) and pass that folder")
