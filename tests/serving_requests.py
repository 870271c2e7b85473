"""Bad serving requests, sent the two ways a SavedModel is called: `tf.saved_model.load` (eager,
as a Python client) and a TF1 Session over the exported MetaGraph, fed by the signature's
tensor names: what `saved_model_cli run` and TF Serving do (the Session is kept per export,
where saved_model_cli would load the model again for each request). Each must fail with
INVALID_ARGUMENT and the words of export/requests.py's rule, never an op name from inside
the graph. A request of another dtype cannot reach the graph: `assert_other_dtype_refused`
states what each path answers instead."""

import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import  (the ops the Session needs)


def _feed(value, spec):
  return np.array(value, dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype)


_SESSIONS = {}  # export_dir -> (session, meta_graph)


def _session(export_dir):
  """(session, meta_graph) of the export loaded as saved_model_cli loads it, kept per export
  until `close_sessions`."""
  if export_dir not in _SESSIONS:
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
      meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
    _SESSIONS[export_dir] = session, meta_graph
  return _SESSIONS[export_dir]


def close_sessions():
  """Closes the Sessions kept per export (each holds a copy of the export's graph): called when
  a test module that used them ends, so a test process does not carry them on."""
  for session, _ in _SESSIONS.values():
    session.close()
  _SESSIONS.clear()


def session_run(export_dir, signature, request):
  """`request` run through the Session path: {output key: numpy array}."""
  session, meta_graph = _session(export_dir)
  signature_def = meta_graph.signature_def[signature]
  keys = sorted(signature_def.outputs)
  values = session.run([signature_def.outputs[k].name for k in keys],
                       {signature_def.inputs[k].name: v for k, v in request.items()})
  return dict(zip(keys, values))


def _assert_our_rule(error, pattern):
  """`error` is the failed assertion `pattern`, and names no op of the graph but an Assert."""
  message = error.value.message
  assert re.search(r"assertion failed: \[" + pattern, message), message
  assert all(node.endswith("Assert") for node in re.findall(r"node (\S+?)[}\s]", message)), \
      message


def assert_rejected(export_dir, loaded, signature, request, pattern):
  """`request` ({input: nested list}) to `signature` fails with `pattern` both ways."""
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  feed = {k: _feed(v, specs[k]) for k, v in request.items()}
  with pytest.raises(tf.errors.InvalidArgumentError) as eager:
    function(**{k: tf.constant(v, specs[k].dtype) for k, v in feed.items()})
  _assert_our_rule(eager, pattern)
  with pytest.raises(tf.errors.InvalidArgumentError) as session:
    session_run(export_dir, signature, feed)
  _assert_our_rule(session, pattern)


def assert_other_dtype_refused(export_dir, loaded, signature, request, name, value):
  """`request` with input `name` replaced by `value` (a numpy array of another dtype than the
  signature's) is refused before any op of the graph runs, in TensorFlow's words (a placeholder
  has one dtype, so no rule of the graph can see another):
  - eagerly, as a tensor: "input #k(zero-based) was expected to be a <dtype> tensor", k the
    input's place among the signature's inputs in the order of their names;
  - eagerly, as a Python list: a TypeError that shows the argument by name;
  - through a Session: the client converts the array to the placeholder's dtype, and fails
    there (numbers into a string input; strings into an int input).
  """
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  feed = {k: _feed(v, specs[k]) for k, v in request.items()}
  wanted = specs[name].dtype.name
  position = sorted(specs).index(name)
  tensors = {k: tf.constant(v, specs[k].dtype) for k, v in feed.items()}
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=rf"input #{position}\(zero-based\) was expected to be a {wanted} "
                           rf"tensor but is a {tf.as_dtype(value.dtype).name} tensor"):
    function(**dict(tensors, **{name: tf.constant(value)}))
  listed = re.escape(str(value.tolist()))
  with pytest.raises(TypeError, match=rf"(?s)Cannot convert {listed} to EagerTensor of dtype "
                                      rf"{wanted}.*'{name}': {listed}"):
    function(**dict(tensors, **{name: value.tolist()}))
  error = (tf.errors.InternalError, "Unsupported object type") if wanted == "string" else \
      (ValueError, "invalid literal for int")
  with pytest.raises(error[0], match=error[1]):
    session_run(export_dir, signature, dict(feed, **{name: value}))


def run(loaded, signature, **request):
  """The signature's outputs as numpy, for requests that must succeed."""
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  out = function(**{k: tf.constant(_feed(v, specs[k]), specs[k].dtype)
                    for k, v in request.items()})
  return {k: v.numpy() for k, v in out.items()}


def empty_request(request):
  """`request` ({input: nested list}) cut to an empty batch: 0 rows, its other dimensions kept
  (the signatures declare their inputs with an unknown rank, so the request says them)."""
  return {k: np.asarray(v)[:0] for k, v in request.items()}


def run_both_ways(export_dir, loaded, signature, request):
  """The outputs (numpy) of a request that must succeed, equal through both paths."""
  eager = run(loaded, signature, **request)
  specs = loaded.signatures[signature].structured_input_signature[1]
  session = session_run(export_dir, signature,
                        {k: _feed(v, specs[k]) for k, v in request.items()})
  assert_same_outputs(session, eager)
  return eager


# The exports served here are tiny.json's (E 16, H 32, I 64, 2 layers): the longest chain of
# additions behind an output is the E-term projection, per layer a sum over I and one over H,
# then the pooler's (or the MLM transform's) H and a head's H; a fill-mask probability adds its
# normaliser's sum over the 30000-piece vocabulary.
TERMS = 16 + 2 * (64 + 32) + 2 * 32
VOCABULARY = 30000


def assert_same_outputs(got, want):
  """Two answers ({output key: numpy array}) of the same model by two paths (a Session and
  eager, two signatures) agree: the same keys, floats within float32 rounding of TERMS
  additions, every other value equal."""
  from conftest import float32_atol  # pylint: disable=g-import-not-at-top
  assert got.keys() == want.keys()
  for key, value in want.items():
    if value.dtype.kind == "f":
      terms = TERMS + (VOCABULARY if key == "top_scores" else 0)
      np.testing.assert_allclose(got[key], value, rtol=0, atol=float32_atol(value, terms),
                                 err_msg=key)
    else:
      np.testing.assert_array_equal(got[key], value, err_msg=key)


def serialized_example(**features):
  """A serialized tf.train.Example: each feature a bytes_list of its values (a str is one
  value; a list, several), or an int64_list where the values are ints."""
  feature = {}
  for name, values in features.items():
    values = [values] if isinstance(values, (str, int)) else list(values)
    if values and isinstance(values[0], int):
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    else:
      feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[v.encode("utf-8") for v in values]))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
