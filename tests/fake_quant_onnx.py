"""A NumPy reference of ONNX Runtime's dynamic quantization (`quantize_dynamic`,
`weight_type=QuantType.QInt8`, albert_tf/export/onnx.py), so that an int8 ONNX file is held to
the scheme's own rounding rather than to a fitted constant.

The scheme, as onnxruntime 1.32's quantizer writes it into our encoder (per_channel and
reduce_range off, their defaults) and its CPU provider runs it:
- MatMul with a constant B (every dense kernel; the attention's two products of activations
  stay float32 MatMuls): B becomes an int8 initializer with one symmetric scale for the whole
  tensor, `max|B| / 127` (worked out in float64, stored as float32), and zero point 0; the
  values are `round(B / scale)` in float32, ties to even. The node becomes
  `Mul(Cast<float>(MatMulInteger(a, b, a_zero, 0)), Mul(a_scale, b_scale))`, where `a`,
  `a_scale`, `a_zero` are a DynamicQuantizeLinear of the MatMul's float input (one for all the
  MatMuls that read the same tensor: the attention's query, key and value).
- activations: DynamicQuantizeLinear quantizes its whole input tensor per call to uint8,
  asymmetric: `scale = (max(0, x) - min(0, x)) / 255` in float32, `zero = round(-min(0, x) /
  scale)` and `a = round(x / scale) + zero`, saturated to [0, 255], ties to even. The products
  are summed exactly in int32, converted to float32 and scaled by `a_scale * b_scale` (a
  float32 product). Exactly: on x86-64 CPUs with VNNI (AVX512-VNNI or AVX-VNNI) and on ARM.
  On x86-64 without VNNI (AVX2-only machines, older AVX-512 ones) ONNX Runtime's U8S8 kernels
  add pairs of uint8 x int8 products in int16 first (VPMADDUBSW), which saturates where a pair
  passes 32767 in magnitude (its quantization docs say so). Which products it pairs is the
  kernel's packing, so there the reference bounds rather than models it: a pair's sum loses at
  most `|p| + |q| - 32767 <= e(p) + e(q)`, with `e(p) = max(0, |p| - 16383.5)`, so the int32 sum
  moves by at most the sum of `e` over its products, whatever the pairing (`saturation`).
- Gather from a constant table (the word and the token-type embeddings) becomes a Gather from a
  uint8 table, asymmetric like an activation but computed once: `scale = (max(0, T) -
  min(0, T)) / 255` and `zero = round(-min(0, T) / scale)` worked out in float64, the scale
  stored as float32; values `round(T / scale) + zero` in float32, ties to even; followed by a
  DequantizeLinear of the gathered rows. (A MatMul reading a quantized Gather's output itself
  would take the uint8 rows with the table's scale and zero point, no DynamicQuantizeLinear:
  the encoder has none, and `check_onnx_int8` refuses it.)
- Nothing else changes: every other node, and every other initializer (biases, LayerNorm, the
  position embeddings, which are sliced, not gathered) is the float32 file's.

ONNX Runtime (graph optimisation "all", as `albert_tf.export.onnx.session` runs it) fuses each
quantized MatMul with its DynamicQuantizeLinear and the bias Add that follows into one node
(DynamicQuantizeMatMul, or MatMulIntegerToFloat where the quantized input is shared), so a layer
is checked from its float input to its output after the bias.

`check_onnx_int8(int8_file, float_file, feeds)` states that the int8 file is the float one with
exactly this done to it: the two graphs correspond node for node from their outputs back (by
structure: two conversions of one model name their tensors differently), the quantized patterns
standing for the float MatMuls and Gathers they replace; every other initializer is unchanged;
every quantized weight, scale and zero point is the reference's quantization of its float twin;
and, the int8 file run on `feeds` with each layer's input and output added to its outputs (which
leaves its own outputs bit for bit as they were: asserted), every quantized layer's output is
the reference's from the layer's own input. The outputs of the int8 file are then, layer by layer,
what the scheme gives: no end-to-end tolerance is needed, and none is fitted.
"""

import platform
import re

import numpy as np
import onnx
from onnx import numpy_helper

from fake_quant import near_tie



def quantize_weight(weights):
  """int8 values, float32 scale and int8 zero point (0) of a MatMul's constant B: symmetric,
  one scale for the tensor."""
  weights = np.asarray(weights, np.float32)
  scale = np.float32(np.float64(np.abs(weights).max()) / 127.0)
  if scale < np.finfo(np.float32).tiny:
    scale = np.float32(1)
  values = np.clip(np.round(weights / scale), -128, 127)
  return values.astype(np.int8), scale, np.int8(0)


