"""serve.py over a socket: one server process (127.0.0.1, reserved free ports) serving every task's tiny
export from a TF Serving model config file, its answers compared with `tf.saved_model.load`'s
in this process; bad requests; 8 concurrent clients; SIGTERM with requests in flight (last: it
stops the module's server). Every wait is bounded and the server is stopped at the end."""

import base64
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import ROOT, float32_atol, reserved_ports

# Collected by test_serving_requests.py (see there why): what it imports.
__all__ = [
    "server",
    "test_every_task_answers_over_http_as_saved_model_load_does",
    "test_status_metadata_versions_and_labels_are_tf_servings",
    "test_a_bad_request_is_a_4xx_naming_the_fault_and_the_next_request_is_served",
    "test_a_route_no_api_has_is_named_as_tf_serving_names_it",
    "test_b64_strings_are_read_as_bytes",
    "test_grpc_clients_get_the_answers_rest_clients_get_concurrently",
    "test_concurrent_clients_each_get_their_own_answers",
    "test_a_version_copied_in_while_serving_is_served_and_the_old_one_unloaded",
    "test_a_version_that_fails_to_load_is_shown_and_the_served_one_keeps_serving",
    "test_the_v2_routes_answer_404_naming_the_v1_route",
    "test_sigterm_finishes_requests_in_flight_and_exits_0",
]

# Model name -> (its conftest fixture, the signature asked, a two-row request by columns).
IDS = {"input_word_ids": [[2, 9, 31, 3], [2, 7, 3, 0]], "input_mask": [[1, 1, 1, 1], [1, 1, 1, 0]],
       "input_type_ids": [[0, 0, 1, 1], [0, 0, 0, 0]]}

TASKS = {
    "classifier": ("classifier_export", "text_pair",
                   {"text_a": ["a gripping film", "dull"], "text_b": ["it was", ""]}),
    "squad": ("squad_export", "serving_default",
              {"question": ["Who wrote it?", "When?"],
               "context": ["Tom wrote it in 1990.", "It rained on Sunday, then stopped."]}),
    "race": ("race_export", "serving_default",
             {"article": ["Tom went to the park.", "The shop was shut."],
              "question": ["Where did Tom go?", "What was shut?"],
              "options": [["park", "zoo", "school", "shop"], ["a", "b", "the shop", "c"]]}),
    "ner": ("ner_export", "serving_default",
            {"text": ["EU rejects German call to boycott British lamb .", "Peter Blackburn"]}),
    "fill_mask": ("fill_mask_export", "serving_default",
                  {"text": ["the [MASK] sat on the mat", "a [MASK] day [MASK]"]}),
    "encoder": ("encoder_export", "serving_default", IDS),
}
TERMS = 64  # tiny.json's intermediate_size: the longest sum behind an output


def call(port, path, body=None, method=None, timeout=60, connection=None):
  """(status, JSON answer) of one request; `body` a dict (sent as JSON) or bytes."""
  if isinstance(body, dict):
    body = json.dumps(body).encode()
  conn = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
  conn.request(method or ("GET" if body is None else "POST"), path, body=body)
  response = conn.getresponse()
  data = response.read()
  if connection is None:
    conn.close()
  return response.status, json.loads(data)


