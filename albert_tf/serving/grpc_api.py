"""TF Serving's gRPC API over the server core: what `serve.py --port=8500` answers.

    channel = grpc.insecure_channel("localhost:8500")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "sst2"
    request.inputs["text_a"].CopyFrom(tf.make_tensor_proto(["a gripping film"]))
    stub.Predict(request, timeout=10).outputs["probabilities"]

The services and messages are tensorflow-serving-api's own (tensorflow_serving/apis), so a
client of TF Serving works unchanged. Served: PredictionService.Predict (any signature of any
export), GetModelMetadata ("signature_def"), ModelService.GetModelStatus and
HandleReloadConfigRequest. Classify, Regress and MultiInference answer UNIMPLEMENTED: they run
only tensorflow/serving/classify and /regress signatures, which no export of ours has (TF
Serving itself refuses them on our predict signatures); the message points to Predict.

A thin adapter, as TF Serving's prediction_service_impl and model_service_impl are over its
ServerCore: each request holds its version through `core.serving()` and is checked in the words
of the REST API (export/rest_json.py), so the two protocols refuse a request alike. Errors:
a bad request (rest_json.RequestError) -> INVALID_ARGUMENT; an unknown model, version, label or
signature (rest_json.NotFound) -> NOT_FOUND; a server that is stopping or whose batch queue is
full (an `Unavailable`) -> UNAVAILABLE; a message over `max_message_bytes` -> grpc's own
RESOURCE_EXHAUSTED; a TensorFlow error -> its own code.
"""

import concurrent.futures
import functools
import logging
import os

import grpc
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from albert_tf.export import layout, rest_json

logger = logging.getLogger("albert_tf.serve")

MAX_MESSAGE_BYTES = 32 << 20
DEFAULT_SIGNATURE = "serving_default"
SIGNATURE_DEF = "signature_def"  # the one metadata field TF Serving answers
_METHODS = {"Classify": "tensorflow/serving/classify", "Regress": "tensorflow/serving/regress"}
# tensorflow.error.Code (TF Serving's StatusProto.error_code) by name.
_ERROR_CODES = get_model_status_pb2.ModelVersionStatus.DESCRIPTOR.fields_by_name[
    "status"].message_type.fields_by_name["error_code"].enum_type.values_by_name


class Refusal(Exception):
  """A refusal with its own gRPC code (where no error class of the core says it)."""

  def __init__(self, code, message):
    super().__init__(message)
    self.code = code


def status_code(error):
  """The gRPC code that answers `error`, or None for an error that is the server's own bug."""
  if isinstance(error, Refusal):
    return error.code
  if isinstance(error, rest_json.RequestError):
    return grpc.StatusCode.INVALID_ARGUMENT
  if isinstance(error, rest_json.NotFound):
    return grpc.StatusCode.NOT_FOUND
  # core.Unavailable, and the batching queue's refusal when full: matched by name, so that a
  # module's own Unavailable needs no common base nor an import here.
  if any(c.__name__ == "Unavailable" for c in type(error).__mro__):
    return grpc.StatusCode.UNAVAILABLE
  if isinstance(error, tf.errors.OpError):  # TensorFlow's codes are gRPC's, number for number
    return next((c for c in grpc.StatusCode if c.value[0] == error.error_code),
                grpc.StatusCode.UNKNOWN)
  return None


def _answered(method):
  """`method` (an RPC) with its errors answered as status codes: a client sees the code and the
  message of the REST API's error, never a Python traceback."""
  @functools.wraps(method)
  def rpc(self, request, context):
    try:
      return method(self, request, context)
    except Exception as e:  # pylint: disable=broad-except  (every failure becomes a status)
      code = status_code(e)
      message = e.message if isinstance(e, tf.errors.OpError) else str(e)
      if code is None:
        logger.exception("%s failed", method.__name__)
        code, message = grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}"
      context.abort(code, message)
  return rpc