def quantize_table(table):
  """uint8 values, float32 scale and uint8 zero point of a Gather's constant table:
  asymmetric over [min(0, T), max(0, T)], one scale for the tensor."""
  table = np.asarray(table, np.float32)
  low = min(0.0, float(table.min()))
  high = max(0.0, float(table.max()))
  scale64 = (high - low) / 255.0
  scale = np.float32(scale64)
  if scale < np.finfo(np.float32).tiny:  # an all-zero table
    return np.zeros(table.shape, np.uint8), np.float32(1), np.uint8(0)
  zero = np.round(-low / scale64)
  values = np.clip(np.round(table / scale) + np.float32(zero), 0, 255)
  return values.astype(np.uint8), scale, np.uint8(zero)


def dynamic_quantize(x):
  """DynamicQuantizeLinear of `x`: (the float32 scale, the candidate zero points (two where
  `-min / scale` is within a few ulps of a tie, else one), and for each the values as float64
  and where another correct implementation may round a value the other way)."""
  x = np.asarray(x, np.float32)
  low = np.minimum(np.float32(0), x.min())
  high = np.maximum(np.float32(0), x.max())
  scale = np.float32(high - low) / np.float32(255)
  if scale == 0:
    return np.float32(1), [(0.0, np.zeros(x.shape), np.zeros(x.shape, bool))]
  exact_zero = -np.float64(low) / np.float64(scale)
  zeros = ({np.floor(exact_zero), np.ceil(exact_zero)} if near_tie(exact_zero)
           else {np.round(exact_zero)})
  exact = x.astype(np.float64) / np.float64(scale)
  steps, ambiguous = np.round(exact), near_tie(exact)
  return scale, [(zero, np.clip(steps + zero, 0, 255), ambiguous) for zero in sorted(zeros)]


def sums_may_saturate():
  """Whether this CPU's ONNX Runtime int8 kernels may saturate pairs of products in int16:
  x86-64 without VNNI (the module doc). Unknown flags count as without."""
  if platform.machine().lower() not in ("x86_64", "amd64"):
    return False
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
      flags = cpuinfo.read()
  except OSError:
    return True
  return not re.search(r"\b(avx512_vnni|avx_vnni)\b", flags)


def saturation(values, weights):
  """[rows, out]: the most that int16 saturation of pairs of products can move each int32 sum
  of `values` (uint8, [rows, in]) times `weights` (int8, [in, out]), in units of the sum."""
  largest = np.abs(values)[:, :, None] * np.abs(np.asarray(weights, np.float64))[None]
  return np.maximum(largest - 16383.5, 0.0).sum(axis=1)


def quantized_matmul(x, weights, weight_scale, bias, saturate=False):
  """The reference of a quantized MatMul from its float input `x` [..., in]: int8 `weights`
  [in, out] with `weight_scale`, float32 `bias` [out] or None. Yields, for each candidate zero
  point of `x`, (the products before the bias, the outputs, both float64 [rows, out], and the
  slack [rows, out]: how far an output may move when its ambiguous inputs round the other way,
  one step each, and, with `saturate`, when pairs of products saturate in int16)."""
  x = np.asarray(x, np.float32).reshape(-1, weights.shape[0])
  scale, candidates = dynamic_quantize(x)
  w = np.asarray(weights, np.float64)
  step = np.float64(np.float32(scale) * np.float32(weight_scale))
  for zero, values, ambiguous in candidates:
    products = (values - zero) @ w * step
    outputs = products if bias is None else products + np.asarray(bias, np.float64)
    slack = ambiguous.astype(np.float64) @ np.abs(w) * step
    if saturate:
      slack = slack + saturation(values + ambiguous, w) * step
    yield products, outputs, slack


class _Graph:
  """A ModelProto's graph, indexed: what produces each tensor, who reads it, its constants."""

  def __init__(self, model):
    self.nodes = list(model.graph.node)
    self.producer = {name: (i, slot) for i, node in enumerate(self.nodes)
                     for slot, name in enumerate(node.output)}
    self.readers = {}
    for i, node in enumerate(self.nodes):
      for name in node.input:
        self.readers.setdefault(name, []).append(i)
    self.constants = {t.name: t for t in model.graph.initializer}
    self.inputs = [i.name for i in model.graph.input]
    self.outputs = [o.name for o in model.graph.output]

  def value(self, name):
    return numpy_helper.to_array(self.constants[name])

  def node(self, name, op_type, slot=0):
    """The node of type `op_type` whose output `slot` is `name`."""
    assert name in self.producer, f"{name} is not computed (a {op_type} output expected)"
    i, got = self.producer[name]
    node = self.nodes[i]
    assert (node.op_type, node.domain, got) == (op_type, "", slot), (
        f"{name}: output {got} of a {node.op_type} where output {slot} of a {op_type} expected")
    return i, node


def _attributes(node):
  return sorted(a.SerializeToString(deterministic=True) for a in node.attribute)


