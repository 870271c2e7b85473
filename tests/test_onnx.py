"""ONNX exports in ONNX Runtime: dynamic batch and length, the SavedModel's outputs, every task.

Converted in-process from tiny models (configs/tiny.json: 2 applications of one shared block,
max_position_embeddings raised to 144), each once per module.
"""

import numpy as np
import onnx
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, save_tf1_checkpoint
from albert_tf.cli.runs import run_classifier
from albert_tf.export.bundle import export_bundle
from albert_tf.export.onnx import (OPSET, export_encoder_onnx, quantize_dynamic, run_onnx,
                                   session)
from albert_tf.export.onnx_requests import RequestError
from albert_tf.export.tasks import export_task_onnx
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.classification import ClassifierOptions
from conftest import ROOT, float32_atol, randomised
from fake_quant_onnx import check_onnx_int8

# configs/tiny.json with room for 144 positions, so that the length of 128 is tested too.
CONFIG = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
    max_position_embeddings=144)
MAX = CONFIG.max_position_embeddings
# (batch, seq): one token, odd sizes, a batch of 128, length 128, and the longest rows the
# model takes.
SHAPES = ((1, 1), (7, 7), (128, 7), (2, 128), (1, MAX), (3, MAX))


def ids(batch, seq, seed=0, vocab=CONFIG.vocab_size):
  """int32 numpy inputs: random lengths (the first row full), padding masked, two segments."""
  rng = np.random.default_rng(seed)
  lengths = np.concatenate([[seq], rng.integers(1, seq + 1, size=batch - 1)])
  mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  return {"input_word_ids": (rng.integers(5, vocab, size=(batch, seq)) * mask).astype(np.int32),
          "input_mask": mask,
          "input_type_ids": ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask
                             ).astype(np.int32)}


@pytest.fixture(scope="module")
def encoder_files(tmp_path_factory):
  """A randomised tiny pretrainer's bundle (export_savedmodel.py --onnx: the encoder SavedModel
  and encoder.onnx, from its original-format checkpoint) and an int8 ONNX file of it."""
  folder = tmp_path_factory.mktemp("onnx")
  model = randomised(AlbertPretrainer(CONFIG), seed=46)
  config = str(folder / "albert_config.json")
  model.config.to_json_file(config)
  checkpoint = save_tf1_checkpoint(model, str(folder / "tf1" / "model.ckpt"))
  bundle = export_bundle(config, checkpoint, str(folder / "bundle"), max_seq_length=MAX,
                         onnx=True)
  saved = tf.saved_model.load(bundle["encoder"])
  paths = {False: bundle["onnx"], True: str(folder / "encoder-int8.onnx")}
  export_encoder_onnx(model, paths[True], quantize=True)
  return model, saved, paths


def test_encoder_onnx_equals_the_savedmodel_at_any_batch_and_length(encoder_files):
  """Dynamic batch and length: tf2onnx once folded the attention's head split onto the dense
  layers' 2-D products, and ONNX Runtime then failed at every shape (attention.py)."""
  _, saved, paths = encoder_files
  runner = session(paths[False])
  for dim in runner.get_inputs()[0].shape:  # symbolic, not the traced sizes
    assert isinstance(dim, str)
  for batch, seq in SHAPES:
    x = ids(batch, seq, seed=batch + seq)
    got = run_onnx(runner, x)
    want = saved.signatures["lean"](**{k: tf.constant(v) for k, v in x.items()})
    for name in ("pooled_output", "sequence_output"):
      assert got[name].shape == want[name].shape, (name, batch, seq)
      # float32 rounding: ONNX Runtime's kernels sum in other orders than TensorFlow's; the
      # longest chain of sums is a layer's intermediate_size products, applied per layer.
      terms = CONFIG.intermediate_size * CONFIG.num_hidden_layers
      np.testing.assert_allclose(got[name], want[name].numpy(), rtol=0,
                                 atol=float32_atol(want[name], terms), err_msg=f"{batch}x{seq}")


