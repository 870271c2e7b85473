"""TF Serving's SavedModel warm-up: `assets.extra/tf_serving_warmup_requests` in each export.

A model server runs a version's first request slowly (the functions' graphs are optimized and
their kernels made on first use: seconds on a CPU). TF Serving replays the PredictionLog
records of this file before it marks a version AVAILABLE, so the first client after a rollout
does not pay; serve.py does the same (serving/core.py). Each signature gets a few requests made
from its inputs' names, dtypes and shapes: one short row, one longer row and a batch of four,
texts in the shapes the task reads (a pair, a question and its context, an article with its
options, serialized tf.train.Examples for `serve_examples`). A signature whose inputs are not
ones we know is left out of the file and named in the log.
"""

import logging
import os

import numpy as np

logger = logging.getLogger(__name__)

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")

_SHORT = {"text": "the [MASK] sat on the mat", "text_a": "a gripping film",
          "text_b": "it was worth the wait", "question": "Who wrote the book?",
          "context": "Tom wrote the book in 1990.", "article": "Tom went to the park."}
_LONG = " ".join(["The story follows a family over three summers by the sea, and every "
                  "chapter adds a voice."] * 4)
_IDS = [2, 48, 1310, 25, 3]


def _texts(name, rows, long):
  text = _SHORT[name] + (" " + _LONG if long else "")
  return np.array([text.encode()] * rows, dtype=object)


def _options(num_choices):
  return [f"option {i + 1}".encode() for i in range(num_choices)]


def _value(name, dtype, rows, long, sibling, num_choices):
  """A sample value of input `name` of `dtype` (a DataType enum) for `rows` rows, or None when
  the input is not one we know. Our signatures declare their inputs' ranks in the graph, not
  in the SignatureDef (export/requests.py), so the name says the shape."""
  from tensorflow.core.framework import types_pb2  # pylint: disable=g-import-not-at-top
  if dtype == types_pb2.DT_STRING:
    if name == "examples":
      return None if not sibling else np.array(
          [_example(sibling, long, num_choices)] * rows, dtype=object)
    if name == "options":
      return np.array([_options(num_choices)] * rows, dtype=object)
    return _texts(name, rows, long) if name in _SHORT else None
  if dtype == types_pb2.DT_INT32:
    ids = _IDS * (8 if long else 1)
    column = {"input_word_ids": ids, "input_mask": [1] * len(ids),
              "input_type_ids": [0] * len(ids), "masked_lm_positions": [1]}.get(name)
    return None if column is None else np.array([column] * rows, dtype=np.int32)
  return None


def _example(names, long, num_choices):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  feature = {}
  for name in names:
    values = _options(num_choices) if name == "options" else [_texts(name, 1, long)[0]]
    feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def warmup_requests(signature_defs, num_choices=4):
  """[PredictRequest] for `signature_defs` ({name: SignatureDef}): three per signature whose
  inputs we know how to fill (`num_choices`: the options a multiple-choice row has)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.apis import predict_pb2  # pylint: disable=g-import-not-at-top
  default = signature_defs.get("serving_default")
  text_inputs = [n for n in sorted(default.inputs if default else ())
                 if n in _SHORT or n == "options"]
  made = []
  for signature, definition in sorted(signature_defs.items()):
    if signature.startswith("__"):  # __saved_model_init_op: the tables' initializer, no inputs
      continue
    for rows, long in ((1, False), (1, True), (4, False)):
      values = {name: _value(name, spec.dtype, rows, long, text_inputs, num_choices)
                for name, spec in definition.inputs.items()}
      unknown = sorted(n for n, v in values.items() if v is None)
      if unknown:
        logger.info("no warm-up request for signature %r (input %r)", signature, unknown[0])
        break
      request = predict_pb2.PredictRequest()
      request.model_spec.signature_name = signature
      for name, value in values.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
      made.append(request)
  return made


def write_warmup_requests(export_dir, num_choices=4):
  """Writes `<export_dir>/assets.extra/tf_serving_warmup_requests` for the SavedModel in
  `export_dir` (being written: its temporary folder). Returns how many requests."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.saved_model import loader_impl  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=g-import-not-at-top
  saved_model = loader_impl.parse_saved_model(export_dir)
  serving = next(m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags)
  requests = warmup_requests(dict(serving.signature_def), num_choices)
  if not requests:
    return 0
  path = os.path.join(export_dir, WARMUP_FILE)
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path) as writer:
    for request in requests:
      log = prediction_log_pb2.PredictionLog()
      log.predict_log.request.CopyFrom(request)
      writer.write(log.SerializeToString())
  return len(requests)