class _Correspondence:
  """The int8 graph walked beside the float one, from the outputs back to the inputs."""

  def __init__(self, int8, float32):
    self.int8, self.float32 = int8, float32
    self.tensors = {}  # float32 computed tensor -> its int8 twin
    self.twins = {}  # the reverse
    self.visited = (set(), set())  # node indices of (int8, float32)
    self.layers = []  # (kind, int8 node index, details)

  def walk(self):
    assert self.int8.outputs == self.float32.outputs, "the files' outputs differ"
    assert self.int8.inputs == self.float32.inputs, "the files' inputs differ"
    pending = [(name, name) for name in self.float32.outputs]
    while pending:
      got, want = pending.pop()
      pending.extend(self._pair(got, want))
    for which, graph in zip(self.visited, (self.int8, self.float32)):
      left = set(range(len(graph.nodes))) - which
      assert not left, f"nodes without a twin: {[graph.nodes[i].name for i in sorted(left)]}"

  def _pair(self, got, want):
    """Checks that the int8 tensor `got` stands for the float tensor `want`; returns the pairs
    of tensors to check next."""
    if want == "" or got == "":
      assert want == got, f"an omitted input in one file only: {got!r}, {want!r}"
      return []
    if want in self.float32.inputs:
      assert got == want, f"{got} stands for the input {want}"
      return []
    if want in self.float32.constants:
      assert got in self.int8.constants, f"{got} stands for the constant {want}"
      a, b = self.int8.constants[got], self.float32.constants[want]
      assert a.data_type == b.data_type, f"{got}: {a.data_type} where {want} is {b.data_type}"
      np.testing.assert_array_equal(self.int8.value(got), self.float32.value(want),
                                    err_msg=f"{got} (the constant {want} of the float file)")
      return []
    if want in self.tensors or got in self.twins:
      assert self.tensors.get(want) == got and self.twins.get(got) == want, (
          f"{got} stands for {want} and for another tensor")
      return []
    self.tensors[want], self.twins[got] = got, want
    index, slot = self.float32.producer[want]
    node = self.float32.nodes[index]
    self.visited[1].add(index)
    if node.op_type == "MatMul" and node.input[1] in self.float32.constants:
      return [(self._matmul(got, node), node.input[0])]
    if node.op_type == "Gather" and node.input[0] in self.float32.constants:
      return [(self._gather(got, node), node.input[1])]
    assert got in self.int8.producer, f"{got} is not computed; {want} is"
    i, twin_slot = self.int8.producer[got]
    twin = self.int8.nodes[i]
    where = f"{twin.name} (float {node.name})"
    assert (twin.op_type, twin.domain, twin_slot) == (node.op_type, node.domain, slot), (
        f"{where}: {twin.op_type} output {twin_slot} for {node.op_type} output {slot}")
    assert _attributes(twin) == _attributes(node), f"{where}: other attributes"
    assert len(twin.input) == len(node.input), f"{where}: other inputs"
    assert len(twin.output) == len(node.output), f"{where}: other outputs"
    self.visited[0].add(i)
    return list(zip(twin.input, node.input))

  def _matmul(self, got, node):
    """`got` is the float MatMul `node`'s quantized pattern; returns its float input."""
    int8 = self.int8
    scaled_i, scaled = int8.node(got, "Mul")
    cast_i, cast = int8.node(scaled.input[0], "Cast")
    assert [a.i for a in cast.attribute if a.name == "to"] == [onnx.TensorProto.FLOAT]
    product_i, product = int8.node(cast.input[0], "MatMulInteger")
    scales_i, scales = int8.node(scaled.input[1], "Mul")
    quantized, weights, zero, weight_zero = product.input
    source_i, source = int8.node(quantized, "DynamicQuantizeLinear", 0)
    assert list(source.output[:3]) == [quantized, scales.input[0], zero], (
        f"{product.name}: not the values, scale and zero point of one DynamicQuantizeLinear")
    want = quantize_weight(self.float32.value(node.input[1]))
    for name, value in zip((weights, scales.input[1], weight_zero), want):
      np.testing.assert_array_equal(int8.value(name), value, err_msg=f"{name} ({node.input[1]})")
      assert int8.value(name).dtype == value.dtype, f"{name}: {int8.value(name).dtype}"
    self.visited[0].update((scaled_i, cast_i, product_i, scales_i, source_i))
    self.layers.append(("MatMul", scaled_i, (source.input[0], weights, scales.input[1])))
    return source.input[0]

  def _gather(self, got, node):
    """`got` is the float Gather `node`'s quantized pattern; returns its indices."""
    int8 = self.int8
    dequantized_i, dequantized = int8.node(got, "DequantizeLinear")
    gather_i, gather = int8.node(dequantized.input[0], "Gather")
    assert _attributes(gather) == _attributes(node), f"{gather.name}: other attributes"
    assert not dequantized.attribute, f"{dequantized.name}: {dequantized.attribute}"
    table, scale, zero = gather.input[0], dequantized.input[1], dequantized.input[2]
    want = quantize_table(self.float32.value(node.input[0]))
    for name, value in zip((table, scale, zero), want):
      np.testing.assert_array_equal(int8.value(name), value, err_msg=f"{name} ({node.input[0]})")
      assert int8.value(name).dtype == value.dtype, f"{name}: {int8.value(name).dtype}"
    self.visited[0].update((dequantized_i, gather_i))
    axis = [a.i for a in gather.attribute if a.name == "axis"] or [0]
    self.layers.append(("Gather", dequantized_i, (gather.input[1], table, scale, zero, axis[0])))
    return gather.input[1]