def test_encoder_onnx_states_its_opset_and_stores_the_shared_block_once(encoder_files):
  model, _, paths = encoder_files
  proto = onnx.load(paths[False])
  assert {o.domain: o.version for o in proto.opset_import}[""] == OPSET
  weights = sum(np.prod(t.dims) for t in proto.graph.initializer if t.data_type == 1)
  encoder = model.encoder.count_params()  # Keras counts a shared variable once
  block = sum(int(np.prod(v.shape)) for v in model.encoder.blocks[0].variables)
  # Every weight once: a second copy of the block (applied twice) would add `block` floats.
  assert encoder <= weights < encoder + block // 2


def test_int8_encoder_onnx_is_a_quarter_of_the_size_and_its_float_twin_quantized(encoder_files):
  """The int8 file is a quarter of the float32 one's size, and is that file quantized by
  ONNX Runtime's dynamic scheme, layer by layer (tests/fake_quant_onnx.py: every quantized
  weight the reference's quantization of its float twin, every quantized layer's output the
  reference's from its own input): no end-to-end tolerance, none fitted."""
  model, _, paths = encoder_files
  sizes = {q: tf.io.gfile.stat(p).length for q, p in paths.items()}
  assert sizes[False] > 4 * model.encoder.count_params()
  assert sizes[True] < 0.3 * sizes[False]
  # The 8 dense kernels become int8: the embedding projection, the shared block's query, key,
  # value, attention output, intermediate and output (applied once per layer: 6 x 2) and the
  # pooler, 14 quantized MatMuls; the word and token-type tables become uint8, 2 Gathers. The
  # attention's two products of activations and the sliced position table stay float32.
  checked = check_onnx_int8(paths[True], paths[False], ids(4, 16, seed=2))
  assert checked == {"MatMul": 2 + 6 * CONFIG.num_hidden_layers, "Gather": 2}


def test_the_int8_reference_rounds_ties_as_onnx_runtimes_quantizer(tmp_path):
  """A table and a kernel that ONNX Runtime's quantizer divides by a scale of exactly 1 (the
  table's range is 255, the kernel's largest magnitude 127), so that halves are ties: they go
  to even, as in the reference (tests/fake_quant_onnx.py). The encoder's random weights happen
  to meet none."""
  table = np.array([[-100, 155, 0.5, 1.5], [2.5, -0.5, -1.5, -2.5], [3.5, 10.5, -98.5, 154.5],
                    [0, 1, -1, 7.25], [20.5, -20.5, 33.5, -33.5]], np.float32)
  kernel = np.array([[127, 0.5, 1.5], [2.5, -0.5, -1.5], [-2.5, 3.5, 64.5], [-127, 10.5, 0]],
                    np.float32)
  helper = onnx.helper
  graph = helper.make_graph(
      [helper.make_node("Gather", ["table", "ids"], ["rows"]),
       # (a MatMul reading the Gather's output itself would take its uint8 rows as they are)
       helper.make_node("Add", ["rows", "offset"], ["summed"]),
       helper.make_node("MatMul", ["summed", "kernel"], ["products"]),
       helper.make_node("Add", ["products", "bias"], ["outputs"])], "ties",
      [helper.make_tensor_value_info("ids", onnx.TensorProto.INT32, [None])],
      [helper.make_tensor_value_info("outputs", onnx.TensorProto.FLOAT, [None, 3])],
      [onnx.numpy_helper.from_array(value, name) for name, value in
       (("table", table), ("offset", np.float32([0.75, -1, 0, 2])), ("kernel", kernel),
        ("bias", np.float32([0.25, -0.5, 1])))])
  model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
  paths = {q: str(tmp_path / f"{q}.onnx") for q in ("float32", "int8")}
  onnx.save(model, paths["float32"])
  onnx.save(quantize_dynamic(model), paths["int8"])
  feeds = {"ids": np.array([0, 1, 2, 3, 4, 2], np.int32)}
  assert check_onnx_int8(paths["int8"], paths["float32"], feeds) == {"MatMul": 1, "Gather": 1}


def _unchecked(runner, x):
  """ONNX Runtime's own answer to `x`, without run_onnx's request checks."""
  return dict(zip([o.name for o in runner.get_outputs()], runner.run(None, x)))


