"""TF Serving's gRPC API (serving/grpc_api.py) as a client of TF Serving sees it: its own stubs
over a channel to an in-process server. Predict answers what `tf.saved_model.load`'s signature
and the REST path answer, for any signature, version or label; every refusal carries TF
Serving's status code and the REST API's words; metadata, status and config reload are TF
Serving's messages; concurrent clients each get their own answer.

One tiny classifier export (conftest.py's), served as versions 1 and 2 of model "cls" with the
labels stable -> 1 and canary -> 2.
"""

import collections
import concurrent.futures
import contextlib
import os
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import inference_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import regression_pb2
from tensorflow_serving.config import model_server_config_pb2

from albert_tf.export import layout, rest_json
from albert_tf.serving import core as core_lib
from albert_tf.serving import grpc_api
from conftest import float32_atol

TIMEOUT = 30  # seconds: every RPC's deadline, so a hung server fails a test instead of the run
TEXTS = ["a gripping film", "dull and far too long"]
Served = collections.namedtuple("Served", "core server channel predict models base export loaded")


@pytest.fixture(scope="module")
def served(classifier_export, tmp_path_factory):
  _, export_dir, loaded = classifier_export
  base = tmp_path_factory.mktemp("grpc")
  (base / "cls").mkdir()
  for version in (1, 2):
    os.symlink(export_dir, base / "cls" / str(version))
  core = core_lib.ServerCore(
      [layout.ModelSpec("cls", str(base / "cls"), ("all",), {"stable": 1, "canary": 2})],
      poll_wait_seconds=0)
  core.start()
  server = grpc_api.start_grpc_server(core, 0, host="127.0.0.1")
  channel = grpc.insecure_channel(f"127.0.0.1:{server.bound_port}")
  yield Served(core, server, channel,
               prediction_service_pb2_grpc.PredictionServiceStub(channel),
               model_service_pb2_grpc.ModelServiceStub(channel), base, export_dir, loaded)
  channel.close()
  server.stop(None).wait(TIMEOUT)
  core.stop()


def predict_request(inputs, name="cls", signature="", version=None, label=None):
  request = predict_pb2.PredictRequest()
  request.model_spec.name = name
  request.model_spec.signature_name = signature
  if version is not None:
    request.model_spec.version.value = version
  if label is not None:
    request.model_spec.version_label = label
  for key, value in inputs.items():
    request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
  return request


def arrays(response):
  return {key: tf.make_ndarray(proto) for key, proto in response.outputs.items()}


def assert_same_outputs(got, expected):
  assert sorted(got) == sorted(expected)
  for key, want in expected.items():
    want = np.asarray(want)
    if want.dtype.kind == "f":
      np.testing.assert_allclose(got[key], want, rtol=0, atol=float32_atol(want, 64))
    else:
      np.testing.assert_array_equal(got[key], want)


def refusal(call, request):
  """(code, message) of an RPC that must fail."""
  with pytest.raises(grpc.RpcError) as caught:
    call(request, timeout=TIMEOUT)
  return caught.value.code(), caught.value.details()


def test_predict_answers_what_the_loaded_signature_answers(served):
  response = served.predict.Predict(predict_request({"text_a": TEXTS}), timeout=TIMEOUT)
  expected = served.loaded.signatures["serving_default"](text_a=tf.constant(TEXTS))
  assert_same_outputs(arrays(response), {k: v.numpy() for k, v in expected.items()})
  assert response.model_spec.name == "cls"
  assert response.model_spec.version.value == 2  # the highest, as TF Serving serves
  assert response.model_spec.signature_name == "serving_default"


def test_predict_answers_what_the_rest_json_path_answers(served):
  inputs = {"text_a": TEXTS, "text_b": ["it moved me", "I left early"]}
  response = served.predict.Predict(predict_request(inputs, signature="text_pair"),
                                    timeout=TIMEOUT)
  function = served.loaded.signatures["text_pair"]
  rest, _ = rest_json.request_inputs({"inputs": inputs}, rest_json.input_specs(function))
  assert_same_outputs(arrays(response), rest_json.run(function, rest))
  assert response.model_spec.signature_name == "text_pair"


