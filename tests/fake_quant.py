"""A NumPy reference of TFLite's dynamic-range int8 (`Optimize.DEFAULT`, no representative data),
so that a quantized file is held to the scheme's own rounding rather than to a fitted constant.

The scheme, as TensorFlow 2.20's converter and interpreter apply it to our models:
- weights: a FULLY_CONNECTED weight ([out, in]) with at least 1,024 elements becomes int8 with
  one symmetric scale per output channel, `max|w_c| / 127`; a GATHER table of at least 1,024
  elements (the word embeddings) becomes int8 with one symmetric scale, `max|w| / 127`, and the
  gathered rows are dequantized; smaller tensors stay float32.
- activations: each row of a hybrid FULLY_CONNECTED's input is quantized on the fly to int8 with
  its own asymmetric scale `(max(0, row) - min(0, row)) / 255` and zero point (TFLite's
  `AsymmetricQuantizeFloats`), the products summed exactly in int32 and scaled back to float32.

`check_tflite_int8(int8_file, float_file, feeds)` runs the int8 file beside its float32 twin (the
same function converted without `quantize`, itself tested against the Keras model) and states
that the int8 file is the float one with exactly this done to it: the same operations in the
same order, every float constant unchanged, every int8 weight the reference's quantization of
its float twin, and every hybrid layer's output the reference's from the layer's own input. The
outputs of the int8 file are then, operation by operation, what the scheme gives: no
end-to-end tolerance is needed, and none is fitted.

(An end-to-end fake-quantized Keras model does not reproduce the file: the converter folds a
bias into the next layer, `(x + b) W = x W + b W`, so that layer quantizes rows of `x`, not of
`x + b`, and rounds otherwise.)
"""

import numpy as np
import tensorflow as tf

MIN_ELEMENTS = 1024  # the converter leaves weights with fewer elements in float32

# Where a value about to be rounded (`zero_point + x / scale`) lies within this fraction of its
# magnitude of a rounding boundary (a half-integer), another correct implementation (a product
# with the reciprocal instead of a division, a float64 quotient, another rounding of either) may
# round it the other way: a few float32 ulps (2**-24 each).
_TIE_MARGIN = 2.0**-20


def near_tie(exact):
  """True where `exact` (float64) is within `_TIE_MARGIN` of a rounding boundary."""
  distance = np.abs(np.abs(exact - np.floor(exact)) - 0.5)
  return distance <= _TIE_MARGIN * np.maximum(np.abs(exact), 1.0)


def _round_half_away(values):
  return np.sign(values) * np.floor(np.abs(values) + 0.5)


def quantize_weights(weights, per_channel):
  """int8 values and float32 scales of `weights` (a fully connected layer's [out, in], or a
  table): symmetric, one scale per row (output channel) or one for the tensor."""
  weights = np.asarray(weights, np.float32)
  largest = (np.abs(weights).max(axis=tuple(range(1, weights.ndim)))
             if per_channel else np.abs(weights).max().reshape(1))
  scales = largest.astype(np.float32) / np.float32(127)
  safe = np.where(scales > 0, scales, np.float32(1)).reshape((-1,) + (1,) * (weights.ndim - 1))
  return np.clip(_round_half_away(weights / safe), -127, 127).astype(np.int8), scales


def quantize_rows(x):
  """TFLite's on-the-fly int8 of a hybrid layer's input `x` ([rows, in]): per row, the float32
  scale and integer zero point of [min(0, row), max(0, row)] over [-128, 127], and the values
  `round(zero_point + x / scale)`. Returns (values as float64, scales [rows], zero points [rows],
  ambiguous [rows, in]: True where another correct implementation may round the other way)."""
  x = np.asarray(x, np.float32)
  low = np.minimum(0.0, x.min(axis=1).astype(np.float64))
  high = np.maximum(0.0, x.max(axis=1).astype(np.float64))
  flat = high == low
  scale = np.where(flat, 1.0, (high - low) / 255.0)
  from_low, from_high = -128.0 - low / scale, 127.0 - high / scale
  use_low = 128.0 + np.abs(low / scale) < 127.0 + np.abs(high / scale)
  zero = np.where(flat, 0.0, np.clip(_round_half_away(np.where(use_low, from_low, from_high)),
                                      -128, 127))
  scale32 = scale.astype(np.float32)
  exact = zero[:, None] + x.astype(np.float64) / scale32.astype(np.float64)[:, None]
  values = np.clip(_round_half_away(exact), -128, 127)
  return values, scale32, zero, near_tie(exact)