def test_onnx_runtime_alone_reads_negative_ids_and_names_graph_nodes(encoder_files):
  """Why run_onnx checks requests itself (docs/onnx.md): in ONNX Runtime an id past the
  vocabulary (or type vocabulary) is an error of an embedding Gather, and a row past
  max_position_embeddings one of the embeddings' Add; a negative id is a valid Gather index
  (counted from the end) and silently reads another token's embedding."""
  _, _, paths = encoder_files
  runner = session(paths[False])
  x = ids(2, 5)
  too_big = dict(x, input_word_ids=np.where(x["input_mask"] > 0, CONFIG.vocab_size, 0)
                 .astype(np.int32))
  with pytest.raises(Exception, match="Gather.*out of data bounds"):
    _unchecked(runner, too_big)
  with pytest.raises(Exception, match="Gather.*out of data bounds"):
    _unchecked(runner, dict(x, input_type_ids=np.full_like(x["input_type_ids"], 2)))
  with pytest.raises(Exception, match="broadcast"):
    _unchecked(runner, ids(1, MAX + 1))
  negative = dict(x, input_word_ids=np.full_like(x["input_word_ids"], -1))
  last = dict(x, input_word_ids=np.full_like(x["input_word_ids"], CONFIG.vocab_size - 1))
  np.testing.assert_array_equal(_unchecked(runner, negative)["pooled_output"],
                                _unchecked(runner, last)["pooled_output"])


def test_the_onnx_file_records_the_models_limits_and_what_each_input_takes(encoder_files):
  """The limits run_onnx checks against travel in the file (metadata_props), int8 or not (ONNX
  Runtime's quantizer adds its own key, `onnx.infer`)."""
  for path in encoder_files[2].values():
    metadata = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert metadata.items() >= {
        "vocab_size": str(CONFIG.vocab_size), "type_vocab_size": "2",
        "max_position_embeddings": str(MAX),
        "input_word_ids": f"int32 [batch, seq]: word ids in [0, {CONFIG.vocab_size}) "
                          "(vocab_size)",
        "input_mask": "int32 [batch, seq]: mask values in [0, 2)",
        "input_type_ids": "int32 [batch, seq]: segment ids in [0, 2) (type_vocab_size)",
    }.items(), path


def _with(name, value):
  """A valid 2x5 request with `name` replaced by `value` (None: left out)."""
  x = ids(2, 5)
  if value is None:
    del x[name]
  else:
    x[name] = value
  return x


