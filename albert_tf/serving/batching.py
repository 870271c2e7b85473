"""Server-side batching: TF Serving's `--enable_batching` / `--batching_parameters_file`.

Requests to one signature that arrive close together are run as one batch: each request waits
in a queue until `max_batch_size` rows are waiting or `batch_timeout_micros` has passed since
the batch opened, then one of `num_batch_threads` threads runs the whole batch (its requests'
inputs concatenated on axis 0) and gives each request back exactly its own rows.

    params = read_batching_parameters("batching.pbtxt")   # max_batch_size { value: 32 } ...
    batcher = Batcher(params, lambda arrays: rest_json.run(function, arrays), name="sst2/1")
    outputs = batcher.submit({"text_a": np.array([b"a fine film"], object)})  # from any thread
    batcher.close()                                        # drains the queue, then refuses

Batching must never change an answer (issue 56: every answer identical to its unbatched answer,
to float32 rounding), and that decides where we differ from TF Serving:
  - TF Serving merges every request of a signature into the batch and, with
    `pad_variable_length_inputs`, pads shorter inputs with each tensor's first element (its
    batching_util.h: "First element of a tensor is used as padding value"). An input_mask
    padded with its first element, a 1, would attend to the padding and change the answer.
    We accept the flag and never pad lengths: requests are merged only with requests whose
    inputs have the same names, dtypes and non-batch shapes (ids of different lengths go into
    different batches), which is exact whatever the flag says.
  - Some signatures compute a batch at its longest text (raw-text inputs, per-token outputs):
    a request's answer would then be padded differently merged than alone. `batchable()` says
    which signatures are safe to merge; the server runs the others directly.
  - An error that belongs to one request (a `rest_json.RequestError`: a signature refusing an
    input) must not fail the other requests of its batch: a merged batch that raises one is run
    again request by request, so each gets its own answer or its own error (row numbers in the
    error then count the request's own rows). Any other error reaches every request of the
    batch, as in TF Serving (of its call, when the batch is grouped by length).

Where TF Serving's own behaviour is kept (tensorflow/core/kernels/batching_util/
shared_batch_scheduler.h, tensorflow_serving/batching/batching_session.cc): the defaults, the
queue bound (`max_enqueued_batches` batches, the open one included; full -> UNAVAILABLE "The
batch scheduling queue to which this task was submitted is full"), a request larger than
`max_batch_size` refused ("Task size N is larger than maximum input batch size M"), and
`allowed_batch_sizes`: a batch padded up to the next allowed size with copies of the first row
of its last request, the padding rows' outputs dropped.

Ours, not TF Serving's (`BatchingParameters.group_by_length`, serve.py's
--group_batches_by_length): a merged batch of raw-text requests may run as several calls, the
requests grouped by length so that a short text is not computed at a long one's length
(serving/grouping.py); each call is then run, padded and split as a batch is above.
"""

import dataclasses
import logging
import os
import threading
import time

import numpy as np

from albert_tf import files
from albert_tf.export import rest_json
from albert_tf.serving import grouping

logger = logging.getLogger(__name__)

QUEUE_FULL = "The batch scheduling queue to which this task was submitted is full"