def _bias(graph, output):
  """(the bias constant, the Add's output) when `output`'s only reader adds a float constant to
  it (ONNX Runtime then fuses the Add into the quantized MatMul), else (None, `output`)."""
  readers = graph.readers.get(output, [])
  if len(readers) != 1 or output in graph.outputs:
    return None, output
  add = graph.nodes[readers[0]]
  other = [name for name in add.input if name != output]
  if add.op_type != "Add" or len(other) != 1 or other[0] not in graph.constants:
    return None, output
  bias = graph.value(other[0])
  return (bias, add.output[0]) if bias.dtype == np.float32 else (None, output)


def _run(model, names, feeds):
  """`model` run on `feeds` by `albert_tf.export.onnx.session`, with the computed tensors
  `names` added to its outputs: {name: value} of those and of its own outputs."""
  from albert_tf.export.onnx import session  # pylint: disable=g-import-not-at-top
  exposed = onnx.ModelProto()
  exposed.CopyFrom(model)
  known = {o.name for o in model.graph.output} | set(feeds)
  for name in dict.fromkeys(names):
    if name not in known:
      exposed.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT,
                                                                     None))
  runner = session(exposed.SerializeToString())
  outputs = [o.name for o in runner.get_outputs()]
  return dict(feeds, **dict(zip(outputs, runner.run(outputs, feeds))))


def check_onnx_int8(int8_file, float_file, feeds):
  """Asserts that `int8_file` is `float_file` quantized by the scheme above, run on `feeds`
  (input name -> array): see the module's doc. Returns {"MatMul": the quantized MatMuls checked,
  "Gather": the quantized Gathers checked}."""
  from conftest import float32_atol  # pylint: disable=g-import-not-at-top
  model = onnx.load(int8_file)
  int8 = _Graph(model)
  correspondence = _Correspondence(int8, _Graph(onnx.load(float_file)))
  correspondence.walk()
  checked = {"MatMul": 0, "Gather": 0}
  saturate = sums_may_saturate()
  plans = []
  for kind, index, details in correspondence.layers:
    output = int8.nodes[index].output[0]
    if kind == "MatMul":
      bias, output = _bias(int8, output)
      plans.append((kind, output, details[0], (int8.value(details[1]), int8.value(details[2]),
                                               bias)))
    else:
      plans.append((kind, output, details[0], tuple(int8.value(n) for n in details[1:4])
                    + (details[4],)))
  values = _run(model, [name for plan in plans for name in plan[1:3]], feeds)
  plain = _run(model, [], feeds)
  for name in int8.outputs:  # the added outputs leave the file's computation as it was
    np.testing.assert_array_equal(values[name], plain[name], err_msg=name)
  for kind, output, source, arguments in plans:
    got = values[output]
    if kind == "Gather":
      table, scale, zero, axis = arguments
      rows = np.take(table, values[source], axis=axis).astype(np.int32) - np.int32(zero)
      # q - zero is exact in float32, and its product with the scale rounds once: no tolerance.
      np.testing.assert_array_equal(got, rows.astype(np.float32) * scale, err_msg=output)
    else:
      weights, weight_scale, bias = arguments
      errors = []
      for products, want, slack in quantized_matmul(values[source], weights, weight_scale, bias,
                                                    saturate):
        # In float32 the int32 sum's conversion (exact below 2**24), the two scales' product (or
        # a product with each in turn), the scaled sum and the bias's sum each round once: 4.
        atol = float32_atol(np.concatenate([products.ravel(), want.ravel()]), terms=4)
        error = np.abs(got.reshape(want.shape) - want)
        errors.append(float(np.max(error - slack)))
        if np.all(error <= atol + slack):
          break
      else:
        raise AssertionError(f"quantized MatMul {output}: off the reference by up to "
                             f"{min(errors):.3g} beyond its ambiguous roundings (atol {atol:.3g})")
    checked[kind] += 1
  return checked
