"""The server core: which models are served, their versions and each version's state.

What TF Serving's ServerCore does for its model servers, for SavedModels in TF Serving's layout
(export/layout.py): each model's base path is polled every `poll_wait_seconds`; a version the
policy wants (latest N, all, specific) is loaded, its warm-up requests replayed, and only then
made AVAILABLE; a version the policy no longer wants is unloaded once a wanted one is
AVAILABLE (TF Serving's availability-preserving policy), after the requests it is answering
have finished. A version that fails to load is logged, shown in status with its error and tried
again when its folder changes; what was served keeps serving. The protocols (serving/rest.py,
serving/grpc_api.py) are thin adapters: each request holds its version with `serving()` while
it runs, so an unload never drops a request in flight.

States are TF Serving's (tensorflow_serving/apis/get_model_status.proto): START, LOADING,
AVAILABLE, UNLOADING, END.
"""

import contextlib
import dataclasses
import logging
import os
import threading
import time

from albert_tf import files
from albert_tf.export import layout, rest_json
from albert_tf.export.warmup import WARMUP_FILE
from albert_tf.jobs import versions

logger = logging.getLogger("albert_tf.serve")

MAX_WARMUP_RECORDS = 1000  # TF Serving's limit on a version's warm-up file


class Unavailable(RuntimeError):
  """The server is stopping, or cannot take the request now: HTTP 503 / gRPC UNAVAILABLE."""


@dataclasses.dataclass
class VersionStatus:
  """One version's state and, after a failed load, TF Serving's error code and message."""
  state: str = "START"
  error_code: str = "OK"
  error_message: str = ""
  fingerprint: tuple = ()  # the folder's files when it was last tried


class Servable:
  """One loaded version: its SavedModel, signatures (functions and SignatureDef protos), and
  the requests in flight on it."""

  def __init__(self, name, version, path, loaded, signature_defs, batching=None):
    self.name, self.version, self.path = name, version, path
    self.loaded = loaded
    self.signatures = loaded.signatures
    self.signature_defs = signature_defs
    self._in_flight = 0
    self._idle = threading.Condition()
    self._batchers = {}
    self._unbatched = {}  # signature -> why it is run unbatched
    if batching is not None:
      self._make_batchers(batching)

  def _make_batchers(self, params):
    from albert_tf.serving import batching  # pylint: disable=g-import-not-at-top
    for name, function in self.signatures.items():
      ok, reason = batching.batchable(function)
      if ok:
        self._batchers[name] = batching.Batcher(
            params, lambda arrays, f=function: rest_json.run(f, arrays),
            name=f"{self.name}/{self.version}/{name}")
      else:
        self._unbatched[name] = reason
        logger.info("model %r version %d signature %r is not batched: %s", self.name,
                    self.version, name, reason)

  def signature(self, name):
    """The function of signature `name` (TF Serving's default when empty)."""
    name = name or "serving_default"
    if name not in self.signatures:
      raise rest_json.NotFound(
          f"model {self.name!r} version {self.version} has no signature {name!r} (it has "
          f"{', '.join(sorted(self.signatures))})")
    return self.signatures[name]

  def run(self, signature_name, arrays):
    """The outputs `{name: numpy array}` of a signature for `arrays` (checked inputs), through
    the signature's batcher when batching is on."""
    signature_name = signature_name or "serving_default"
    function = self.signature(signature_name)
    batcher = self._batchers.get(signature_name)
    if batcher is not None:
      return batcher.submit(arrays)
    return rest_json.run(function, arrays)

  @contextlib.contextmanager
  def in_flight(self):
    with self._idle:
      self._in_flight += 1
    try:
      yield self
    finally:
      with self._idle:
        self._in_flight -= 1
        self._idle.notify_all()

  def wait_idle(self):
    """Blocks until no request is running on this version."""
    with self._idle:
      self._idle.wait_for(lambda: self._in_flight == 0)

  def close(self):
    """Finishes queued batches and drops the model (its memory goes with the last reference)."""
    for batcher in self._batchers.values():
      batcher.close()
    self._batchers.clear()
    self.loaded = self.signatures = None


def signature_defs(path):
  """{signature: SignatureDef proto} of the serving MetaGraph of the SavedModel at `path`."""
  from tensorflow.python.saved_model import loader_impl  # pylint: disable=g-import-not-at-top
  saved_model = loader_impl.parse_saved_model(path)
  serving = next(m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags)
  return dict(serving.signature_def)