def test_predict_takes_integer_inputs_of_the_encoded_signature(served):
  ids = {"input_word_ids": np.array([[2, 9, 14, 3], [2, 7, 3, 0]], np.int32),
         "input_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]], np.int32),
         "input_type_ids": np.zeros([2, 4], np.int32)}
  response = served.predict.Predict(predict_request(ids, signature="encoded"), timeout=TIMEOUT)
  expected = served.loaded.signatures["encoded"](**{k: tf.constant(v) for k, v in ids.items()})
  assert_same_outputs(arrays(response), {"logits": expected["logits"].numpy()})


@pytest.mark.parametrize("choice, served_version", [
    ({"version": 1}, 1), ({"version": 2}, 2), ({"label": "stable"}, 1),
    ({"label": "canary"}, 2), ({}, 2)])
def test_version_or_label_selects_the_version_that_answers(served, choice, served_version):
  response = served.predict.Predict(predict_request({"text_a": TEXTS[:1]}, **choice),
                                    timeout=TIMEOUT)
  assert response.model_spec.version.value == served_version


def test_output_filter_answers_only_the_outputs_it_names(served):
  request = predict_request({"text_a": TEXTS})
  request.output_filter.extend(["label_names"])
  response = served.predict.Predict(request, timeout=TIMEOUT)
  assert list(response.outputs) == ["label_names"]
  assert tf.make_ndarray(response.outputs["label_names"]).shape == (2,)


@pytest.mark.parametrize("output_filter, words", [
    (["logits"], "output tensor alias not found in signature: logits Outputs expected to be in "
                 "the set {label_ids,label_names,probabilities}."),
    (["label_ids", "label_ids"], "duplicate output tensor alias: label_ids")])
def test_output_filter_refuses_what_tf_serving_refuses(served, output_filter, words):
  request = predict_request({"text_a": TEXTS})
  request.output_filter.extend(output_filter)
  assert refusal(served.predict.Predict, request) == (grpc.StatusCode.INVALID_ARGUMENT, words)


NOT_FOUND, INVALID = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("request_args, code, words", [
    (({"text_a": TEXTS}, "nope"), NOT_FOUND, "no model 'nope' is served (served: cls)"),
    (({"text_a": TEXTS}, "cls", "", 7), NOT_FOUND,
     "model 'cls' has no version 7 served (served: 1, 2)"),
    (({"text_a": TEXTS}, "cls", "", None, "beta"), NOT_FOUND,
     "model 'cls' has no version label 'beta'"),
    (({"text_a": TEXTS}, "cls", "mlm"), NOT_FOUND,
     "model 'cls' version 2 has no signature 'mlm' (it has embed, encoded, serve_examples, "
     "serving_default, text_pair)"),
    (({"text_a": TEXTS}, "cls", "text_pair"), INVALID,
     "the PredictRequest lacks the input 'text_b' (this signature takes text_a, text_b)"),
    (({"text_a": TEXTS, "text_c": TEXTS}, "cls"), INVALID,
     "the PredictRequest has the input 'text_c', which this signature does not take (it takes "
     "text_a)"),
    (({"text_a": np.array([1, 2], np.int32)}, "cls"), INVALID,
     "text_a has the dtype int32; this signature takes string for it"),
    (({"text_a": np.array([], object)}, "cls"), INVALID,
     "text_a has no rows: a request needs at least one example"),
    (({"text_a": TEXTS, "text_b": TEXTS[:1]}, "cls", "text_pair"), INVALID,
     "text_b has 1 rows but text_a has 2"),  # the signature's own rule (export/requests.py)
], ids=["model", "version", "label", "signature", "missing input", "unknown input", "dtype",
        "empty batch", "signature's rule"])
def test_a_bad_predict_is_refused_with_its_code_and_the_rest_apis_words(
    served, request_args, code, words):
  assert refusal(served.predict.Predict, predict_request(*request_args)) == (code, words)


@pytest.mark.parametrize("rpc, message", [
    ("Predict", predict_pb2.PredictRequest),
    ("GetModelMetadata", get_model_metadata_pb2.GetModelMetadataRequest),
    ("GetModelStatus", get_model_status_pb2.GetModelStatusRequest)])
