"""Bad serving requests, sent the two ways a SavedModel is called: `tf.saved_model.load` (eager,
as a Python client) and a TF1 Session over the exported MetaGraph, fed by the signature's
tensor names: what `saved_model_cli run` and TF Serving do (the Session is kept per export,
where saved_model_cli would load the model again for each request). Each must fail with
INVALID_ARGUMENT and the words of export/requests.py's rule, never an op name from inside
the graph."""

import functools
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import  (the ops the Session needs)


def _feed(value, spec):
  return np.array(value, dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype)


@functools.lru_cache(maxsize=None)
def _session(export_dir):
  """(session, meta_graph) of the export loaded as saved_model_cli loads it."""
  graph = tf.Graph()
  session = tf.compat.v1.Session(graph=graph)
  with graph.as_default():
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
  return session, meta_graph


def session_run(export_dir, signature, request):
  """`request` run through the Session path: {output key: numpy array}."""
  session, meta_graph = _session(export_dir)
  signature_def = meta_graph.signature_def[signature]
  keys = sorted(signature_def.outputs)
  values = session.run([signature_def.outputs[k].name for k in keys],
                       {signature_def.inputs[k].name: v for k, v in request.items()})
  return dict(zip(keys, values))


def assert_rejected(export_dir, loaded, signature, request, pattern):
  """`request` ({input: nested list}) to `signature` fails with `pattern` both ways."""
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  feed = {k: _feed(v, specs[k]) for k, v in request.items()}
  with pytest.raises(tf.errors.InvalidArgumentError) as eager:
    function(**{k: tf.constant(v, specs[k].dtype) for k, v in feed.items()})
  assert re.search(r"assertion failed: \[" + pattern, eager.value.message), eager.value.message
  with pytest.raises(tf.errors.InvalidArgumentError) as session:
    session_run(export_dir, signature, feed)
  assert re.search(r"assertion failed: \[" + pattern, session.value.message), \
      session.value.message


def run(loaded, signature, **request):
  """The signature's outputs as numpy, for requests that must succeed."""
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  out = function(**{k: tf.constant(_feed(v, specs[k]), specs[k].dtype)
                    for k, v in request.items()})
  return {k: v.numpy() for k, v in out.items()}


def empty_request(loaded, signature, width=4):
  """An empty batch of every input of `signature`: 0 rows, `width` for its other unknown
  dimensions."""
  specs = loaded.signatures[signature].structured_input_signature[1]
  return {k: np.zeros([0] + [width if d is None else d for d in spec.shape[1:]],
                      object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype)
          for k, spec in specs.items()}