def warmup_requests(path):
  """The PredictRequests of a version's `assets.extra/tf_serving_warmup_requests` (TF Serving's
  PredictionLog records), [] without the file."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=g-import-not-at-top
  file = os.path.join(path, WARMUP_FILE)
  if not tf.io.gfile.exists(file):
    return []
  requests = []
  for i, record in enumerate(tf.data.TFRecordDataset(file).as_numpy_iterator()):
    if i >= MAX_WARMUP_RECORDS:
      raise ValueError(f"{file}: more than {MAX_WARMUP_RECORDS} warm-up records (TF Serving's "
                       "limit)")
    log = prediction_log_pb2.PredictionLog.FromString(record)
    if log.WhichOneof("log_type") != "predict_log":
      raise ValueError(f"{file}: record {i + 1} is a {log.WhichOneof('log_type')}; this server "
                       "replays predict_log records")
    requests.append(log.predict_log.request)
  return requests


def _replay(servable, requests):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for request in requests:
    arrays = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
    servable.run(request.model_spec.signature_name, arrays)


def _fingerprint(path):
  """The names, sizes and times of the files under `path`: a folder still being written changes
  it, so a version that failed is tried again when its files change."""
  found = []
  for root, _, names in os.walk(path):
    for name in names:
      try:
        stat = os.stat(os.path.join(root, name))
      except OSError:
        continue
      found.append((os.path.relpath(os.path.join(root, name), path), stat.st_size,
                    stat.st_mtime_ns))
  return tuple(sorted(found))


def load_saved_model(path):
  """The SavedModel at `path`, loaded for serving: through interop's loader, so an unloaded
  version takes its gradient registrations (exports written with custom gradients) with it."""
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (in-graph tokenizers' ops)
  from albert_tf.interop.saved_models import load_saved_model as load  # pylint: disable=g-import-not-at-top
  return load(path)


class ManagedModel:
  """One model name: its spec (base path, policy, labels), its versions' states and the
  AVAILABLE versions."""

  def __init__(self, spec, batching=None):
    self.spec = spec
    self.batching = batching
    self.status = {}  # version -> VersionStatus, every version ever seen
    self.available = {}  # version -> Servable
    self.lock = threading.RLock()

  @property
  def name(self):
    return self.spec.name

  def servable(self, version=None, label=None):
    """The AVAILABLE version a request names (by number or label), else the highest."""
    with self.lock:
      if label is not None:
        if label not in self.spec.labels:
          raise rest_json.NotFound(f"model {self.name!r} has no version label {label!r}")
        version = self.spec.labels[label]
      if version is None:
        if not self.available:
          raise rest_json.NotFound(f"model {self.name!r} has no version available yet")
        return self.available[max(self.available)]
      if str(version).isdigit() and int(version) in self.available:
        return self.available[int(version)]
      raise rest_json.NotFound(
          f"model {self.name!r} has no version {version} served (served: "
          f"{', '.join(map(str, sorted(self.available))) or 'none'})")

  def poll(self, strict=False):
    """Brings the served versions in line with the base path and the policy. `strict` (the
    first poll at start-up): a missing version or a failed load is an error, as before any
    client depends on the server."""
    if strict:
      self.spec.chosen_versions()  # FileNotFoundError naming the path and what is missing
    wanted = self.spec.wanted(versions.versions(self.spec.base_path))
    for version in wanted:
      status = self.status.get(version)
      if version in self.available:
        continue
      path = os.path.join(self.spec.base_path, str(version))
      fingerprint = _fingerprint(path)
      if status is not None and status.fingerprint == fingerprint:
        continue  # failed before and unchanged since: tried again when its files change
      self._load(version, path, fingerprint, strict)
    if not any(v in self.available for v in wanted):
      return  # nothing wanted is up: what is served keeps serving
    for version in sorted(set(self.available) - set(wanted)):
      self._unload(version)
    labelled = set(self.spec.labels.values()) - set(self.available)
    if labelled and strict:
      raise ValueError(f"model {self.name!r}: version label of version {min(labelled)}, "
                       "which is not served")

  def _load(self, version, path, fingerprint, strict):
    status = self.status.setdefault(version, VersionStatus())
    status.state, status.error_code, status.error_message = "LOADING", "OK", ""
    status.fingerprint = fingerprint
    logger.info("loading model %r version %d from %s", self.name, version, path)
    start = time.time()
    try:
      if not files.isdir(os.path.join(path, "variables")):
        raise FileNotFoundError(
            f"{path} has {versions.SAVED_MODEL} but no variables/ folder: a SavedModel is both "
            "(still being copied? it is tried again when its files change)")
      loaded = load_saved_model(path)
      servable = Servable(self.name, version, path, loaded, signature_defs(path), self.batching)
      requests = warmup_requests(path)
      _replay(servable, requests)
    except Exception as e:  # pylint: disable=broad-except  (any failure is this version's)
      status.state, status.error_code = "END", "UNKNOWN"
      status.error_message = f"{type(e).__name__}: {e}"
      logger.error("model %r version %d failed to load from %s: %s", self.name, version, path,
                   status.error_message)
      if strict:
        raise ValueError(f"model {self.name!r} version {version} ({path}): "
                         f"{status.error_message}") from e
      return
    with self.lock:
      self.available[version] = servable
      status.state = "AVAILABLE"
    logger.info("model %r version %d AVAILABLE in %.1f s (%d warm-up requests); signatures: %s",
                self.name, version, time.time() - start, len(requests),
                ", ".join(sorted(servable.signatures)))

  def _unload(self, version):
    status = self.status[version]
    with self.lock:
      servable = self.available.pop(version)
      status.state = "UNLOADING"
    logger.info("unloading model %r version %d", self.name, version)
    servable.wait_idle()
    servable.close()
    status.state = "END"
    logger.info("model %r version %d unloaded", self.name, version)

  def unload_all(self):
    for version in sorted(self.available):
      self._unload(version)

  def statuses(self, version=None):
    """[(version, VersionStatus)] newest first; one version's when `version` is given."""
    with self.lock:
      if version is not None:
        if not str(version).isdigit() or int(version) not in self.status:
          raise rest_json.NotFound(
              f"model {self.name!r} has no version {version} (known: "
              f"{', '.join(map(str, sorted(self.status))) or 'none'})")
        return [(int(version), self.status[int(version)])]
      return sorted(self.status.items(), reverse=True)