def test_a_request_without_a_model_spec_is_refused_in_tf_servings_words(served, rpc, message):
  stub = served.models if rpc == "GetModelStatus" else served.predict
  assert refusal(getattr(stub, rpc), message()) == (INVALID, "Missing ModelSpec")


def test_a_message_over_max_message_bytes_is_resource_exhausted(served):
  server = grpc_api.start_grpc_server(served.core, 0, max_message_bytes=4096, host="127.0.0.1")
  try:
    with grpc.insecure_channel(f"127.0.0.1:{server.bound_port}") as channel:
      stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
      code, words = refusal(stub.Predict, predict_request({"text_a": ["word " * 2000]}))
      assert stub.Predict(predict_request({"text_a": TEXTS}), timeout=TIMEOUT).outputs
  finally:
    server.stop(None).wait(TIMEOUT)
  assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
  assert "larger than max" in words and "4096" in words


class Unavailable(Exception):
  """Another module's Unavailable (the batching queue's), with no base in common with core's."""


class RefusingCore:
  """A core whose serving() refuses every request as `error` does."""

  def __init__(self, error):
    self.error = error

  def serving(self, *_):
    raise self.error


@pytest.mark.parametrize("error", [core_lib.Unavailable("the server is stopping"),
                                   Unavailable("the batch queue is full")],
                         ids=["core", "by class name"])
def test_a_server_that_cannot_take_the_request_answers_unavailable(error):
  server = grpc_api.start_grpc_server(RefusingCore(error), 0, host="127.0.0.1")
  try:
    with grpc.insecure_channel(f"127.0.0.1:{server.bound_port}") as channel:
      stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
      assert refusal(stub.Predict, predict_request({"text_a": TEXTS})) == (
          grpc.StatusCode.UNAVAILABLE, str(error))
  finally:
    server.stop(None).wait(TIMEOUT)


class HeldSignature:
  """A signature doubling `x` ([batch] float32), as a loaded one describes itself."""
  structured_input_signature = ((), {"x": tf.TensorSpec([None], tf.float32, name="x")})
  structured_outputs = {"y": tf.TensorSpec([None], tf.float32, name="y")}


class HoldingCore:
  """A core whose one version answers only once `release` is set (`started`: a request is in)."""

  def __init__(self):
    self.started, self.release = threading.Event(), threading.Event()
    self.version = 1

  @contextlib.contextmanager
  def serving(self, *_):
    yield self

  def signature(self, _):
    return HeldSignature

  def run(self, _, arrays):
    self.started.set()
    assert self.release.wait(TIMEOUT)
    return {"y": arrays["x"] * 2}


def test_stop_finishes_the_requests_in_flight_and_refuses_new_ones():
  core = HoldingCore()
  server = grpc_api.start_grpc_server(core, 0, host="127.0.0.1")
  request = predict_request({"x": np.array([1.5, 2], np.float32)})
  with grpc.insecure_channel(f"127.0.0.1:{server.bound_port}") as channel:
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    in_flight = stub.Predict.future(request, timeout=TIMEOUT)
    assert core.started.wait(TIMEOUT)
    stopped = server.stop(TIMEOUT)
    assert refusal(stub.Predict, request)[0] == grpc.StatusCode.UNAVAILABLE
    core.release.set()
    answer = arrays(in_flight.result(timeout=TIMEOUT))
    np.testing.assert_array_equal(answer["y"], np.array([3, 4], np.float32))
  assert stopped.wait(TIMEOUT)


def test_an_input_of_a_shape_the_signature_does_not_take_is_invalid_argument():
  core = HoldingCore()
  core.release.set()
  server = grpc_api.start_grpc_server(core, 0, host="127.0.0.1")
  try:
    with grpc.insecure_channel(f"127.0.0.1:{server.bound_port}") as channel:
      stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
      assert refusal(stub.Predict, predict_request({"x": np.ones([2, 2], np.float32)})) == (
          INVALID, "x has the shape [2, 2]; this signature takes [None]")
  finally:
    server.stop(None).wait(TIMEOUT)


def test_a_port_in_use_is_an_error_naming_it(served):
  with pytest.raises(OSError, match=f"127.0.0.1:{served.server.bound_port} \\(--port\\)"):
    grpc_api.start_grpc_server(served.core, served.server.bound_port, host="127.0.0.1")