def _model_spec(request):
  """(name, version, label) of a request's ModelSpec; TF Serving's words without one."""
  if not request.HasField("model_spec"):
    raise rest_json.RequestError("Missing ModelSpec")
  spec = request.model_spec
  choice = spec.WhichOneof("version_choice")
  return (spec.name, spec.version.value if choice == "version" else None,
          spec.version_label if choice == "version_label" else None)


def _dtype_name(enum):
  try:
    return tf.dtypes.as_dtype(enum).name
  except TypeError:
    return f"DataType {enum}"


def request_arrays(inputs, specs):
  """`{name: numpy array}` of a PredictRequest's `inputs` (TensorProtos by name) for a
  signature's input `specs`; a RequestError, in the REST API's words where it has them, for a
  missing or unknown input, a dtype or shape the signature does not take, an empty batch."""
  names = sorted(specs)
  rest_json.check_names(inputs, names, "the PredictRequest")
  arrays = {}
  for name in names:
    proto, spec = inputs[name], specs[name]
    if proto.dtype != spec.dtype.as_datatype_enum:
      raise rest_json.RequestError(
          f"{name} has the dtype {_dtype_name(proto.dtype)}; this signature takes "
          f"{spec.dtype.name} for it")
    try:
      array = tf.make_ndarray(proto)
    except (TypeError, ValueError) as e:
      raise rest_json.RequestError(f"{name} is not a valid TensorProto: {e}") from None
    if not spec.shape.is_compatible_with(array.shape):
      raise rest_json.RequestError(
          f"{name} has the shape {list(array.shape)}; this signature takes "
          f"{spec.shape.as_list() if spec.shape.rank is not None else 'any'}")
    arrays[name] = array
  rest_json.check_rows(arrays)
  return arrays