class ServerCore:
  """The models of `specs` (export/layout.py's ModelSpecs), their versions kept in line with
  their base paths every `poll_wait_seconds` (0: only at start, as TF Serving's
  --file_system_poll_wait_seconds=0), and the model list with `config_file` every
  `config_poll_wait_seconds` (0: never). `batching`: TF Serving's BatchingParameters, or None."""

  def __init__(self, specs, poll_wait_seconds=1, batching=None, config_file=None,
               config_poll_wait_seconds=0):
    self.batching = batching
    self.poll_wait_seconds = poll_wait_seconds
    self.config_file = config_file
    self.config_poll_wait_seconds = config_poll_wait_seconds
    self.models = {s.name: ManagedModel(s, batching) for s in specs}
    self._config_lock = threading.Lock()  # one poll or reload at a time
    self._stopping = threading.Event()
    self._threads = []

  def start(self):
    """Loads every model's versions (an error names the first that fails), then polls."""
    for i, model in enumerate(self.models.values()):
      logger.info("model %d of %d: %r from %s", i + 1, len(self.models), model.name,
                  model.spec.base_path)
      model.poll(strict=True)
    if self.poll_wait_seconds > 0:
      self._every(self.poll_wait_seconds, self.poll, "version poll")
    if self.config_file and self.config_poll_wait_seconds > 0:
      self._every(self.config_poll_wait_seconds, self._reread_config, "config poll")

  def _every(self, seconds, job, what):
    def loop():
      while not self._stopping.wait(seconds):
        try:
          job()
        except Exception:  # pylint: disable=broad-except  (a poll never stops the server)
          logger.exception("%s failed; trying again in %s s", what, seconds)
    thread = threading.Thread(target=loop, name=what, daemon=True)
    thread.start()
    self._threads.append(thread)

  def poll(self):
    """One pass over every model's base path."""
    with self._config_lock:
      for model in list(self.models.values()):
        if self._stopping.is_set():
          return
        model.poll()

  def _reread_config(self):
    specs = layout.read_model_config(self.config_file)
    if [dataclasses.astuple(s) for s in specs] != [
        dataclasses.astuple(m.spec) for m in self.models.values()]:
      logger.info("--model_config_file=%s changed: %s", self.config_file,
                  ", ".join(s.name for s in specs))
      self.reload_config(specs)

  def reload_config(self, specs):
    """Serves the models of `specs` from now on: new models loaded, removed ones unloaded,
    changed policies and labels applied (TF Serving's HandleReloadConfigRequest)."""
    with self._config_lock:
      current = dict(self.models)
      models = {}
      for spec in specs:
        model = current.get(spec.name)
        if model is None or model.spec.base_path != spec.base_path:
          model = ManagedModel(spec, self.batching)
        else:
          with model.lock:
            model.spec = spec
        model.poll()
        models[spec.name] = model
      self.models = models
      for name, model in current.items():
        if models.get(name) is not model:
          logger.info("model %r removed from the config: unloading", name)
          model.unload_all()

  def model(self, name):
    model = self.models.get(name)
    if model is None:
      raise rest_json.NotFound(f"no model {name!r} is served (served: "
                               f"{', '.join(sorted(self.models))})")
    return model

  @contextlib.contextmanager
  def serving(self, name, version=None, label=None):
    """The Servable a request names, held for the request's duration (an unload waits)."""
    if self._stopping.is_set():
      raise Unavailable("the server is stopping")
    model = self.model(name)
    with model.lock:
      servable = model.servable(version, label)
      context = servable.in_flight()
      context.__enter__()
    try:
      yield servable
    finally:
      context.__exit__(None, None, None)

  def stop(self):
    """No new requests; polling stops; every version is unloaded after its requests finish."""
    self._stopping.set()
    for thread in self._threads:
      thread.join(timeout=60)
    for model in self.models.values():
      model.unload_all()
