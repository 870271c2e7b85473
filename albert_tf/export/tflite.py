"""TFLite (LiteRT) files of the encoder and the classifier, float32 or dynamic-range int8.

`quantize=True` is TFLite's dynamic-range quantization (`Optimize.DEFAULT`, no representative
dataset, so no calibration data): every large constant weight is stored as int8 with a float
scale per output channel, and activations stay float32 (fully connected layers quantize them
on the fly). ALBERT's weights are nearly all in constants this covers, the factorized
embedding table `[vocab, E]` included (a weight-only int8 gather), so the file is about a
quarter of the float32 one: 0.26x for a tiny config (tests/test_tflite_quantize.py), and for
ALBERT-base at seq 128 encoder.tflite is 11.9 MB against 46.6 MB (README.md).

  export_classifier_tflite(classifier, "classifier.tflite", max_seq_length=128, quantize=True)
  logits = tflite_logits("classifier.tflite", word_ids, mask, type_ids)  # numpy [batch, C]
"""


import numpy as np
import tensorflow as tf

from albert_tf import files
from albert_tf.modeling.activations import plain_activations
from albert_tf.modeling.encoder import INPUT_NAMES


def _input_signature(batch_size, max_seq_length):
  """The three int32 `[batch, seq]` inputs; `batch_size=None` leaves the batch resizable."""
  return [tf.TensorSpec([batch_size, max_seq_length], tf.int32, name=name)
          for name in INPUT_NAMES]


def _convert(concrete_function, quantize=False):
  """The TFLite flatbuffer (bytes) of a concrete function with fixed-length inputs."""
  # The converter saves what it is given before converting; given only the variables the
  # function captures (not a Keras model or a loaded SavedModel, whose functions it would
  # retrace) a tiny model converts in about 1.5 s instead of 6 to 8.
  variables = tf.Module()
  variables.captured = list(concrete_function.variables)
  converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete_function], variables)
  if quantize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  return converter.convert()


def _write_atomically(tflite_file, data):
  """Writes `data` to `tflite_file`, which appears only whole; returns its size."""
  files.write_bytes(tflite_file, data)
  return len(data)


def export_serving_tflite(serving, tflite_file, max_seq_length, quantize=False,
                          batch_size=None):
  """Writes `serving` (a dict of the three int32 `[batch, max_seq_length]` inputs -> a dict of
  float32 outputs) as a TFLite file; returns its size in bytes.

  `quantize`: dynamic-range int8 weights (see the module doc). `batch_size=None` converts with
  a resizable batch (TFLite's shape signature -1), which `run_tflite` resizes to its rows.
  """

  @tf.function(input_signature=_input_signature(batch_size, max_seq_length))
  def fixed_length(input_word_ids, input_mask, input_type_ids):
    return serving(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                        input_type_ids=input_type_ids))

  with plain_activations():  # a served model must not need XLA (the training GELU's)
    function = fixed_length.get_concrete_function()
  return _write_atomically(tflite_file, _convert(function, quantize))


def export_classifier_tflite(model, tflite_file, max_seq_length, quantize=False,
                             batch_size=None):
  """Writes an AlbertClassifier as TFLite: input_word_ids, input_mask, input_type_ids int32
  `[batch, max_seq_length]` -> logits float32 `[batch, num_labels]` (`[batch]` for regression).

  `quantize`: dynamic-range int8 weights; `batch_size`: None for a resizable batch. Returns
  the file's size in bytes.
  """
  return export_serving_tflite(
      lambda inputs: {"logits": tf.cast(model(inputs, training=False), tf.float32)},
      tflite_file, max_seq_length, quantize, batch_size)


def run_tflite(tflite_file, inputs):
  """Runs a TFLite file's serving signature on a dict of numpy arrays, any number of rows:
  a resizable batch is resized to them, a fixed one is fed in chunks of its size."""
  try:
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  except ImportError:  # tf.lite.Interpreter is deprecated in favour of LiteRT's
    Interpreter = tf.lite.Interpreter  # pylint: disable=invalid-name
  interpreter = Interpreter(model_path=tflite_file)
  runner = interpreter.get_signature_runner()
  rows = len(next(iter(inputs.values())))
  batch = interpreter.get_input_details()[0]["shape_signature"][0]
  if batch == -1:
    return runner(**inputs)
  chunks = []
  for start in range(0, rows, batch):
    # A short last chunk is padded with copies of the last row, dropped afterwards.
    take = np.minimum(np.arange(start, start + batch), rows - 1)
    chunks.append(runner(**{name: value[take] for name, value in inputs.items()}))
  return {name: np.concatenate([c[name] for c in chunks])[:rows] for name in chunks[0]}


def tflite_logits(tflite_file, input_word_ids, input_mask, input_type_ids):
  """The logits (numpy) of a classifier written by `export_classifier_tflite`."""
  inputs = dict(input_word_ids=input_word_ids, input_mask=input_mask,
                input_type_ids=input_type_ids)
  return run_tflite(tflite_file, {k: np.asarray(v, np.int32) for k, v in inputs.items()})["logits"]