# TF Serving's BatchingParameters (tensorflow_serving/servables/tensorflow/
# session_bundle_config.proto), field for field: the pip package tensorflow-serving-api ships
# the model server's config protos but not session_bundle_config_pb2, so the message is built
# here from its descriptor, with TF Serving's names, numbers and wrapper types (a wrapper tells
# an absent field, which takes the scheduler's default, from one set to 0).
_BATCHING_PROTO = """
name: "tensorflow_serving/servables/tensorflow/session_bundle_config.proto"
package: "tensorflow.serving"
dependency: "google/protobuf/wrappers.proto"
syntax: "proto3"
message_type {
  name: "BatchingParameters"
  field { name: "max_batch_size" number: 1 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".google.protobuf.Int64Value" }
  field { name: "batch_timeout_micros" number: 2 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".google.protobuf.Int64Value" }
  field { name: "max_enqueued_batches" number: 3 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".google.protobuf.Int64Value" }
  field { name: "num_batch_threads" number: 4 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".google.protobuf.Int64Value" }
  field { name: "thread_pool_name" number: 5 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".google.protobuf.StringValue" }
  field { name: "allowed_batch_sizes" number: 6 type: TYPE_INT64 label: LABEL_REPEATED }
  field { name: "pad_variable_length_inputs" number: 7 type: TYPE_BOOL label: LABEL_OPTIONAL }
  field { name: "enable_large_batch_splitting" number: 8 type: TYPE_MESSAGE
          label: LABEL_OPTIONAL type_name: ".google.protobuf.BoolValue" }
  field { name: "max_execution_batch_size" number: 9 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".google.protobuf.Int64Value" }
}
"""


class Unavailable(RuntimeError):
  """The batcher cannot take the request now (its queue is full, or it is closed): HTTP 503,
  gRPC UNAVAILABLE. The client may retry."""


def _cores():
  """The cores this process may run on: TF Serving's default num_batch_threads
  (port::MaxParallelism())."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
  """What `Batcher` does, with TF Serving's defaults for a field the file leaves out
  (SharedBatchScheduler's Options and QueueOptions)."""
  max_batch_size: int = 1000
  batch_timeout_micros: int = 0
  max_enqueued_batches: int = 10
  num_batch_threads: int = dataclasses.field(default_factory=_cores)
  thread_pool_name: str = "batch_threads"
  allowed_batch_sizes: tuple = ()
  pad_variable_length_inputs: bool = False
  # Ours (no field of TF Serving's proto, so never read from --batching_parameters_file): run a
  # merged batch of raw text as calls grouped by length when that costs less (serving/grouping.py).
  group_by_length: bool = True

  def __post_init__(self):
    object.__setattr__(self, "allowed_batch_sizes", tuple(self.allowed_batch_sizes))
    for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
    if self.batch_timeout_micros < 0:
      raise ValueError(f"batch_timeout_micros must be 0 or more, got {self.batch_timeout_micros}")
    sizes = self.allowed_batch_sizes
    if sizes:
      if sizes[0] < 1 or any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ValueError("allowed_batch_sizes entries must be monotonically increasing "
                         f"positive sizes, got {list(sizes)}")
      if sizes[-1] != self.max_batch_size:
        raise ValueError("Last entry in allowed_batch_sizes must match max_batch_size; last "
                         f"entry was {sizes[-1]}; expected {self.max_batch_size}")


def read_batching_parameters(path):
  """The BatchingParameters of TF Serving's --batching_parameters_file `path` (text format):

      max_batch_size { value: 32 }
      batch_timeout_micros { value: 2000 }
      num_batch_threads { value: 2 }
      allowed_batch_sizes: 8
      allowed_batch_sizes: 32

  A field this server does not implement (large batch splitting) is refused rather than
  ignored, so a file never means something here that it does not do; so is a value TF Serving
  would refuse. Each error is a ValueError naming the file and the field."""
  from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format  # pylint: disable=g-import-not-at-top
  from google.protobuf import wrappers_pb2  # pylint: disable=g-import-not-at-top
  pool = descriptor_pool.DescriptorPool()
  wrappers = descriptor_pb2.FileDescriptorProto()
  wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
  pool.Add(wrappers)
  pool.Add(text_format.Parse(_BATCHING_PROTO, descriptor_pb2.FileDescriptorProto()))
  message = message_factory.GetMessageClass(
      pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))()
  try:
    with files.open_file(path, "r") as f:
      text_format.Parse(f.read(), message)
  except text_format.ParseError as e:
    raise ValueError(f"{path}: {e} (TF Serving's BatchingParameters in text format: "
                     "max_batch_size { value: 32 } ...)") from None
  if message.HasField("enable_large_batch_splitting") and (
      message.enable_large_batch_splitting.value):
    raise ValueError(f"{path}: enable_large_batch_splitting is not implemented by this server "
                     "(a request larger than max_batch_size is refused, not split)")
  if message.HasField("max_execution_batch_size"):
    raise ValueError(f"{path}: max_execution_batch_size is not implemented by this server (it "
                     "only matters with enable_large_batch_splitting; use max_batch_size)")
  given = {name: getattr(message, name).value
           for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                        "num_batch_threads", "thread_pool_name") if message.HasField(name)}
  try:
    return BatchingParameters(allowed_batch_sizes=tuple(message.allowed_batch_sizes),
                              pad_variable_length_inputs=message.pad_variable_length_inputs,
                              **given)
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None