def metadata_request(*fields, name="cls", version=None):
  request = get_model_metadata_pb2.GetModelMetadataRequest()
  request.model_spec.name = name
  if version is not None:
    request.model_spec.version.value = version
  request.metadata_field.extend(fields)
  return request


def test_get_model_metadata_answers_the_signature_defs_as_tf_serving_packs_them(served):
  response = served.predict.GetModelMetadata(metadata_request("signature_def", version=1),
                                             timeout=TIMEOUT)
  packed = response.metadata["signature_def"]
  assert packed.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
  signatures = get_model_metadata_pb2.SignatureDefMap()
  assert packed.Unpack(signatures)
  assert dict(signatures.signature_def) == core_lib.signature_defs(served.export)
  # Every SignatureDef of the MetaGraph, the init op's too, as TF Serving answers them.
  assert set(signatures.signature_def) == set(served.loaded.signatures) | {
      "__saved_model_init_op"}
  assert (response.model_spec.name, response.model_spec.version.value) == ("cls", 1)


@pytest.mark.parametrize("fields, words", [
    ((), "GetModelMetadataRequest must specify at least one metadata_field"),
    (("signature_def", "pre_processing_settings"),
     "Metadata field pre_processing_settings is not supported")])
def test_get_model_metadata_refuses_fields_as_tf_serving(served, fields, words):
  assert refusal(served.predict.GetModelMetadata, metadata_request(*fields)) == (INVALID, words)


def status_request(name="cls", version=None, label=None):
  request = get_model_status_pb2.GetModelStatusRequest()
  request.model_spec.name = name
  if version is not None:
    request.model_spec.version.value = version
  if label is not None:
    request.model_spec.version_label = label
  return request


def statuses(response):
  State = get_model_status_pb2.ModelVersionStatus.State  # pylint: disable=invalid-name
  return [(s.version, State.Name(s.state), s.status.error_code, s.status.error_message)
          for s in response.model_version_status]


@pytest.mark.parametrize("choice, expected", [
    ({}, [(2, "AVAILABLE", 0, ""), (1, "AVAILABLE", 0, "")]),
    ({"version": 1}, [(1, "AVAILABLE", 0, "")]),
    ({"label": "canary"}, [(2, "AVAILABLE", 0, "")])])
def test_get_model_status_answers_each_versions_state(served, choice, expected):
  response = served.models.GetModelStatus(status_request(**choice), timeout=TIMEOUT)
  assert statuses(response) == expected


@pytest.mark.parametrize("choice, words", [
    ({"name": "nope"}, "no model 'nope' is served (served: cls)"),
    ({"version": 9}, "model 'cls' has no version 9 (known: 1, 2)"),
    ({"label": "beta"}, "model 'cls' has no version label 'beta'")])
def test_get_model_status_of_what_is_not_known_is_not_found(served, choice, words):
  assert refusal(served.models.GetModelStatus, status_request(**choice)) == (NOT_FOUND, words)


@pytest.mark.parametrize("rpc, message", [
    ("Classify", classification_pb2.ClassificationRequest),
    ("Regress", regression_pb2.RegressionRequest)])
def test_classify_and_regress_are_unimplemented_and_point_to_predict(served, rpc, message):
  request = message()
  request.model_spec.name = "cls"
  code, words = refusal(getattr(served.predict, rpc), request)
  assert code == grpc.StatusCode.UNIMPLEMENTED
  assert words.startswith(f"{rpc} is not served by this server (serve.py): send a "
                          "PredictRequest to signature 'serving_default' of model 'cls'")
  assert "its method is tensorflow/serving/predict" in words
  assert "'serve_examples'" in words
  request.model_spec.name = "nope"  # the model is looked up first, as by Predict
  assert refusal(getattr(served.predict, rpc), request)[0] == NOT_FOUND


def test_multi_inference_is_unimplemented_and_points_to_predict(served):
  code, words = refusal(served.predict.MultiInference, inference_pb2.MultiInferenceRequest())
  assert code == grpc.StatusCode.UNIMPLEMENTED
  assert "send a PredictRequest" in words


def reload_request(*models):
  config = model_server_config_pb2.ModelServerConfig()
  for name, base_path, labels in models:
    model = config.model_config_list.config.add(name=name, base_path=base_path)
    model.model_version_policy.all.SetInParent()
    model.version_labels.update(labels)
  return model_management_pb2.ReloadConfigRequest(config=config)


