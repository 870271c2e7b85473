"""TF Serving's REST API over the server core, on kserve's HTTP server; and the process that
serves REST and gRPC together.

kserve brings the HTTP server (uvicorn, FastAPI), its Prometheus metrics at /metrics and a
graceful shutdown. Its own V1 API is close to TF Serving's but not the same (its model status
is `{"name", "ready"}`, it reads only `instances`), so TF Serving's routes are added to its
application first, where they take precedence, and answer from the core (serving/core.py),
as the gRPC adapter (serving/grpc_api.py) does.

kserve's V2 routes (the Open Inference Protocol of KServe and Triton) answer 404 naming the V1
route: this server stands in for TF Serving, whose clients speak V1 REST and gRPC; V2 would
go through kserve's own model registry, which the core's live versions are not in, and a V2
that half works for string tensors is worse than a clear refusal.
"""

import asyncio
import json
import logging
import os
import signal
import sys

from albert_tf.export import rest_json
from albert_tf.serving import batching
from albert_tf.serving import core as core_lib

logger = logging.getLogger("albert_tf.serve")


def _import_kserve():
  """kserve, imported without reading our command line: its module parses sys.argv with
  flags of its own (--model_name among them) when first imported."""
  given, sys.argv[1:] = sys.argv[1:], []
  try:
    import kserve  # pylint: disable=g-import-not-at-top
    from kserve import model_server  # pylint: disable=g-import-not-at-top
    from kserve.protocol.rest import server as rest_server  # pylint: disable=g-import-not-at-top
  finally:
    sys.argv[1:] = given
  return kserve, model_server, rest_server


kserve, _kserve_server, _kserve_rest = _import_kserve()


class RequestTooLarge(Exception):
  """A body over the server's limit: HTTP 413."""


class MethodNotAllowed(Exception):
  """A route asked with the wrong method: HTTP 405."""


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


def version_status(statuses):
  """TF Serving's REST model status for [(version, core.VersionStatus)]."""
  return {"model_version_status": [
      {"version": str(v), "state": s.state,
       "status": {"error_code": s.error_code, "error_message": s.error_message}}
      for v, s in statuses]}


def metadata(servable):
  """TF Serving's REST metadata answer: the version's SignatureDefs as JSON."""
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  defs = {name: json_format.MessageToDict(d, preserving_proto_field_name=True)
          for name, d in servable.signature_defs.items()}
  return {"model_spec": {"name": servable.name, "signature_name": "",
                         "version": str(servable.version)},
          "metadata": {"signature_def": {"signature_def": defs}}}


def predict(core, name, version, label, body):
  """TF Serving's REST predict answer (a dict) for the raw request `body`."""
  request = rest_json.parse_body(body)
  with core.serving(name, version, label) as servable:
    signature_name = request.get("signature_name") or "serving_default"
    function = servable.signature(signature_name)
    arrays, rows = rest_json.request_inputs(request, rest_json.input_specs(function))
    return rest_json.response(servable.run(signature_name, arrays), rows)


def add_routes(app, core, max_request_bytes):
  """TF Serving's REST routes on `app` (before kserve's own), answered from `core`."""
  from fastapi import Request, Response  # pylint: disable=g-import-not-at-top

  def _version(model, version, label):
    if label is not None:
      return model.servable(label=label).version
    return version

  async def status(name: str, version: str = None, label: str = None):
    model = core.model(name)
    return version_status(model.statuses(_version(model, version, label)))

  async def get_metadata(name: str, version: str = None, label: str = None):
    model = core.model(name)
    with model.lock:
      return metadata(model.servable(version, label))

  async def post_predict(request: Request, name: str, version: str = None, label: str = None):
    body = await request.body()
    answer = await asyncio.get_running_loop().run_in_executor(
        None, predict, core, name, version, label, body)
    # Python's JSON, as TF Serving's: NaN and Infinity written as such, not as null.
    return Response(json.dumps(answer, separators=(",", ":")), media_type="application/json")

  async def predict_by_get(request: Request):
    raise MethodNotAllowed(f"GET {request.url.path}: predict takes POST with a JSON body "
                           '({"instances": [...]} or {"inputs": ...})')

  async def v2_refused(path: str):
    raise rest_json.NotFound(
        f"/v2/{path}: this server answers TF Serving's API, not KServe's V2 protocol; use "
        "POST /v1/models/NAME:predict (or TF Serving's gRPC PredictionService)")

  prefix = "/v1/models/{name}"
  for path in ("", "/versions/{version}", "/labels/{label}"):
    # First: GET .../NAME:predict would otherwise be read as the status of a model "NAME:predict".
    app.add_api_route(prefix + path + ":predict", predict_by_get, methods=["GET"])
    app.add_api_route(prefix + path, status, methods=["GET"])
    app.add_api_route(prefix + path + "/metadata", get_metadata, methods=["GET"])
    app.add_api_route(prefix + path + ":predict", post_predict, methods=["POST"],
                      response_model=None)
  app.add_api_route("/v2/{path:path}", v2_refused, methods=["GET", "POST", "PUT", "DELETE"])
  for error, code in ((rest_json.RequestError, 400), (rest_json.NotFound, 404),
                      (MethodNotAllowed, 405), (RequestTooLarge, 413),
                      (core_lib.Unavailable, 503), (batching.Unavailable, 503)):
    app.add_exception_handler(error, lambda _, e, code=code: _error(code, str(e)))

  async def http_error(request, e):
    # Starlette's own 404 / 405 (a path no route takes) in TF Serving's {"error": ...} form.
    if e.status_code in (404, 405):
      return _error(e.status_code, f"Malformed request: {request.method} {request.url.path} "
                    "(TF Serving's API: GET /v1/models/NAME[/versions/N | /labels/L]"
                    "[/metadata], POST /v1/models/NAME[...]:predict)")
    return _error(e.status_code, str(e.detail))
  from starlette.exceptions import HTTPException  # pylint: disable=g-import-not-at-top
  app.add_exception_handler(HTTPException, http_error)
  app.add_middleware(_BodyLimit, limit=max_request_bytes)