class _Task:
  """One request: its inputs, its rows, and where its answer is left for the waiting thread."""

  def __init__(self, arrays, rows, length=None):
    self.arrays = arrays
    self.rows = rows
    self.length = length  # its longest row by grouping.text_lengths; None: no text input
    self.done = threading.Event()
    self.outputs = None
    self.error = None

  def finish(self, outputs=None, error=None):
    self.outputs, self.error = outputs, error
    self.done.set()


class _Batch:
  """Requests of one shape key waiting together. `solo`: a request that is never merged (its
  inputs disagree on rows, or have none), run as it came."""

  def __init__(self, key, solo=False):
    self.key = key
    self.solo = solo
    self.tasks = []
    self.rows = 0
    self.opened = time.monotonic()
    self.closed = solo

  def add(self, task):
    self.tasks.append(task)
    self.rows += task.rows


class Batcher:
  """Runs `run` (one signature: `{input: array}` -> `{output: array}`, the batch on axis 0 of
  every input and output) on batches of the requests `submit` receives from many threads.

  `request_errors`: the exceptions of `run` that may belong to one request of a merged batch
  rather than to the batch; such a batch is run again request by request. `costs`: what a call
  of `run` costs (`grouping.CallCosts`, fed with the time of every merged call of text), which
  decides how a batch of text is grouped by length."""

  def __init__(self, params, run, name="", request_errors=(rest_json.RequestError,),
               costs=None):
    self.params = params
    self.name = name
    self._run_fn = run
    self._request_errors = tuple(request_errors)
    self.costs = grouping.CallCosts() if costs is None else costs
    self._cv = threading.Condition()
    self._batches = []  # waiting batches, oldest first; the open one of each key included
    self._open = {}  # key -> the batch of that key still taking requests
    self._closed = False
    if params.pad_variable_length_inputs:
      logger.info("%s: pad_variable_length_inputs is accepted but lengths are never padded "
                  "(TF Serving pads with each tensor's first element, which would change "
                  "answers); requests of different shapes go into different batches", name)
    self._threads = [threading.Thread(target=self._work, daemon=True,
                                      name=f"{params.thread_pool_name}_{name}_{i}")
                     for i in range(params.num_batch_threads)]
    for thread in self._threads:
      thread.start()

  def submit(self, arrays):
    """The outputs `{name: array}` of `run` for this request's rows alone, once its batch has
    run. Raises `Unavailable` when the queue is full or the batcher closed, a
    `rest_json.RequestError` for a request larger than max_batch_size, and whatever `run`
    raised for this request's batch."""
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    key, rows = _shape_key(arrays)
    size = rows if key is not None else max((a.shape[0] for a in arrays.values() if a.ndim),
                                            default=0)
    limit = self.params.max_batch_size
    if size > limit:
      raise rest_json.RequestError(
          f"Task size {size} is larger than maximum input batch size {limit} (this server's "
          f"max_batch_size; send at most {limit} rows per request)")
    length = None
    if key is not None and self.params.group_by_length:
      lengths = grouping.text_lengths(arrays)
      length = None if lengths is None else int(lengths.max())
    task = _Task(arrays, rows if key is not None else 0, length)
    with self._cv:
      if self._closed:
        raise Unavailable(f"{self.name or 'this signature'} is closing: its batch queue takes "
                          "no more requests")
      batch = self._open.get(key) if key is not None else None
      if batch is None or batch.rows + task.rows > limit:
        if len(self._batches) >= self.params.max_enqueued_batches:
          raise Unavailable(QUEUE_FULL)
        if batch is not None:
          self._close(batch)
        batch = _Batch(key, solo=key is None)
        self._batches.append(batch)
        if key is not None:
          self._open[key] = batch
      batch.add(task)
      if batch.rows == limit:
        self._close(batch)
      self._cv.notify_all()
    task.done.wait()
    if task.error is not None:
      raise task.error
    return task.outputs

  def num_enqueued_tasks(self):
    """Requests waiting for a batch thread (TF Serving's NumEnqueuedTasks): a batch being run
    no longer counts."""
    with self._cv:
      return sum(len(batch.tasks) for batch in self._batches)

  def close(self, timeout=None):
    """Runs what is queued (without waiting out timeouts), then stops the threads; a later
    `submit` raises Unavailable. For a graceful shutdown or unloading a version."""
    with self._cv:
      self._closed = True
      self._cv.notify_all()
    deadline = None if timeout is None else time.monotonic() + timeout
    for thread in self._threads:
      thread.join(None if deadline is None else max(0, deadline - time.monotonic()))

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def _close(self, batch):
    batch.closed = True
    if self._open.get(batch.key) is batch:
      del self._open[batch.key]

  def _work(self):
    while True:
      with self._cv:
        while True:
          batch, wait = self._next_batch()
          if batch is not None:
            break
          if self._closed and not self._batches:
            return
          self._cv.wait(wait)
      self._process(batch)

  def _next_batch(self):
    """(the oldest batch ready to run, taken off the queue, None) or (None, seconds until one
    may become ready, None when only a submit can make one)."""
    now = time.monotonic()
    timeout = self.params.batch_timeout_micros / 1e6
    wait = None
    for batch in self._batches:
      if batch.closed or self._closed or now - batch.opened >= timeout:
        self._batches.remove(batch)
        self._close(batch)
        return batch, None
      left = batch.opened + timeout - now
      wait = left if wait is None else min(wait, left)
    return None, wait

  def _process(self, batch):
    """Runs `batch`, as one call or as calls grouped by length, and hands each request its
    answer or error; never raises an Exception, so no waiting request is left without one."""
    tasks = batch.tasks
    groups = [tasks]
    if not batch.solo and len(tasks) > 1 and tasks[0].length is not None:
      groups = [[tasks[i] for i in group] for group in grouping.plan(
          [task.length for task in tasks], [task.rows for task in tasks],
          self.costs.coefficients(), self.params.allowed_batch_sizes)]
    for i, group in enumerate(groups):
      try:
        self._process_call(group, batch.solo)
      except BaseException as e:  # KeyboardInterrupt, SystemExit: the later calls get it too
        for task in (task for later in groups[i + 1:] for task in later):
          task.finish(error=e)
        raise

  def _process_call(self, tasks, solo):
    """Runs `tasks` as one call and hands each its answer or error; raises only what is not an
    Exception, after answering."""
    try:
      answers = self._run(tasks, solo)
    except self._request_errors as e:
      if len(tasks) == 1:
        tasks[0].finish(error=e)
        return
      logger.info("%s: a batch of %d requests failed (%s); running them one by one", self.name,
                  len(tasks), e)
      for task in tasks:
        try:
          task.finish(self._run([task], False)[0])
        except Exception as error:  # pylint: disable=broad-except
          task.finish(error=error)
      return
    except BaseException as e:  # pylint: disable=broad-except
      for task in tasks:
        task.finish(error=e)
      if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit: after answering
        raise
      return
    for task, outputs in zip(tasks, answers):
      task.finish(outputs)

  def _run(self, tasks, solo):
    """Each task's outputs from one `run` of their inputs concatenated (padded up to an
    allowed batch size with copies of the last task's first row, as TF Serving pads)."""
    if solo:
      return [self._run_fn(tasks[0].arrays)]
    rows = sum(task.rows for task in tasks)
    size = next((s for s in self.params.allowed_batch_sizes if s >= rows), rows)
    merged = {}
    for name in tasks[0].arrays:
      parts = [task.arrays[name] for task in tasks]
      if size > rows:
        parts.append(np.repeat(parts[-1][:1], size - rows, axis=0))
      merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    began = time.perf_counter()
    outputs = {name: np.asarray(value) for name, value in self._run_fn(merged).items()}
    if tasks[0].length is not None:
      self.costs.record(size, max(task.length for task in tasks), time.perf_counter() - began)
    for name, value in outputs.items():
      if value.ndim == 0 or value.shape[0] != size:
        raise RuntimeError(
            f"{self.name}: output {name!r} has shape {list(value.shape)} for a batch of {size} "
            "rows; a batched signature must keep the batch on axis 0 of every output")
    answers, start = [], 0
    for task in tasks:
      answers.append({name: value[start:start + task.rows] for name, value in outputs.items()})
      start += task.rows
    return answers