class Server:
  def __init__(self, port, grpc_port, process, loaded, log, base):
    self.port, self.grpc_port, self.process, self.loaded = port, grpc_port, process, loaded
    self.log, self.base = log, base

  def predict(self, model, request, path=""):
    return call(self.port, f"/v1/models/{model}{path}:predict", request)


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
  base = tmp_path_factory.mktemp("models")
  loaded, config = {}, []
  for name, (fixture, _, _) in TASKS.items():
    _, export_dir, loaded[name] = request.getfixturevalue(fixture)
    os.makedirs(base / name)
    os.symlink(export_dir, base / name / "1")  # TF Serving's layout: <base>/<version>/
    policy = ""
    if name == "classifier":  # two versions, both served, one labelled
      os.symlink(export_dir, base / name / "2")
      policy = 'model_version_policy { all {} } version_labels { key: "stable" value: 1 }'
    config.append(f'config {{ name: "{name}" base_path: "{base / name}" '
                  f'model_platform: "tensorflow" {policy} }}')
  # A model whose versions the tests roll out while it is served (latest 1, TF Serving's default).
  os.makedirs(base / "live")
  os.symlink(request.getfixturevalue("classifier_export")[1], base / "live" / "1")
  config.append(f'config {{ name: "live" base_path: "{base / "live"}" }}')
  (base / "models.config").write_text("model_config_list {\n  %s\n}\n" % "\n  ".join(config))
  # Server-side batching on, so every answer below also shows batching changes none: concurrent
  # requests of one signature (and shape) are merged within 5 ms.
  (base / "batching.config").write_text(
      "max_batch_size { value: 128 }\nbatch_timeout_micros { value: 5000 }\n"
      "num_batch_threads { value: 2 }\nmax_enqueued_batches { value: 100 }\n")
  log = base / "server.log"
  with reserved_ports(2) as (port, grpc_port), open(log, "w") as out:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "serve.py"), f"--model_config_file={base / 'models.config'}",
         f"--rest_api_port={port}", f"--port={grpc_port}", "--max_request_bytes=65536",
         "--shutdown_grace_seconds=30", "--file_system_poll_wait_seconds=1",
         "--enable_batching", f"--batching_parameters_file={base / 'batching.config'}"],
        stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
      deadline = time.time() + 180
      while True:
        assert process.poll() is None, log.read_text()
        assert time.time() < deadline, log.read_text()
        try:
          if call(port, "/v1/models/encoder", timeout=5)[0] == 200:
            break
        except OSError:
          time.sleep(0.5)
      yield Server(port, grpc_port, process, loaded, log, base)
    finally:
      if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
          process.wait(60)
        except subprocess.TimeoutExpired:
          process.kill()
          process.wait()


def _in_process(loaded, signature, columns):
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  return {k: v.numpy() for k, v in function(
      **{k: tf.constant(v, specs[k].dtype) for k, v in columns.items()}).items()}


def _assert_same(answer, expected, what):
  """`answer` (JSON values by output name) equals `expected` (numpy, in-process): strings and
  integers exactly, floats to float32 rounding (the server's process may sum in other orders)."""
  assert set(answer) == set(expected), what
  for name, value in expected.items():
    got = np.asarray(answer[name])
    if value.dtype == object:
      text = np.vectorize(bytes.decode, otypes=[object])(value) if value.size else value
      assert got.tolist() == text.tolist(), (what, name)
    elif value.dtype.kind == "f":
      np.testing.assert_allclose(got, value, rtol=0, atol=float32_atol(value, TERMS),
                                 err_msg=f"{what}: {name}")
    else:
      np.testing.assert_array_equal(got, value, err_msg=f"{what}: {name}")


@pytest.mark.parametrize("name", list(TASKS))
def test_every_task_answers_over_http_as_saved_model_load_does(server, name):
  """Rows (`instances` -> `predictions`) and columns (`inputs` -> `outputs`), with the
  signature named, give the in-process signature's outputs."""
  _, signature, columns = TASKS[name]
  expected = _in_process(server.loaded[name], signature, columns)
  rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
  status, answer = server.predict(name, {"signature_name": signature, "instances": rows})
  assert status == 200, answer
  predictions = answer["predictions"]
  assert len(predictions) == len(rows)
  by_column = ({k: [p[k] for p in predictions] for k in expected} if len(expected) > 1
               else {next(iter(expected)): predictions})
  _assert_same(by_column, expected, f"{name} rows")
  status, answer = server.predict(name, {"signature_name": signature, "inputs": columns})
  assert status == 200, answer
  outputs = answer["outputs"]
  _assert_same(outputs if len(expected) > 1 else {next(iter(expected)): outputs}, expected,
               f"{name} columns")