def output_names(function, output_filter):
  """The outputs a Predict answers: all of the signature's, or those of `output_filter`, each
  one the signature has and given once (TF Serving's rule and words)."""
  outputs = sorted(function.structured_outputs)
  if not output_filter:
    return outputs
  for i, alias in enumerate(output_filter):
    if alias not in outputs:
      raise rest_json.RequestError(
          f"output tensor alias not found in signature: {alias} Outputs expected to be in the "
          f"set {{{','.join(outputs)}}}.")
    if alias in output_filter[:i]:
      raise rest_json.RequestError(f"duplicate output tensor alias: {alias}")
  return list(output_filter)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
  """tensorflow.serving.PredictionService over a ServerCore."""

  def __init__(self, core):
    self.core = core

  @_answered
  def Predict(self, request, context):  # pylint: disable=invalid-name
    name, version, label = _model_spec(request)
    signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
    with self.core.serving(name, version, label) as servable:
      function = servable.signature(signature_name)
      arrays = request_arrays(request.inputs, rest_json.input_specs(function))
      wanted = output_names(function, list(request.output_filter))
      outputs = servable.run(signature_name, arrays)
    response = predict_pb2.PredictResponse()
    response.model_spec.name = name
    response.model_spec.version.value = servable.version
    response.model_spec.signature_name = signature_name
    for key in wanted:
      response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
    return response

  @_answered
  def GetModelMetadata(self, request, context):  # pylint: disable=invalid-name
    name, version, label = _model_spec(request)
    if not request.metadata_field:
      raise rest_json.RequestError(
          "GetModelMetadataRequest must specify at least one metadata_field")
    for field in request.metadata_field:
      if field != SIGNATURE_DEF:
        raise rest_json.RequestError(f"Metadata field {field} is not supported")
    with self.core.serving(name, version, label) as servable:
      signatures = get_model_metadata_pb2.SignatureDefMap()
      for key, signature_def in servable.signature_defs.items():
        signatures.signature_def[key].CopyFrom(signature_def)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.model_spec.name = name
    response.model_spec.version.value = servable.version
    response.metadata[SIGNATURE_DEF].Pack(signatures)  # type tensorflow.serving.SignatureDefMap
    return response

  @_answered
  def Classify(self, request, context):  # pylint: disable=invalid-name
    self._refuse("Classify", request)

  @_answered
  def Regress(self, request, context):  # pylint: disable=invalid-name
    self._refuse("Regress", request)

  @_answered
  def MultiInference(self, request, context):  # pylint: disable=invalid-name
    raise Refusal(grpc.StatusCode.UNIMPLEMENTED,
                  "MultiInference is not served by this server (serve.py): it runs Classify and "
                  "Regress tasks, which need tensorflow/serving/classify or regress signatures; "
                  "send a PredictRequest for each signature instead")

  def _refuse(self, rpc, request):
    """UNIMPLEMENTED, after the model and signature are found (NOT_FOUND as Predict would be), in
    words that say what the signature is and that Predict serves it."""
    name, version, label = _model_spec(request)
    signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
    with self.core.serving(name, version, label) as servable:
      servable.signature(signature_name)
      method = servable.signature_defs[signature_name].method_name
      examples = "serve_examples" in servable.signatures
    raise Refusal(
        grpc.StatusCode.UNIMPLEMENTED,
        f"{rpc} is not served by this server (serve.py): send a PredictRequest to signature "
        f"{signature_name!r} of model {name!r} instead (its method is {method}; {rpc} takes "
        f"only {_METHODS[rpc]} signatures, in TF Serving too)"
        + ("; tf.Example inputs go to its 'serve_examples' signature" if examples else ""))


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
  """tensorflow.serving.ModelService over a ServerCore."""

  def __init__(self, core):
    self.core = core

  @_answered
  def GetModelStatus(self, request, context):  # pylint: disable=invalid-name
    name, version, label = _model_spec(request)
    model = self.core.model(name)
    if label is not None:
      labels = model.spec.labels
      if label not in labels:
        raise rest_json.NotFound(f"model {name!r} has no version label {label!r}")
      version = labels[label]
    response = get_model_status_pb2.GetModelStatusResponse()
    for number, status in model.statuses(version):
      answer = response.model_version_status.add()
      answer.version = number
      answer.state = get_model_status_pb2.ModelVersionStatus.State.Value(status.state)
      answer.status.error_code = _ERROR_CODES[status.error_code].number
      answer.status.error_message = status.error_message
    return response

  @_answered
  def HandleReloadConfigRequest(self, request, context):  # pylint: disable=invalid-name
    """Serves the models of request.config from now on; returns once they are loaded (a version
    that fails to load shows in GetModelStatus, as in TF Serving, and what served keeps
    serving). A config TF Serving would refuse is INVALID_ARGUMENT in layout's words."""
    try:
      specs = layout.model_specs(request.config, "ReloadConfigRequest")
    except ValueError as e:
      raise rest_json.RequestError(str(e)) from None
    self.core.reload_config(specs)
    return model_management_pb2.ReloadConfigResponse()  # status: OK


def start_grpc_server(core, port, max_message_bytes=MAX_MESSAGE_BYTES, threads=None,
                      host="0.0.0.0"):
  """A started grpc.server answering TF Serving's gRPC API for `core` at `host`:`port` (0: a free
  port, in the server's `bound_port`), running requests on `threads` threads (default: CPUs + 4,
  at most 32). Messages over `max_message_bytes`, either way, are RESOURCE_EXHAUSTED. Stop it
  with `server.stop(grace_seconds)`: new RPCs are refused at once, those in flight finish."""
  threads = threads or min(32, (os.cpu_count() or 1) + 4)
  server = grpc.server(
      concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
      options=[("grpc.max_receive_message_length", max_message_bytes),
               ("grpc.max_send_message_length", max_message_bytes),
               # gRPC's default on Linux lets a second server bind the same port and take half
               # the connections: a port in use is an error here, as for the REST API.
               ("grpc.so_reuseport", 0)])
  prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
      PredictionService(core), server)
  model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(core), server)
  address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
  try:
    server.bound_port = server.add_insecure_port(address)
  except RuntimeError as e:
    raise OSError(f"cannot serve gRPC at {address} (--port): {e}") from None
  server.start()
  return server
