"""serve.py's server: exported SavedModels on TF Serving's REST API, on kserve's model server.

kserve brings the HTTP server (uvicorn, FastAPI), the model registry and data plane a request
goes through (with its Prometheus metrics at /metrics), and graceful shutdown. Its own V1 API
is close to TF Serving's but not the same (its model status is `{"name", "ready"}`, it reads
only `instances`), so TF Serving's routes are added to its application first, where they take
precedence; every predict still goes through kserve's data plane to the registered model.
"""

import asyncio
import json
import logging
import os
import sys
import time

from albert_tf.export import rest_json

logger = logging.getLogger("albert_tf.serve")


def _import_kserve():
  """kserve, imported without reading our command line: its module parses sys.argv with
  flags of its own (--model_name among them) when first imported."""
  given, sys.argv[1:] = sys.argv[1:], []
  try:
    import kserve  # pylint: disable=g-import-not-at-top
    from kserve import model_server  # pylint: disable=g-import-not-at-top
  finally:
    sys.argv[1:] = given
  return kserve, model_server


kserve, _kserve_server = _import_kserve()


class RequestTooLarge(Exception):
  """A body over the server's limit: HTTP 413."""


class ServedModel(kserve.Model):
  """One model name: the versions of its base path that its spec's policy chooses, loaded
  with `tf.saved_model.load`, and their signatures."""

  def __init__(self, spec):
    super().__init__(spec.name)
    self.spec = spec
    self.versions = {}  # version -> loaded SavedModel
    self.signature_defs = {}  # version -> {signature: SignatureDef as TF Serving's JSON}

  def load(self):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (in-graph tokenizers' ops)
    chosen = self.spec.chosen_versions()
    for version in chosen:
      path = os.path.join(self.spec.base_path, str(version))
      logger.info("loading model %r version %d from %s", self.name, version, path)
      start = time.time()
      self.versions[version] = tf.saved_model.load(path)
      self.signature_defs[version] = _signature_defs(path)
      logger.info("model %r version %d loaded in %.1f s; signatures: %s", self.name, version,
                  time.time() - start, ", ".join(sorted(self.versions[version].signatures)))
    unknown = sorted(set(self.spec.labels.values()) - set(chosen))
    if unknown:
      raise ValueError(f"model {self.name!r}: version label of version {unknown[0]}, which is "
                       "not served")
    self.ready = True
    return self.ready

  def version(self, version=None, label=None):
    """The served version a request names (by number or label), else the highest."""
    if label is not None:
      if label not in self.spec.labels:
        raise rest_json.NotFound(f"model {self.name!r} has no version label {label!r}")
      return self.spec.labels[label]
    if version is None:
      return max(self.versions)
    if not version.isdigit() or int(version) not in self.versions:
      raise rest_json.NotFound(
          f"model {self.name!r} has no version {version} served (served: "
          f"{', '.join(map(str, sorted(self.versions)))})")
    return int(version)

  def signature(self, version, name):
    signatures = self.versions[version].signatures
    if name not in signatures:
      raise rest_json.NotFound(
          f"model {self.name!r} version {version} has no signature {name!r} (it has "
          f"{', '.join(sorted(signatures))})")
    return signatures[name]

  async def predict(self, payload, headers=None):
    if not isinstance(payload, dict) or "request" not in payload:
      raise NotImplementedError(
          "this server answers TF Serving's REST API: POST /v1/models/NAME:predict")
    request = payload["request"]
    function = self.signature(payload["version"],
                              request.get("signature_name") or "serving_default")
    arrays, rows = rest_json.request_inputs(request, rest_json.input_specs(function))
    outputs = await asyncio.get_running_loop().run_in_executor(None, rest_json.run, function,
                                                               arrays)
    return rest_json.response(outputs, rows)


def _signature_defs(path):
  """{signature: SignatureDef} of the SavedModel at `path`, in TF Serving's metadata JSON."""
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  from tensorflow.python.saved_model import loader_impl  # pylint: disable=g-import-not-at-top
  saved_model = loader_impl.parse_saved_model(path)
  serving = next(m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags)
  return {name: json_format.MessageToDict(signature, preserving_proto_field_name=True)
          for name, signature in serving.signature_def.items()}


def load_models(specs):
  """A loaded ServedModel of each ModelSpec, in order."""
  models = []
  for i, spec in enumerate(specs):
    logger.info("model %d of %d: %r from %s", i + 1, len(specs), spec.name, spec.base_path)
    model = ServedModel(spec)
    model.load()
    models.append(model)
  return models


class _BodyLimit:
  """ASGI middleware refusing request bodies over `limit` bytes: at once by Content-Length,
  else (a chunked body) while it is read."""

  def __init__(self, app, limit):
    self.app, self.limit = app, limit

  async def __call__(self, scope, receive, send):
    if scope["type"] != "http":
      return await self.app(scope, receive, send)
    length = dict(scope["headers"]).get(b"content-length")
    if length is not None and length.isdigit() and int(length) > self.limit:
      return await _error(413, self._message(int(length)))(scope, receive, send)
    seen = 0

    async def limited():
      nonlocal seen
      message = await receive()
      seen += len(message.get("body", b""))
      if seen > self.limit:
        raise RequestTooLarge(self._message(seen))
      return message
    return await self.app(scope, limited, send)

  def _message(self, size):
    return (f"the request body has {size} bytes; this server takes at most {self.limit} "
            "(--max_request_bytes)")


def _error(status, message):
  from fastapi.responses import ORJSONResponse  # pylint: disable=g-import-not-at-top
  return ORJSONResponse(status_code=status, content={"error": message})


class ModelServer:
  """`models` (loaded ServedModels) on TF Serving's REST API at `port`."""

  def __init__(self, models, port=8501, threads=None, max_request_bytes=32 << 20,
               grace_seconds=30):
    self.models = {m.name: m for m in models}
    self.port = port
    self.server = kserve.ModelServer(
        http_port=port, enable_grpc=False, max_asyncio_workers=threads,
        enable_latency_logging=False, grace_period=grace_seconds)
    self._add_routes(_kserve_server.app, max_request_bytes)

  def _model(self, name):
    if name not in self.models:
      raise rest_json.NotFound(f"no model {name!r} is served (served: "
                               f"{', '.join(sorted(self.models))})")
    return self.models[name]

  def _add_routes(self, app, max_request_bytes):
    from fastapi import Request, Response  # pylint: disable=g-import-not-at-top
    dataplane = self.server.dataplane

    async def status(name: str, version: str = None):
      model = self._model(name)
      served = [model.version(version)] if version is not None else sorted(model.versions)
      return {"model_version_status": [
          {"version": str(v), "state": "AVAILABLE",
           "status": {"error_code": "OK", "error_message": ""}} for v in reversed(served)]}

    async def metadata(name: str, version: str = None):
      model = self._model(name)
      served = model.version(version)
      return {"model_spec": {"name": name, "signature_name": "", "version": str(served)},
              "metadata": {"signature_def": {"signature_def": model.signature_defs[served]}}}

    async def predict(request: Request, name: str, version: str = None, label: str = None):
      model = self._model(name)
      served = model.version(version, label)
      payload = {"version": served, "request": rest_json.parse_body(await request.body())}
      answer, _ = await dataplane.infer(model_name=name, request=payload,
                                        headers=dict(request.headers))
      # Python's JSON, as TF Serving's: NaN and Infinity written as such, not as null.
      return Response(json.dumps(answer, separators=(",", ":")), media_type="application/json")

    prefix = "/v1/models/{name}"
    for path in ("", "/versions/{version}"):
      app.add_api_route(prefix + path, status, methods=["GET"])
      app.add_api_route(prefix + path + "/metadata", metadata, methods=["GET"])
    for path in ("", "/versions/{version}", "/labels/{label}"):
      app.add_api_route(prefix + path + ":predict", predict, methods=["POST"],
                        response_model=None)
    for error, code in ((rest_json.RequestError, 400), (rest_json.NotFound, 404),
                        (RequestTooLarge, 413)):
      app.add_exception_handler(error, lambda _, e, code=code: _error(code, str(e)))
    app.add_middleware(_BodyLimit, limit=max_request_bytes)

  def run(self):
    """Serves until SIGTERM or SIGINT; returns the exit status (0 after a clean stop)."""
    logger.info("serving %s on TF Serving's REST API at http://0.0.0.0:%d/v1/models/",
                ", ".join(sorted(self.models)), self.port)
    self.server.start(list(self.models.values()))
    logger.info("stopped")
    return 0