V = CONFIG.vocab_size
# case -> (request, the RequestError's message): the SavedModels' words (export/requests.py),
# each naming the input, the fault and the limit.
BAD_REQUESTS = {
    "negative_word_id": (
        _with("input_word_ids", np.full((2, 5), -1, np.int32)),
        rf"input_word_ids holds -1 at \[0 0\]; word ids must be in \[0, {V}\) \(vocab_size\)"),
    "word_id_past_the_vocabulary": (
        _with("input_word_ids", np.pad(np.full((2, 4), 7, np.int32), [(0, 0), (0, 1)],
                                       constant_values=V)),
        rf"input_word_ids holds {V} at \[0 4\]; word ids must be in \[0, {V}\) "
        r"\(vocab_size\)"),
    "type_id_past_type_vocab_size": (
        _with("input_type_ids", np.full((2, 5), 2, np.int32)),
        r"input_type_ids holds 2 at \[0 0\]; segment ids must be in \[0, 2\) "
        r"\(type_vocab_size\)"),
    "mask_value_2": (
        _with("input_mask", np.array([[1, 2, 1, 1, 0], [1, 1, 1, 0, 0]], np.int32)),
        r"input_mask holds 2 at \[0 1\]; mask values must be in \[0, 2\)"),
    "rows_past_max_position_embeddings": (
        ids(1, MAX + 1),
        rf"input_word_ids has {MAX + 1} columns; this model reads 1 to {MAX} tokens per row "
        r"\(max_position_embeddings\)"),
    "no_columns": (
        ids(2, 5) | {k: np.zeros((2, 0), np.int32) for k in ids(2, 5)},
        rf"input_word_ids has 0 columns; this model reads 1 to {MAX} tokens per row"),
    "mask_of_another_length": (
        _with("input_mask", np.ones((2, 4), np.int32)),
        r"input_mask has shape \[2 4\] but input_word_ids has \[2 5\]"),
    "float_ids": (
        _with("input_word_ids", np.ones((2, 5), np.float32)),
        r"input_word_ids has dtype float32; this model takes int32 \[batch, seq\]"),
    "rank_1_ids": (
        _with("input_type_ids", np.zeros(5, np.int32)),
        r"input_type_ids has rank 1 \(shape \[5\]\); this model takes int32 \[batch, seq\] "
        r"\(rank 2\)"),
    "missing_input": (
        _with("input_mask", None),
        "input_mask is missing; this model takes input_word_ids, input_mask, input_type_ids"),
    "unknown_input": (
        ids(2, 5) | {"token_type_ids": np.zeros((2, 5), np.int32)},
        "token_type_ids is not an input of this model; it takes input_word_ids, input_mask, "
        "input_type_ids"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_run_onnx_refuses_a_bad_request_naming_the_input_the_fault_and_the_limit(
    encoder_files, case):
  """Before ONNX Runtime runs: it would wrap a negative id, take any mask value, and name graph
  nodes (or nothing) for the rest."""
  request, message = BAD_REQUESTS[case]
  with pytest.raises(RequestError, match=f"^{message}"):
    run_onnx(encoder_files[2][False], request)


def test_run_onnx_gives_onnx_runtimes_outputs_for_a_valid_request(encoder_files):
  runner = session(encoder_files[2][False])
  x = ids(3, 9, seed=5)
  got, want = run_onnx(runner, x), _unchecked(runner, x)
  assert set(got) == set(want)
  for name, value in want.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_run_onnx_takes_numpys_default_int64_ids_as_int32(encoder_files):
  """ONNX Runtime alone refuses int64 for an int32 input ("Unexpected input data type")."""
  runner = session(encoder_files[2][False])
  x = ids(3, 9, seed=5)
  wide = {k: v.astype(np.int64) for k, v in x.items()}
  lists = {k: v.tolist() for k, v in x.items()}  # numpy makes int64 of Python ints too
  for request in (wide, lists):
    got = run_onnx(runner, request)
    np.testing.assert_array_equal(got["pooled_output"], _unchecked(runner, x)["pooled_output"])
  # A value int32 cannot hold is refused by the vocabulary's bound, never wrapped.
  with pytest.raises(RequestError, match=rf"holds {2**32} at \[0 0\]; word ids must be in"):
    run_onnx(runner, dict(wide, input_word_ids=np.full((3, 9), 2**32)))


def test_an_onnx_file_without_recorded_limits_runs_with_the_checks_that_need_none(
    encoder_files, tmp_path):
  """Files written before the limits were recorded: what needs no limit is still refused (a
  negative id, a mask of 2, another shape), an id past the vocabulary is left to ONNX Runtime,
  which fails on it (no wrong outputs), and a valid request is answered."""
  proto = onnx.load(encoder_files[2][False])
  del proto.metadata_props[:]
  old = str(tmp_path / "old.onnx")
  onnx.save(proto, old)
  runner = session(old)
  x = ids(2, 5)
  np.testing.assert_array_equal(run_onnx(runner, x)["pooled_output"],
                                run_onnx(encoder_files[2][False], x)["pooled_output"])
  for case in ("negative_word_id", "mask_value_2", "mask_of_another_length", "no_columns"):
    request, _ = BAD_REQUESTS[case]
    with pytest.raises(RequestError):
      run_onnx(runner, request)
  with pytest.raises(RequestError, match=r"word ids must be in \[0, 2147483648\) \(int32; "
                                         r"this file does not record vocab_size\)"):
    run_onnx(runner, _with("input_word_ids", np.full((2, 5), -1)))
  request, _ = BAD_REQUESTS["word_id_past_the_vocabulary"]
  with pytest.raises(Exception, match="Gather.*out of data bounds"):
    run_onnx(runner, request)


TASK_MODELS = {  # a tiny model of each task kind
    "classifier": lambda: AlbertClassifier(CONFIG, num_labels=3),
    "squad": lambda: AlbertSquad(CONFIG),
    "multiple_choice": lambda: AlbertMultipleChoice(CONFIG).build_for(4),
    "ner": lambda: AlbertTokenClassifier(CONFIG, ["O", "B-PER", "I-PER"], use_crf=True),
}


def _task_inputs(kind, batch, seq, seed):
  x = ids(batch, seq, seed)
  if kind == "multiple_choice":  # [batch, choices, seq]: 4 choices of each row
    return {k: np.stack([np.roll(v, c, axis=0) for c in range(4)], axis=1) for k, v in x.items()}
  if kind == "ner":  # the first piece of each of the row's words
    positions = np.sort(np.random.default_rng(seed).integers(0, seq, size=(batch, 3)), -1)
    return dict(x, word_positions=positions.astype(np.int32))
  return x


@pytest.mark.parametrize("kind", sorted(TASK_MODELS))
def test_every_task_model_runs_in_onnx_runtime_with_the_keras_models_outputs(kind, tmp_path):
  model = randomised(TASK_MODELS[kind](), seed=7)
  path = export_task_onnx(kind, model, str(tmp_path))
  assert path == str(tmp_path / f"{kind}.onnx")
  runner = session(path)
  for batch, seq in ((1, 1), (5, 9), (2, MAX)):
    x = _task_inputs(kind, batch, seq, seed=seq)
    got = run_onnx(runner, x)
    want = model({k: tf.constant(v) for k, v in x.items()}, training=False)
    want = want if isinstance(want, dict) else {"emissions" if kind == "ner" else "logits": want}
    assert set(got) == set(want)
    # The encoder's chain (the E-term projection, per layer a sum over I and one over H), then
    # at most two heads' sums over H.
    terms = (CONFIG.embedding_size + CONFIG.num_hidden_layers * (CONFIG.intermediate_size
                                                                 + CONFIG.hidden_size)
             + 2 * CONFIG.hidden_size)
    for name, value in want.items():
      np.testing.assert_allclose(got[name], value.numpy(), rtol=0,
                                 atol=float32_atol(value, terms),
                                 err_msg=f"{kind} {name} {batch}x{seq}")
  # Each file carries its limits, and run_onnx refuses what the task's SavedModel would.
  metadata = {p.key: p.value for p in onnx.load(path).metadata_props}
  assert metadata["max_position_embeddings"] == str(MAX)
  x = _task_inputs(kind, 2, 5, seed=1)
  with pytest.raises(RequestError, match=r"^input_word_ids holds -1 at .*\(vocab_size\)"):
    run_onnx(runner, dict(x, input_word_ids=np.full_like(x["input_word_ids"], -1)))
  if kind == "multiple_choice":
    assert metadata["input_mask"] == "int32 [batch, choices, seq]: mask values in [0, 2)"
    with pytest.raises(RequestError, match=r"takes int32 \[batch, choices, seq\] \(rank 3\)"):
      run_onnx(runner, ids(2, 5))
  if kind == "ner":  # each word's first piece lies inside its row
    assert metadata["word_positions"] == "int32 [batch, words]: word positions in [0, seq)"
    with pytest.raises(RequestError, match=r"^word_positions holds 5 at \[0 0\]; word "
                                           r"positions must be in \[0, 5\)"):
      run_onnx(runner, dict(x, word_positions=np.full_like(x["word_positions"], 5)))


def test_onnx_export_refuses_what_cannot_work_before_any_work(tmp_path):
  """--onnx of a bfloat16 (or float16) model, or a task's without --export_dir, is refused
  with the reason, before the config, checkpoint, data or folder is read (none exists here)."""
  missing = str(tmp_path / "nothing")
  for dtype, reason in (("bfloat16", "cannot work"), ("float16", "float32")):
    for flag in ("onnx", "onnx_quantize"):
      with pytest.raises(ValueError, match=reason):
        export_bundle(missing, missing, str(tmp_path / "out"), serving_dtype=dtype,
                      **{flag: True})
  assert not (tmp_path / "out").exists()
  # A task script's --onnx: beside --export_dir's SavedModel, of a float32 model.
  with pytest.raises(ValueError, match="give --export_dir"):
    run_classifier(ClassifierOptions(do_train=True, onnx=True))
  with pytest.raises(ValueError, match="--mixed_precision=bfloat16 cannot work"):
    run_classifier(ClassifierOptions(do_train=True, onnx_quantize=True, export_dir=missing,
                                     mixed_precision="bfloat16"))
