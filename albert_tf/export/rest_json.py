"""TF Serving's REST predict format, for one signature of a loaded SavedModel.

    {"signature_name": "text_pair", "instances": [{"text_a": "...", "text_b": "..."}, ...]}
    {"signature_name": "text_pair", "inputs": {"text_a": ["..."], "text_b": ["..."]}}

The row format (`instances`: one entry per example; an entry may be the bare value when the
signature has one input) is answered as `{"predictions": [...]}`, one entry per example (a
dict of the outputs, or the bare value when there is one output); the columnar format
(`inputs`: whole tensors by name) as `{"outputs": ...}`. A string may be sent as
`{"b64": "<base64>"}` (bytes that are not UTF-8); string outputs that are not UTF-8, or whose
name ends in `_bytes`, come back that way; NaN and infinities as JSON's extensions NaN,
Infinity and -Infinity (which Python's json reads). These are TF Serving's rules (its REST API guide),
so a client of TF Serving works unchanged against `serve.py`.

A request that cannot mean anything is a `RequestError` naming the input and the place, before
the model runs; a request the signature refuses (export/requests.py's rules) is one with the
signature's own words.
"""

import base64
import binascii
import json
import re

import numpy as np
import tensorflow as tf


class RequestError(ValueError):
  """A bad request: HTTP 400 with `{"error": message}`."""


class NotFound(LookupError):
  """An unknown model, version or signature: HTTP 404 with `{"error": message}`."""


def parse_body(body):
  """The request's JSON object from the raw `body` bytes."""
  try:
    text = body.decode("utf-8")
  except UnicodeDecodeError as e:
    raise RequestError(f"the request body is not UTF-8 (byte {e.start} is {body[e.start]:#04x}); "
                       'send text that is not UTF-8 as {"b64": "<base64>"}') from None
  try:
    request = json.loads(text)
  except RecursionError:
    raise RequestError("the request body nests JSON arrays or objects too deeply to be a "
                       "request (a tensor has a few dimensions)") from None
  except json.JSONDecodeError as e:
    raise RequestError(f"the request body is not JSON: {e.msg} at line {e.lineno} column "
                       f"{e.colno}") from None
  if not isinstance(request, dict):
    raise RequestError('the request body must be a JSON object: {"instances": [...]} or '
                       '{"inputs": ...}')
  unknown = sorted(set(request) - {"signature_name", "instances", "inputs"})
  if unknown:
    raise RequestError(f"unknown key {unknown[0]!r} in the request (TF Serving's predict takes "
                       "signature_name and one of instances, inputs)")
  if ("instances" in request) == ("inputs" in request):
    raise RequestError('a request needs exactly one of "instances" (rows) and "inputs" '
                       "(columns)")
  if not isinstance(request.get("signature_name", ""), str):
    raise RequestError("signature_name must be a string")
  return request


def input_specs(function):
  """{input name: tf.TensorSpec} of a loaded signature."""
  return dict(function.structured_input_signature[1])


def request_inputs(request, specs):
  """(`{name: numpy array}`, is_row_format) of a parsed request for inputs `specs`."""
  names = sorted(specs)
  if "instances" in request:
    instances = request["instances"]
    if not isinstance(instances, list):
      raise RequestError('"instances" must be a list: one entry per example')
    if not instances:
      raise RequestError('"instances" is empty: a request needs at least one example')
    columns = {name: [] for name in names}
    for i, instance in enumerate(instances):
      if len(names) == 1 and not (isinstance(instance, dict) and set(instance) == set(names)):
        instance = {names[0]: instance}  # the bare value of a one-input signature
      if not isinstance(instance, dict):
        raise RequestError(f"instances[{i}] must be an object with the inputs "
                           f"{', '.join(names)}")
      check_names(instance, names, f"instances[{i}]")
      for name in names:
        columns[name].append(instance[name])
    return {name: _array(name, columns[name], specs[name]) for name in names}, True
  inputs = request["inputs"]
  if len(names) == 1 and not (isinstance(inputs, dict) and set(inputs) == set(names)):
    inputs = {names[0]: inputs}
  if not isinstance(inputs, dict):
    raise RequestError(f'"inputs" must be an object with the inputs {", ".join(names)}')
  check_names(inputs, names, '"inputs"')
  arrays = {name: _array(name, inputs[name], specs[name]) for name in names}
  check_rows(arrays)
  return arrays, False


def check_rows(arrays):
  """A RequestError for an input with an empty batch: the signatures' rules (row counts that
  agree) cannot refuse it, and the answer would be an empty one nobody asked for."""
  for name, array in arrays.items():
    if array.ndim and array.shape[0] == 0:
      raise RequestError(f"{name} has no rows: a request needs at least one example")


def check_names(given, names, where):
  """A RequestError naming the first input of `names` missing from `given` (an input's name
  -> value), else the first that `given` has beyond them; `where` names the request's part.
  Public so that both protocols (REST here, gRPC in serving/grpc_api.py) say the same."""
  missing = [n for n in names if n not in given]
  if missing:
    raise RequestError(f"{where} lacks the input {missing[0]!r} (this signature takes "
                       f"{', '.join(names)})")
  unknown = sorted(set(given) - set(names))
  if unknown:
    raise RequestError(f"{where} has the input {unknown[0]!r}, which this signature does not "
                       f"take (it takes {', '.join(names)})")