def hybrid_fully_connected(x, weights, scales, bias):
  """The reference of a hybrid FULLY_CONNECTED: `x` [rows, in] float32, `weights` int8
  [out, in] with `scales` [out]. Returns (outputs float64 [rows, out], slack [rows, out]: how
  far an output may move when its ambiguous inputs round the other way, one step each)."""
  values, row_scales, zero, ambiguous = quantize_rows(x)
  w = np.asarray(weights, np.float64)
  step = row_scales.astype(np.float64)[:, None] * np.asarray(scales, np.float64).reshape(1, -1)
  outputs = (values - zero[:, None]) @ w.T * step
  if bias is not None:
    outputs = outputs + np.asarray(bias, np.float64)
  return outputs, ambiguous.astype(np.float64) @ np.abs(w).T * step


class _Run:
  """A TFLite file run once on `feeds`, every tensor kept."""

  def __init__(self, path, feeds):
    self.interpreter = tf.lite.Interpreter(model_path=str(path),
                                           experimental_preserve_all_tensors=True)
    inputs = self.interpreter.get_input_details()
    for detail in inputs:
      self.interpreter.resize_tensor_input(detail["index"], _feed(detail, feeds).shape)
    self.interpreter.allocate_tensors()
    for detail in inputs:
      self.interpreter.set_tensor(detail["index"], _feed(detail, feeds))
    self.interpreter.invoke()
    self.details = {d["index"]: d for d in self.interpreter.get_tensor_details()}
    self.ops = [op for op in self.interpreter._get_ops_details()  # pylint: disable=protected-access
                if op["op_name"] not in ("DEQUANTIZE", "DELEGATE")]
    produced = {i for op in self.interpreter._get_ops_details() for i in op["outputs"]}  # pylint: disable=protected-access
    self.constants = set(self.details) - produced - {d["index"] for d in inputs}

  def value(self, index):
    return self.interpreter.get_tensor(index)


def _feed(detail, feeds):
  names = [name for name in feeds if name in detail["name"]]
  assert len(names) == 1, f"input {detail['name']}: feeds {sorted(feeds)}"
  return feeds[names[0]]


def _weight_slot(op):
  return {"FULLY_CONNECTED": 1, "GATHER": 0}.get(op["op_name"])


def check_tflite_int8(int8_file, float_file, feeds):
  """Asserts that `int8_file` is `float_file` quantized by the scheme above, run on `feeds`
  (input name -> array): see the module's doc. Returns the number of hybrid layers checked."""
  from conftest import float32_atol  # pylint: disable=g-import-not-at-top
  int8, float32 = _Run(int8_file, feeds), _Run(float_file, feeds)
  assert [op["op_name"] for op in int8.ops] == [op["op_name"] for op in float32.ops]
  hybrid = 0
  for op, twin in zip(int8.ops, float32.ops):
    where = f"{op['op_name']} {op['index']}"
    for slot, (i, j) in enumerate(zip(op["inputs"], twin["inputs"])):
      if j not in float32.constants:
        continue
      assert i in int8.constants, f"{where}: input {slot} is a constant of only one file"
      want = float32.value(j)
      if int8.details[i]["dtype"] != np.int8:
        np.testing.assert_array_equal(int8.value(i), want, err_msg=f"{where}, input {slot}")
        assert slot != _weight_slot(op) or want.size < MIN_ELEMENTS, (
            f"{where}: {want.size} weights left in float32")
        continue
      assert slot == _weight_slot(op), f"{where}: int8 input {slot} is not a weight"
      values, scales = quantize_weights(want, per_channel=op["op_name"] == "FULLY_CONNECTED")
      np.testing.assert_array_equal(int8.value(i), values, err_msg=where)
      np.testing.assert_array_equal(int8.details[i]["quantization_parameters"]["scales"], scales,
                                    err_msg=where)
    if op["op_name"] != "FULLY_CONNECTED" or int8.details[op["inputs"][1]]["dtype"] != np.int8:
      continue
    x = int8.value(op["inputs"][0])
    weights = int8.value(op["inputs"][1])
    bias = int8.value(op["inputs"][2]) if op["inputs"][2] >= 0 else None
    want, slack = hybrid_fully_connected(
        x.reshape(-1, x.shape[-1]), weights,
        int8.details[op["inputs"][1]]["quantization_parameters"]["scales"], bias)
    got = int8.value(op["outputs"][0]).reshape(want.shape)
    # The scaled sum, its scale and the bias each round once in float32: 3 terms.
    error = np.abs(got - want)
    assert np.all(error <= float32_atol(want, terms=3) + slack), (
        f"hybrid {where}: off the reference by up to {error.max():.3g}")
    hybrid += 1
  return hybrid
