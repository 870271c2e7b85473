"""ONNX files of the encoder and the task models, for ONNX Runtime: token ids in, batch and
sequence length dynamic.

  export_encoder_onnx(pretrainer, "encoder.onnx")
  outputs = run_onnx("encoder.onnx", {"input_word_ids": ids, "input_mask": mask,
                                      "input_type_ids": types})  # numpy, by output name

The file is tf2onnx's conversion of the same Keras model the SavedModels serve, traced with
every input `[None, None]` (ONNX's dimensions `unk__*`, any size at run time) at opset
`OPSET`. The weights become initializers; a shared block's weights are one initializer each
however many layers apply them, so an ALBERT-base file is its 11.7M parameters' 47 MB.

What the SavedModels do that an ONNX file does not: tokenization (ONNX Runtime gets token ids,
as TFLite does: `preprocessing/`, or the task SavedModel's raw-text signatures, do the
tokenizing, packing, windowing and answer decoding). Request checks are `run_onnx`'s, in
Python before the session runs (onnx_requests.py: ONNX Runtime itself would read a negative id
counted from the end, and name graph nodes for the faults it catches), against the limits the
export writes into the file's metadata (vocab_size, type_vocab_size, max_position_embeddings).

`quantize=True` is ONNX Runtime's dynamic quantization (`quantize_dynamic`, int8 weights of
every MatMul and Gather, activations quantized per call, no calibration data).
"""

import os
import tempfile

import tensorflow as tf

from albert_tf import files
from albert_tf.export.onnx_requests import check_request, request_metadata
from albert_tf.modeling.activations import plain_activations
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.token_classifier import WORD_POSITIONS

# The ONNX opset the files are written in (their opset_import says it): tf2onnx 1.17 writes it
# and ONNX Runtime 1.32 runs it (tests/test_onnx.py); 17 has been in ONNX since 1.12 (2022).
OPSET = 17


def check_onnx_options(serving_dtype="float32", flag="--serving_dtype"):
  """Refuses, before any work, an ONNX export of a model that computes in another dtype than
  float32 (`serving_dtype`, named by `flag` in the message), saying why.

  bfloat16: ONNX Runtime's CPU provider has no bfloat16 MatMul, and it refuses to load
  tf2onnx's conversion of a mixed_bfloat16 model at all (a float16 and a bfloat16 operand
  meet in the embeddings' Add). float16: the converted mixed_float16 graph is not checked here
  against the float32 outputs; ONNX Runtime's own float16 conversion of the float32 file is
  the path it supports for GPUs (docs/onnx.md). (`--jit_compile` is not refused: it compiles
  the SavedModel's signatures only; the ONNX file is converted from the Keras model.)
  """
  if serving_dtype == "bfloat16":
    raise ValueError(f"--onnx with {flag}=bfloat16 cannot work: ONNX Runtime has no bfloat16 "
                     "matrix products on CPUs and does not load the converted mixed-bfloat16 "
                     f"graph; export the ONNX file with {flag}=float32")
  if serving_dtype == "float16":
    raise ValueError(f"--onnx with {flag}=float16: the ONNX file is written in float32; for "
                     "float16 on a GPU convert it with ONNX Runtime's float16 converter "
                     f"(docs/onnx.md), and give {flag}=float32 here")


def id_specs(*names, rank=2):
  """int32 `[None] * rank` TensorSpecs named `names` (default: the encoder's three inputs)."""
  return [tf.TensorSpec([None] * rank, tf.int32, name=name) for name in names or INPUT_NAMES]


def _float32(outputs):
  return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}


def encoder_computation(pretrainer):
  """The encoder's `lean` outputs: pooled_output `[batch, hidden]`, sequence_output
  `[batch, seq, hidden]` (the per-layer `encoder_outputs` of `serving_default` are left out:
  a copy of every layer's activations that ONNX users rarely want)."""
  encoder = pretrainer.encoder

  def compute(inputs):
    outputs = encoder(inputs, training=False)
    return _float32({k: outputs[k] for k in ("pooled_output", "sequence_output")})
  return compute


def export_encoder_onnx(pretrainer, onnx_file, quantize=False):
  """Writes the encoder of `pretrainer` as `onnx_file` (`encoder_computation`'s outputs, the
  three id inputs); returns its size in bytes."""
  return export_onnx(encoder_computation(pretrainer), onnx_file, id_specs(), quantize=quantize,
                     config=pretrainer.config)


def _named(name, model):
  """The model's single output as `{name: float32}`; a model with a dict of outputs (SQuAD's)
  keeps its names."""
  def compute(inputs):
    outputs = model(inputs, training=False)
    return _float32(outputs if isinstance(outputs, dict) else {name: outputs})
  return compute