def test_reload_config_adds_a_model_and_shows_a_failed_version_in_its_status(served):
  second = served.base / "second"
  (second / "2").mkdir(parents=True)
  os.symlink(served.export, second / "1")
  (second / "2" / "saved_model.pb").write_bytes(b"not a SavedModel")
  first = ("cls", str(served.base / "cls"), {"stable": 1, "canary": 2})
  response = served.models.HandleReloadConfigRequest(
      reload_request(first, ("second", str(second), {})), timeout=TIMEOUT)
  try:
    assert response.status.error_code == 0
    answer = served.predict.Predict(predict_request({"text_a": TEXTS}, name="second"),
                                    timeout=TIMEOUT)
    assert answer.model_spec.version.value == 1  # version 2 failed: version 1 serves
    failed, loaded = statuses(served.models.GetModelStatus(status_request("second"),
                                                           timeout=TIMEOUT))
    assert failed[:3] == (2, "END", 2)  # tensorflow.error.Code UNKNOWN
    assert failed[3]  # the load's own error
    assert loaded == (1, "AVAILABLE", 0, "")
    assert served.predict.Predict(predict_request({"text_a": TEXTS}), timeout=TIMEOUT).outputs
  finally:  # the other tests' server: "cls" alone
    served.models.HandleReloadConfigRequest(reload_request(first), timeout=TIMEOUT)
  assert sorted(served.core.models) == ["cls"]


@pytest.mark.parametrize("models, words", [
    ((), "ReloadConfigRequest: lists no model"),
    ((("a", "/x", {}), ("a", "/y", {})), "ReloadConfigRequest: model 'a' is listed twice")])
def test_reload_config_refuses_what_the_config_file_refuses(served, models, words):
  code, message = refusal(served.models.HandleReloadConfigRequest, reload_request(*models))
  assert code == INVALID and message.startswith(words)
  assert "cls" in served.core.models  # what served keeps serving


def test_concurrent_clients_each_get_their_own_answer(served):
  texts = [f"review number {i} of a film" for i in range(8)]
  expected = {text: served.loaded.signatures["serving_default"](text_a=tf.constant([text]))
              for text in texts}

  def client(text):
    for _ in range(10):
      response = served.predict.Predict(predict_request({"text_a": [text]}), timeout=TIMEOUT)
      assert_same_outputs(arrays(response), {k: v.numpy() for k, v in expected[text].items()})
    return text

  with concurrent.futures.ThreadPoolExecutor(8) as pool:
    assert sorted(pool.map(client, texts, timeout=120)) == sorted(texts)


def test_the_config_file_is_read_again_models_come_and_go(served, tmp_path):
  """--model_config_file_poll_wait_seconds: a model added to the file is loaded and served, a
  label added applies, and a model removed is unloaded, without a restart."""
  for name in ("a", "b"):
    (tmp_path / name).mkdir()
    os.symlink(served.export, tmp_path / name / "1")
  config = tmp_path / "models.config"
  entry = 'config {{ name: "{0}" base_path: "%s/{0}" {1}}}' % tmp_path
  config.write_text("model_config_list { %s }" % entry.format("a", ""))
  core = core_lib.ServerCore(layout.read_model_config(str(config)), poll_wait_seconds=0,
                             config_file=str(config), config_poll_wait_seconds=1)
  core.start()
  try:
    config.write_text("model_config_list { %s %s }" % (
        entry.format("a", ""), entry.format("b", 'version_labels { key: "stable" value: 1 } ')))
    deadline = time.time() + 120
    while "b" not in core.models or not core.models["b"].available:
      assert time.time() < deadline, "model b was never loaded"
      time.sleep(0.2)
    with core.serving("b", label="stable") as servable:
      assert servable.version == 1
    config.write_text("model_config_list { %s }" % entry.format("b", ""))
    while "a" in core.models:
      assert time.time() < deadline, "model a was never removed"
      time.sleep(0.2)
    with pytest.raises(rest_json.NotFound, match="no model 'a' is served"):
      with core.serving("a"):
        pass
  finally:
    core.stop()