MAX_RANK = 32  # deeper nesting is no tensor a signature takes (ours take rank 1 to 3)


def _array(name, value, spec):
  """`value` (nested lists) as a numpy array of `spec`'s dtype, or a RequestError naming
  `name` and where the value is wrong."""
  depth, inner = 0, value
  while isinstance(inner, list) and inner:
    depth, inner = depth + 1, inner[0]
    if depth > MAX_RANK:
      raise RequestError(f"{name} nests lists more than {MAX_RANK} deep; a tensor of this "
                         "signature has a few dimensions")
  if spec.dtype == tf.string:
    value = _strings(name, value, [])
    dtype = object
  else:
    _check_numbers(name, value, spec.dtype, [])
    dtype = spec.dtype.as_numpy_dtype
  try:
    array = np.array(value, dtype=dtype)
  except OverflowError:
    raise RequestError(f"{name} holds a number out of {spec.dtype.name}'s range") from None
  except ValueError:
    raise RequestError(f"{name} is not a rectangular array: its rows differ in length") from None
  if dtype is object and any(isinstance(v, list) for v in array.flat):
    raise RequestError(f"{name} is not a rectangular array: its rows differ in length")
  return array


def _strings(name, value, at):
  if isinstance(value, list):
    return [_strings(name, v, at + [i]) for i, v in enumerate(value)]
  where = f"{name}{''.join(f'[{i}]' for i in at)}"
  if isinstance(value, str):
    try:
      return value.encode("utf-8")
    except UnicodeEncodeError:  # JSON's \ud800 escapes: a lone surrogate
      raise RequestError(f"{where} is not valid Unicode (a lone surrogate escape); send bytes "
                         'as {"b64": "<base64>"}') from None
  if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
    try:
      return base64.b64decode(value["b64"], validate=True)
    except binascii.Error:
      raise RequestError(f"{where}: b64 is not base64") from None
  raise RequestError(f"{where} is {_json_type(value)}; this input takes strings (or "
                     '{"b64": "<base64>"} for bytes)')


def _check_numbers(name, value, dtype, at):
  if isinstance(value, list):
    for i, v in enumerate(value):
      _check_numbers(name, v, dtype, at + [i])
    return
  integral = isinstance(value, int) and not isinstance(value, bool)
  if dtype.is_bool and isinstance(value, bool):
    return
  if (dtype.is_integer and integral) or (dtype.is_floating and
                                          isinstance(value, (int, float)) and
                                          not isinstance(value, bool)):
    return
  where = f"{name}{''.join(f'[{i}]' for i in at)}"
  raise RequestError(f"{where} is {_json_type(value)}; this input takes {dtype.name} numbers")


def _json_type(value):
  if isinstance(value, bool):
    return f"the boolean {json.dumps(value)}"
  if isinstance(value, (int, float)):
    return f"the number {value!r}"
  if isinstance(value, str):
    return f"the string {json.dumps(value[:40])}"
  if value is None:
    return "null"
  return f"an object ({json.dumps(value)[:60]})"


def run(function, arrays):
  """The signature's outputs `{name: numpy array}` for the request's arrays; the signature's
  own refusal (INVALID_ARGUMENT) becomes a RequestError in its words."""
  specs = input_specs(function)
  try:
    outputs = function(**{k: tf.constant(v, specs[k].dtype) for k, v in arrays.items()})
  except tf.errors.InvalidArgumentError as e:
    raise RequestError(signature_message(e.message)) from None
  return {k: v.numpy() for k, v in outputs.items()}


def signature_message(message):
  """The words of a failed in-graph rule (export/requests.py) in TensorFlow's error `message`,
  without its node annotations and stack: "Graph execution error: ... assertion failed: [text_a
  has 2 rows but text_b has 1]\n\t [[{{node ...}}]]" -> "text_a has 2 rows but text_b has 1".
  Another error keeps its last line of text."""
  rule = re.search(r"assertion failed: \[(.*)\]", message)
  if rule:
    return rule.group(1)
  lines = [l.strip() for l in message.splitlines()
           if l.strip() and not l.strip().startswith("[[")]
  return lines[-1] if lines else message


def response(outputs, row_format):
  """TF Serving's answer for `outputs` ({name: numpy array}, batch first)."""
  values = {name: _json_value(name, array) for name, array in outputs.items()}
  if row_format:
    rows = len(next(iter(values.values())))
    if len(values) == 1:
      return {"predictions": next(iter(values.values()))}
    return {"predictions": [{name: values[name][i] for name in sorted(values)}
                            for i in range(rows)]}
  if len(values) == 1:
    return {"outputs": next(iter(values.values()))}
  return {"outputs": values}


def _json_value(name, array):
  if array.dtype != object:  # float32 values as Python floats: exact, read back unchanged
    return array.tolist()
  return _decoded(name.endswith("_bytes"), array.tolist())


def _decoded(as_b64, value):
  if isinstance(value, list):
    return [_decoded(as_b64, v) for v in value]
  if not as_b64:
    try:
      return value.decode("utf-8")
    except UnicodeDecodeError:
      pass
  return {"b64": base64.b64encode(value).decode("ascii")}