class ModelServer:
  """The core's models on TF Serving's REST API at `rest_port` and, unless `grpc_port` is 0,
  its gRPC API at `grpc_port`, in one process. SIGTERM or SIGINT: both stop taking requests,
  those in flight finish (up to `grace_seconds`), the versions are unloaded, exit 0."""

  def __init__(self, core, rest_port=8501, grpc_port=8500, threads=None,
               max_request_bytes=32 << 20, grace_seconds=30):
    self.core = core
    self.rest_port, self.grpc_port = rest_port, grpc_port
    self.threads, self.grace_seconds = threads, grace_seconds
    self.max_request_bytes = max_request_bytes
    self._grpc = None
    self._stopped = None

  def _begin_stop(self):
    """At the first signal: gRPC refuses new calls and drains while uvicorn drains REST."""
    if self._grpc is not None and self._stopped is None:
      logger.info("stopping: requests in flight finish (up to %d s)", self.grace_seconds)
      self._stopped = self._grpc.stop(self.grace_seconds)

  async def _serve(self, rest):
    import concurrent.futures  # pylint: disable=g-import-not-at-top
    threads = self.threads or min(32, (os.cpu_count() or 1) + 4)
    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="rest"))
    await rest.start()

  def run(self):
    """Serves until SIGTERM or SIGINT; returns the exit status (0 after a clean stop)."""
    server = kserve.ModelServer(http_port=self.rest_port, enable_grpc=False,
                                max_asyncio_workers=self.threads,
                                enable_latency_logging=False, grace_period=self.grace_seconds)
    app = _kserve_server.app
    add_routes(app, self.core, self.max_request_bytes)
    rest = _kserve_rest.RESTServer(
        _kserve_server.FASTAPI_APP_IMPORT_STRING, server.dataplane,
        server.model_repository_extension, self.rest_port, grace_period=self.grace_seconds)
    begin_stop = self._begin_stop
    uvicorn_exit = rest._server.handle_exit  # pylint: disable=protected-access

    def handle_exit(sig, frame):
      begin_stop()
      uvicorn_exit(sig, frame)
    rest._server.handle_exit = handle_exit  # pylint: disable=protected-access
    for sig in (signal.SIGTERM, signal.SIGINT):
      # uvicorn raises the signal it caught again after its shutdown, with the handler it
      # found in place: ours ignores it, so the process ends by returning, with status 0.
      signal.signal(sig, lambda *_: None)
    if self.grpc_port:
      from albert_tf.serving import grpc_api  # pylint: disable=g-import-not-at-top
      self._grpc = grpc_api.start_grpc_server(self.core, self.grpc_port,
                                              max_message_bytes=self.max_request_bytes,
                                              threads=self.threads)
    models = ", ".join(sorted(self.core.models))
    logger.info("serving %s on TF Serving's REST API at http://0.0.0.0:%d/v1/models/", models,
                self.rest_port)
    if self.grpc_port:
      logger.info("serving %s on TF Serving's gRPC API at 0.0.0.0:%d", models, self.grpc_port)
    asyncio.run(self._serve(rest))
    self._begin_stop()
    if self._stopped is not None:
      self._stopped.wait(self.grace_seconds + 5)
    self.core.stop()
    logger.info("stopped")
    return 0