def _shape_key(arrays):
  """(key, rows): requests merge only when their keys are equal (the same inputs, dtypes and
  non-batch shapes, so no length is ever padded); key None for a request never merged (an
  input without a batch axis, inputs that disagree on rows, or no rows: the signature's own
  rules answer it)."""
  rows = {a.shape[0] if a.ndim else None for a in arrays.values()}
  if len(rows) != 1 or None in rows or 0 in rows:
    return None, None
  # Strings of any length concatenate (numpy widens 'S5' + 'S7'); other dtypes must be equal.
  key = tuple(sorted((name, a.dtype.kind if a.dtype.kind in "OSU" else a.dtype.str, a.shape[1:])
                     for name, a in arrays.items()))
  return key, rows.pop()


def batchable(function):
  """(True, why) when merging requests to the loaded signature `function`
  (`tf.saved_model.load(path).signatures[name]`) cannot change an answer, else (False, why).

  Merging is exact when every output's non-batch dimensions are static (an answer's shape
  cannot depend on its batch), or when every input is numeric (requests merge only with
  requests of the same shapes, so the batch holds no longer input than the request). A
  signature on raw text whose output has a length dimension computes that length per batch
  from its longest text: merged, a short text's answer would be padded to a neighbour's length."""
  inputs = rest_json.input_specs(function)
  outputs = function.structured_outputs
  if not isinstance(outputs, dict):
    return False, "its outputs are not a dict of named tensors"
  for name, spec in sorted(inputs.items()):
    if spec.shape.rank is None or spec.shape.rank == 0 or spec.shape[0] is not None:
      return False, f"input {name!r} has shape {spec.shape}: no variable batch dimension"
  for name, spec in sorted(outputs.items()):
    if spec.shape.rank is None or spec.shape.rank == 0:
      return False, f"output {name!r} has shape {spec.shape}: no batch dimension to split"
  dynamic = sorted(name for name, spec in outputs.items()
                   if any(d is None for d in spec.shape[1:]))
  if not dynamic:
    return True, "every output's non-batch dimensions are static"
  text = sorted(name for name, spec in inputs.items() if not (spec.dtype.is_integer or
                                                               spec.dtype.is_floating or
                                                               spec.dtype.is_bool))
  if not text:
    return True, ("every input is numeric: requests merge only with requests of the same "
                  "shapes, so outputs keep their unbatched shapes")
  return False, (f"output {dynamic[0]!r} has shape {outputs[dynamic[0]].shape} and input "
                 f"{text[0]!r} is {inputs[text[0]].dtype.name}: the length is computed per batch, "
                 "so a merged batch would pad a request's answer differently than alone")