def test_status_metadata_versions_and_labels_are_tf_servings(server):
  status, answer = call(server.port, "/v1/models/classifier")
  assert status == 200 and [v["version"] for v in answer["model_version_status"]] == ["2", "1"]
  assert all(v["state"] == "AVAILABLE" and v["status"]["error_code"] == "OK"
             for v in answer["model_version_status"])
  status, answer = call(server.port, "/v1/models/squad/metadata")
  assert status == 200 and answer["model_spec"] == {"name": "squad", "signature_name": "",
                                                    "version": "1"}
  inputs = answer["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
  assert {k: v["dtype"] for k, v in inputs.items()} == {"question": "DT_STRING",
                                                        "context": "DT_STRING"}
  text = {"instances": ["a gripping film"]}
  default = server.predict("classifier", text)
  assert default[0] == 200
  for path in ("/versions/1", "/versions/2", "/labels/stable"):
    assert server.predict("classifier", text, path) == default, path
  status, answer = call(server.port, "/v1/models/classifier/labels/stable")
  assert status == 200 and [v["version"] for v in answer["model_version_status"]] == ["1"]
  status, answer = call(server.port, "/v1/models/classifier/labels/stable/metadata")
  assert status == 200 and answer["model_spec"]["version"] == "1"
  status, answer = call(server.port, "/v1/models/classifier/labels/canary/metadata")
  assert status == 404 and "no version label 'canary'" in answer["error"], answer
  for path, message in (("/versions/3", "model 'classifier' has no version 3 served"),
                        ("/labels/canary", "model 'classifier' has no version label 'canary'")):
    status, answer = server.predict("classifier", text, path)
    assert status == 404 and answer["error"].startswith(message), answer


GOOD = ("classifier", {"instances": ["a gripping film"]})
BIG = {"instances": ["x " * 40000]}
# (model, raw body, HTTP status, the start of the error's message)
BAD = [
    ("classifier", b'{"instances": ["a gripping', 400, "the request body is not JSON"),
    ("classifier", b'["a gripping film"]', 400, "the request body must be a JSON object"),
    ("classifier", b'{"instances": ["a"], "inputs": ["b"]}', 400,
     'a request needs exactly one of "instances"'),
    ("classifier", {"signature_name": "text_pair", "instances": [{"text_a": "a"}]}, 400,
     "instances[0] lacks the input 'text_b'"),
    ("classifier", {"signature_name": "text_pair", "inputs": {"text_a": ["a", "b"],
                                                              "text_b": ["c"]}}, 400,
     "text_b has 1 rows but text_a has 2"),
    ("classifier", {"instances": [7]}, 400, "text_a[0] is the number 7; this input takes "
                                            "strings"),
    ("encoder", {"instances": [dict(input_word_ids=[2, 3], input_mask=[1, 1],
                                    input_type_ids=[0, "a"])]}, 400,
     "input_type_ids[0][1] is the string \"a\"; this input takes int32 numbers"),
    ("encoder", {"inputs": dict(IDS, input_word_ids=[[2, 9, 31, 3], [2, 7, 3]])}, 400,
     "input_word_ids is not a rectangular array"),
    ("encoder", {"inputs": dict(IDS, input_word_ids=[[2, 9, 31, 3], [2, 7, 30000, 3]])}, 400,
     "input_word_ids holds 30000 at [1 2]; word ids must be in [0, 30000)"),
    ("classifier", {"instances": []}, 400, '"instances" is empty'),
    ("classifier", {"inputs": {"text_a": []}}, 400, "text_a has no rows"),
    ("classifier", b'{"instances": ["\xff\xfe a film"]}', 400,
     "the request body is not UTF-8 (byte 16 is 0xff)"),
    ("classifier", b'{"instances": ["\\ud800 a film"]}', 400, "text_a[0] is not valid Unicode"),
    ("classifier", {"instances": [{"b64": "not base64!"}]}, 400, "text_a[0]: b64 is not base64"),
    ("classifier", {"instances": [""]}, 400, "text_a row 0 has no tokens"),
    ("classifier", BIG, 413, f"the request body has {len(json.dumps(BIG))} bytes; this server "
                             "takes at most 65536 (--max_request_bytes)"),
    ("classifier", {"signature_name": "serve_text", "instances": ["a"]}, 404,
     "model 'classifier' version 2 has no signature 'serve_text'"),
    ("bert", {"instances": ["a"]}, 404, "no model 'bert' is served"),
    ("classifier", b'{"instances": ' + b"[" * 20000 + b"]" * 20000 + b"}", 400,
     "the request body nests JSON arrays or objects too deeply"),
    ("classifier", {"instances": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["a"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
     400, "text_a nests lists more than 32 deep"),
]


@pytest.mark.parametrize("model, body, status, message", BAD,
                         ids=[f"{i}-{m}" for i, (m, _, _, _) in enumerate(BAD)])
def test_a_bad_request_is_a_4xx_naming_the_fault_and_the_next_request_is_served(
    server, model, body, status, message):
  got, answer = server.predict(model, body)
  assert (got, answer["error"][:len(message)]) == (status, message), answer
  assert server.predict(*GOOD)[0] == 200


@pytest.mark.parametrize("method, path, status, message", [
    ("GET", "/v1/models/classifier:predict", 405,
     "GET /v1/models/classifier:predict: predict takes POST"),
    ("GET", "/v1/models/classifier/versions/1:predict", 405, "GET /v1/models/classifier/"
                                                              "versions/1:predict: predict takes"),
    ("GET", "/v1/nothing/here", 404, "Malformed request: GET /v1/nothing/here (TF Serving's API"),
    ("DELETE", "/v1/models/classifier", 405, "Malformed request: DELETE /v1/models/classifier"),
], ids=["get-predict", "get-version-predict", "unknown-path", "wrong-method"])
def test_a_route_no_api_has_is_named_as_tf_serving_names_it(server, method, path, status, message):
  got, answer = call(server.port, path, method=method)
  assert (got, answer.get("error", "")[:len(message)]) == (status, message), answer


def test_b64_strings_are_read_as_bytes(server):
  text = "a gripping film"
  plain = server.predict("classifier", {"instances": [text]})
  encoded = server.predict("classifier", {"instances": [
      {"b64": base64.b64encode(text.encode()).decode()}]})
  assert plain[0] == 200 and encoded == plain


def _grpc_predict(stub, model, signature, columns):
  request = predict_pb2.PredictRequest()
  request.model_spec.name, request.model_spec.signature_name = model, signature
  for name, value in columns.items():
    request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
  response = stub.Predict(request, timeout=60)
  return {name: tf.make_ndarray(t) for name, t in response.outputs.items()}


def test_grpc_clients_get_the_answers_rest_clients_get_concurrently(server):
  """TF Serving's own gRPC client (tensorflow-serving-api's stub) on --port gets, for every task,
  what a REST client gets from the same process; 4 gRPC and 4 REST clients at once, 10 requests
  each, every answer its own request's."""
  channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
  stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
  try:
    for name, (_, signature, columns) in TASKS.items():
      expected = _in_process(server.loaded[name], signature, columns)
      got = _grpc_predict(stub, name, signature, columns)
      status, answer = server.predict(name, {"signature_name": signature, "inputs": columns})
      assert status == 200, answer
      rest = answer["outputs"] if len(expected) > 1 else {next(iter(expected)): answer["outputs"]}
      _assert_same(rest, expected, f"{name} REST")
      _assert_same({k: v.tolist() if v.dtype != object else
                    np.vectorize(bytes.decode, otypes=[object])(v).tolist() if v.size else []
                    for k, v in got.items()}, expected, f"{name} gRPC")
    expected = [_in_process(server.loaded["encoder"], "lean",
                            {k: [v] for k, v in _client_ids(c).items()}) for c in range(8)]
    errors = []

    def client(c):
      try:
        columns = {k: [v] for k, v in _client_ids(c).items()}
        for _ in range(10):
          if c % 2:
            got = _grpc_predict(stub, "encoder", "lean", columns)
            got = {k: v.tolist() for k, v in got.items()}
          else:
            status, answer = server.predict("encoder", {"signature_name": "lean",
                                                        "inputs": columns})
            assert status == 200, answer
            got = answer["outputs"]
          _assert_same(got, expected[c], f"client {c}")
      except Exception as e:  # pylint: disable=broad-except
        errors.append(f"client {c}: {e!r}")

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
      t.start()
    for t in threads:
      t.join(240)
    assert not errors and not any(t.is_alive() for t in threads), errors
  finally:
    channel.close()


TEXTS = [f"client {c} says the film was {'good' if c % 2 else 'dull'} {'!' * c}"
         for c in range(8)]


def _client_ids(c):
  """Client c's own encoder request: ids no other client sends."""
  return {"input_word_ids": [2, 10 + c, 100 + 7 * c, 3], "input_mask": [1, 1, 1, 1],
          "input_type_ids": [0, 0, 1, 1]}


def test_concurrent_clients_each_get_their_own_answers(server):
  """8 clients x 50 requests on their own keep-alive connections, each with its own ids: every
  answer is the in-process one of that client's request; none lost, none crossed (each
  client's sequence output is far from every other's)."""
  expected = [_in_process(server.loaded["encoder"], "lean",
                          {k: [v] for k, v in _client_ids(c).items()}) for c in range(8)]
  gaps = [np.abs(expected[a]["sequence_output"] - expected[b]["sequence_output"]).max()
          for a in range(8) for b in range(a)]
  assert min(gaps) > 100 * float32_atol(expected[0]["sequence_output"], TERMS)
  answers, errors = {c: [] for c in range(8)}, []

  def client(c):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
      for _ in range(50):
        answers[c].append(call(server.port, "/v1/models/encoder:predict",
                               {"signature_name": "lean", "instances": [_client_ids(c)]},
                               connection=connection))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(repr(e))
    finally:
      connection.close()

  threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(240)
  assert not errors and not any(t.is_alive() for t in threads), errors
  for c in range(8):
    assert len(answers[c]) == 50
    for status, answer in answers[c]:
      assert status == 200, answer
      _assert_same({k: [v] for k, v in answer["predictions"][0].items()},
                   expected[c], f"client {c}")


def _states(server, model):
  status, answer = call(server.port, f"/v1/models/{model}")
  assert status == 200, answer
  return {int(v["version"]): (v["state"], v["status"]["error_message"])
          for v in answer["model_version_status"]}


def _wait_for(server, model, done, seconds=120):
  deadline = time.time() + seconds
  while time.time() < deadline:
    states = _states(server, model)
    if done(states):
      return states
    time.sleep(0.2)
  raise AssertionError(f"{model}: {_states(server, model)}\n{server.log.read_text()[-3000:]}")


def test_a_version_copied_in_while_serving_is_served_and_the_old_one_unloaded(server):
  """A client keeps asking while version 2 is copied file by file into the base path (as `cp -r`
  would: saved_model.pb may land before the variables): version 2 becomes AVAILABLE within
  seconds of the copy, version 1 is unloaded after it, and every request is answered."""
  text = {"instances": ["a gripping film"]}
  expected = server.predict("live", text)
  assert expected[0] == 200
  results, stop = [], threading.Event()

  def client():
    while not stop.is_set():
      results.append(server.predict("live", text))

  thread = threading.Thread(target=client)
  thread.start()
  try:
    source = os.path.realpath(server.base / "live" / "1")
    copied = time.time()
    shutil.copytree(source, server.base / "live" / "2")
    states = _wait_for(server, "live", lambda s: s.get(1, ("",))[0] == "END" and
                       s.get(2, ("",))[0] == "AVAILABLE")
    rolled_out = time.time() - copied
  finally:
    stop.set()
    thread.join(60)
  assert states == {2: ("AVAILABLE", ""), 1: ("END", "")}
  assert rolled_out < 60, rolled_out
  assert results and all(r == expected for r in results), [r for r in results if r != expected][:3]
  status, answer = call(server.port, "/v1/models/live/metadata")
  assert answer["model_spec"]["version"] == "2"
  log = server.log.read_text()
  assert re.search(r"model 'live' version 2 AVAILABLE in [\d.]+ s \((\d+) warm-up requests",
                   log), log[-3000:]
  warmed = int(re.search(r"model 'live' version 2 AVAILABLE .*?\((\d+) warm-up", log).group(1))
  assert warmed == 3 * len(server.loaded["classifier"].signatures)  # three per signature


def test_a_version_that_fails_to_load_is_shown_and_the_served_one_keeps_serving(server):
  """Version 3 is a SavedModel that cannot load: its state is END with the loader's error,
  version 2 keeps answering, and status names both."""
  broken = server.base / "live" / "3"
  os.makedirs(broken / "variables")
  (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
  states = _wait_for(server, "live", lambda s: s.get(3, ("",))[0] == "END")
  assert states[2] == ("AVAILABLE", "") and states[3][1], states
  assert server.predict("live", {"instances": ["a gripping film"]})[0] == 200
  status, answer = call(server.port, "/v1/models/live/metadata")
  assert answer["model_spec"]["version"] == "2"
  assert "model 'live' version 3 failed to load" in server.log.read_text()
  # A folder with saved_model.pb and no variables/ (a copy under way): named, not served.
  os.makedirs(server.base / "live" / "4")
  shutil.copy(server.base / "live" / "2" / "saved_model.pb", server.base / "live" / "4")
  states = _wait_for(server, "live", lambda s: s.get(4, ("",))[0] == "END")
  assert "has saved_model.pb but no variables/ folder" in states[4][1], states
  assert states[2] == ("AVAILABLE", "")
  assert server.predict("live", {"instances": ["a gripping film"]})[0] == 200


def test_the_v2_routes_answer_404_naming_the_v1_route(server):
  status, answer = call(server.port, "/v2/models/classifier/infer",
                        {"inputs": [{"name": "text_a", "shape": [1], "datatype": "BYTES",
                                     "data": ["a gripping film"]}]})
  assert status == 404 and "POST /v1/models/NAME:predict" in answer["error"], answer


def test_sigterm_finishes_requests_in_flight_and_exits_0(server):
  """Last (it stops the module's server): REST and gRPC clients keep sending 64-row requests;
  SIGTERM comes while some are in flight. Each request is answered correctly or refused cleanly
  (REST: no connection, or closed before an answer; gRPC: UNAVAILABLE), at least one request of
  each API that was in flight at the signal is answered, and the server exits 0."""
  rows = [TEXTS[i % 8] for i in range(64)]
  expected = _in_process(server.loaded["classifier"], "serving_default", {"text_a": rows})
  results, stop = [], threading.Event()
  channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
  stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

  def client():
    while not stop.is_set():
      start = time.time()
      try:
        status, answer = server.predict("classifier", {"instances": rows})
        results.append(("rest", start, time.time(), status, answer))
      except (ConnectionError, http.client.RemoteDisconnected):
        results.append(("rest", start, time.time(), "refused", None))
        time.sleep(0.05)

  def grpc_client():
    while not stop.is_set():
      start = time.time()
      try:
        got = _grpc_predict(stub, "classifier", "serving_default", {"text_a": rows})
        answer = {"predictions": [{k: v[i].decode() if v.dtype == object else v[i].tolist()
                                   for k, v in got.items()} for i in range(len(rows))]}
        results.append(("grpc", start, time.time(), 200, answer))
      except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        results.append(("grpc", start, time.time(), "refused", None))
        time.sleep(0.05)

  threads = [threading.Thread(target=client) for _ in range(3)]
  threads += [threading.Thread(target=grpc_client) for _ in range(2)]
  for t in threads:
    t.start()
  deadline = time.time() + 60
  while len(results) < 8 and time.time() < deadline:
    time.sleep(0.05)
  signalled = time.time()
  server.process.send_signal(signal.SIGTERM)
  try:
    assert server.process.wait(60) == 0, server.log.read_text()
  finally:
    stop.set()
    for t in threads:
      t.join(60)
    channel.close()
  answered = [r for r in results if r[3] != "refused"]
  for _, _, _, status, answer in answered:
    assert status == 200, answer
    _assert_same({k: [p[k] for p in answer["predictions"]] for k in expected}, expected,
                 "under SIGTERM")
  for api in ("rest", "grpc"):
    assert any(start < signalled < end for kind, start, end, _, _ in answered if kind == api), (
        api, results)
  assert "stopped" in server.log.read_text()