def task_computation(kind, model):
  """`(compute, specs)` of a task model for `export_onnx`: token ids in, the Keras model's
  outputs (float32) out.

  classifier: the three inputs `[batch, seq]` -> logits `[batch, labels]` (`[batch]` for
  regression). squad: -> start_logits, end_logits `[batch, seq]` (v1); v2 also takes
  `p_mask` `[batch, seq]` and returns its beam's top log-probabilities and indices and
  cls_logits. multiple_choice: the three inputs `[batch, choices, seq]` -> logits
  `[batch, choices]`. ner: the three inputs plus `word_positions` `[batch, words]` ->
  emissions `[batch, words, labels]` (a CRF's Viterbi decoding is the client's).
  """
  if kind == "classifier":
    return _named("logits", model), id_specs()
  if kind == "squad":
    extra = ("p_mask",) if model.version_2 else ()
    return _named(None, model), id_specs(*INPUT_NAMES, *extra)
  if kind == "multiple_choice":
    return _named("logits", model), id_specs(rank=3)
  if kind == "ner":
    return _named("emissions", model), id_specs(*INPUT_NAMES, WORD_POSITIONS)
  raise ValueError(f"no ONNX export for a {kind!r} model")


def _convert(compute, specs):
  """The ONNX ModelProto of `compute` (a dict of the `specs`' inputs -> a dict of tensors)."""
  import tf2onnx  # pylint: disable=g-import-not-at-top  (only exports with --onnx need it)

  names = [spec.name for spec in specs]

  @tf.function(input_signature=specs)
  def function(*tensors):
    return compute(dict(zip(names, tensors)))

  with plain_activations():  # the plain GELU, LayerNorm and softmax, no XLA islands
    model, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=OPSET)
  return model


def quantize_dynamic(model):
  """The ModelProto with ONNX Runtime's dynamic int8 quantization (see the module doc)."""
  import onnx  # pylint: disable=g-import-not-at-top
  from onnxruntime.quantization import QuantType  # pylint: disable=g-import-not-at-top
  from onnxruntime.quantization import quantize_dynamic as quantize  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    source, target = os.path.join(tmp, "float32.onnx"), os.path.join(tmp, "int8.onnx")
    onnx.save(model, source)
    quantize(source, target, weight_type=QuantType.QInt8)
    return onnx.load(target)


def export_onnx(compute, onnx_file, specs, quantize=False, config=None):
  """Writes `compute` (a dict of int32 inputs named by `specs` -> a dict of float32 tensors)
  as an ONNX file, which appears only whole; returns its size in bytes.

  `quantize`: ONNX Runtime's dynamic int8 quantization of the weights (module doc). `config`:
  the model's AlbertConfig, whose limits (and what each input takes) go into the file's
  metadata_props for `run_onnx`'s request checks (onnx_requests.py); without it they are not
  recorded and `run_onnx` checks only what needs no limit.
  """
  model = _convert(compute, specs)
  if quantize:
    model = quantize_dynamic(model)
  if config is not None:  # after quantizing: its own save and load is not asked to keep them
    for key, value in request_metadata(config, specs).items():
      model.metadata_props.add(key=key, value=value)
  data = model.SerializeToString()
  files.write_bytes(onnx_file, data)
  return len(data)


def session(onnx_file, optimization="all", threads=0, spinning=True):
  """An ONNX Runtime CPU session of `onnx_file`. `optimization`: ONNX Runtime's graph
  optimisation level ("disable", "basic", "extended", "all"; "all" is its default);
  `threads`: intra-op threads (0: ONNX Runtime's choice, one per core); `spinning=False`: its
  idle threads sleep instead of spinning between ops (`session.intra_op.allow_spinning`),
  which costs a wake-up per op on an idle machine and saves spinning against other processes
  on a shared one (BENCHMARKS.md)."""
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  options = ort.SessionOptions()
  options.graph_optimization_level = {
      "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
      "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
      "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
      "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[optimization]
  options.intra_op_num_threads = threads
  options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
  return ort.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])


def run_onnx(onnx_file_or_session, inputs):
  """Runs an ONNX file (or a `session`) on a dict of numpy arrays; returns `{name: array}`.

  The request is checked first, as the SavedModels check theirs (onnx_requests.py's
  `check_request`): a fault is a `RequestError` (a ValueError) naming the input, the fault and
  the limit, and ONNX Runtime does not run. Integer arrays of any dtype (numpy's default int64)
  are converted to the file's int32 once their values are known to fit.
  """
  runner = (onnx_file_or_session if not isinstance(onnx_file_or_session, (str, os.PathLike))
            else session(os.fspath(onnx_file_or_session)))
  inputs = check_request(runner, inputs)
  names = [output.name for output in runner.get_outputs()]
  return dict(zip(names, runner.run(names, inputs)))
