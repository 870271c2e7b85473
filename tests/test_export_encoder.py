"""The encoder SavedModel: signatures, equality with the checkpoint, hub fine-tuning, TFLite."""

import gc
import logging
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint, save_tf1_checkpoint
from albert_tf.export.bundle import export_bundle
from albert_tf.export.encoder import export_encoder, export_tflite
from albert_tf.export.onnx import run_onnx
from albert_tf.interop.checkpoints import native_checkpoint
from albert_tf.interop.saved_models import load_saved_model, registered_gradients
from conftest import (ROOT, SHARED_DATA, encode_with_masks_python, float32_atol,
                      sentence_embeddings_python)
from serving_requests import assert_rejected

SEQ = 16
# The `exported` model: tiny.json with 2 groups of 2 inner blocks, 2 layers: 4 block uses.
BLOCKS, E, H, I = 4, 16, 32, 64
# The longest chain of additions behind an output: the E-term embedding projection, per block
# use a sum over I (FFN output) and over H (attention output, FFN input), then the pooler's or
# the MLM transform's H and the logits' E.
TERMS = E + BLOCKS * (I + H) + H + E


def assert_float32_close(got, want, terms=TERMS, err_msg=""):
  """`got` from another graph or kernel library than `want` (a SavedModel, TFLite, ONNX, XLA):
  float32 rounding of `terms` additions at the scale of `want`."""
  want = np.asarray(want)
  np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=float32_atol(want, terms),
                             err_msg=err_msg)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """A model loaded from an original-format checkpoint and its export."""
  folder = tmp_path_factory.mktemp("export")
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      num_hidden_groups=2, inner_group_num=2, num_hidden_layers=2)
  source = AlbertPretrainer(config)
  for variable in source.trainable_variables:  # non-trivial values everywhere
    variable.assign(tf.random.stateless_normal(variable.shape, [1, len(variable.name)]) * 0.1
                    + (1.0 if "gamma" in variable.name else 0.0))
  prefix = save_tf1_checkpoint(source, str(folder / "tf1" / "model.ckpt"))
  model = AlbertPretrainer(config)
  load_checkpoint(model, prefix)
  export_dir = export_encoder(model, str(folder / "encoder"))
  return model, export_dir, folder


def inputs(batch=3, seq=SEQ, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, seq + 1, size=batch)
  mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, 30000, size=(batch, seq)).astype(np.int32) * mask
  types = ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
  return {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
          "input_type_ids": tf.constant(types)}


def test_serving_and_mlm_signatures_match_the_checkpoint_model(exported):
  model, export_dir, _ = exported
  loaded = load_saved_model(export_dir)
  assert set(loaded.signatures) == {"serving_default", "mlm", "lean"}
  # Training steps use an XLA-compiled GELU; a served model must not need XLA anywhere.
  assert b"_XlaMustCompile" not in (pathlib.Path(export_dir) / "saved_model.pb").read_bytes()
  x = inputs()
  got = loaded.signatures["serving_default"](**x)
  want = model.encoder(x, training=False)
  assert_float32_close(got["pooled_output"], want["pooled_output"])
  assert_float32_close(got["sequence_output"], want["sequence_output"])
  assert got["encoder_outputs"].shape == (3, 4, SEQ, 32)  # [batch, L * K, seq, hidden]
  for i, layer_output in enumerate(want["encoder_outputs"]):
    assert_float32_close(got["encoder_outputs"][:, i], layer_output)
  # `lean` returns the same two outputs and nothing else (no stacked copy of every layer).
  lean = loaded.signatures["lean"](**x)
  assert set(lean) == {"pooled_output", "sequence_output"}
  for key in lean:
    np.testing.assert_array_equal(lean[key], got[key])
  positions = tf.constant([[1, 2], [0, 3], [2, 2]], tf.int32)
  mlm = loaded.signatures["mlm"](masked_lm_positions=positions, **x)
  expected = model(dict(x, masked_lm_positions=positions), training=False)["mlm_logits"]
  assert_float32_close(mlm["mlm_logits"], expected)


def test_export_reloads_as_a_trainable_keras_layer_for_fine_tuning(exported):
  import tensorflow_hub as hub
  model, export_dir, _ = exported
  layer = hub.KerasLayer(load_saved_model(export_dir), trainable=True)
  x = inputs(seed=1)
  assert_float32_close(layer(x)["pooled_output"],
                       model.encoder(x, training=False)["pooled_output"])
  assert len(layer.trainable_weights) == len(model.encoder.trainable_weights)
  dropped = layer(x, training=True)["pooled_output"]  # tiny.json has dropout 0.1
  assert np.abs(dropped - layer(x, training=False)["pooled_output"]).max() > 1e-4
  head = tf_keras.layers.Dense(2)
  optimizer = tf_keras.optimizers.SGD(0.1)
  before = [w.numpy() for w in layer.trainable_weights]
  with tf.GradientTape() as tape:
    logits = head(layer(x, training=True)["pooled_output"])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits([0, 1, 0], logits))
  variables = layer.trainable_weights + head.trainable_weights
  optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
  changed = sum(not np.array_equal(b, w.numpy()) for b, w in zip(before,
                                                                 layer.trainable_weights))
  assert changed > len(before) // 2


def test_load_saved_model_releases_a_dropped_exports_gradients_and_keeps_a_live_ones(exported):
  """TensorFlow's global gradient registry would hold every loaded encoder's custom-gradient
  functions for good (about 60 MB per load of this tiny one); `load_saved_model` removes those
  of an object that is gone, and an encoder still alive keeps the gradients of the checkpoint
  model."""
  import tensorflow_hub as hub
  model, export_dir, _ = exported
  before = registered_gradients()
  dropped = load_saved_model(export_dir)
  one_load = registered_gradients() - before
  assert one_load > 0  # the encoder export keeps its custom gradients for fine-tuning
  layer = hub.KerasLayer(load_saved_model(export_dir), trainable=True)
  del dropped
  gc.collect()
  assert registered_gradients() - before == one_load
  x = inputs(seed=2)

  def gradients(encoder, variables):
    with tf.GradientTape() as tape:
      outputs = encoder(x, training=False)
      loss = (tf.reduce_sum(outputs["pooled_output"] ** 2)
              + tf.reduce_sum(outputs["sequence_output"] ** 2))
    return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, variables)]

  got = gradients(layer, layer.trainable_weights)
  want = gradients(model.encoder, model.encoder.trainable_weights)
  assert [g.shape for g in got] == [w.shape for w in want]
  # Backward through the same chains again (2 TERMS), then each weight's gradient sums over
  # the batch's 3 * SEQ tokens. A key bias's true gradient is 0 (the softmax ignores a shift of
  # a row's scores): what it has is the rounding of its sums, whose terms are those of the
  # query bias's gradient (dscores times keys rather than queries), at that one's scale.
  want = {v.name: w for v, w in zip(model.encoder.trainable_weights, want)}
  for g, name in zip(got, want):
    scale = want[name.replace("/key/bias", "/query/bias")]
    np.testing.assert_allclose(g, want[name], rtol=0, err_msg=name,
                               atol=float32_atol(scale, 2 * TERMS + 3 * SEQ))


def test_tflite_encoder_matches_the_savedmodel_and_is_small(exported):
  from ai_edge_litert.interpreter import Interpreter
  model, export_dir, folder = exported
  path = str(folder / "encoder.tflite")
  size = export_tflite(export_dir, path, max_seq_length=SEQ)
  params = model.encoder.count_params()
  assert size < 4 * params * 1.2  # float32 weights plus a little graph
  runner = Interpreter(model_path=path).get_signature_runner()
  x = inputs(batch=1, seed=2)
  got = runner(**{k: v.numpy() for k, v in x.items()})
  want = model.encoder(x, training=False)
  # TFLite's fused kernels sum in their own orders.
  assert_float32_close(got["pooled_output"], want["pooled_output"])
  assert_float32_close(got["sequence_output"], want["sequence_output"])


BAD_ENCODER_REQUESTS = [
    # (what changes in a good [1, 3] request, the rule's words)
    (dict(input_mask=[[1, 1]]), r"input_mask has shape \[1 2\] but input_word_ids has \[1 3\]"),
    (dict(input_type_ids=[[0, 0, 0], [0, 0, 0]]),
     r"input_type_ids has shape \[2 3\] but input_word_ids has \[1 3\]"),
    (dict(input_word_ids=[[2, -1, 3]]),
     r"input_word_ids holds -1 at \[0 1\]; word ids must be in \[0, 30000\) \(vocab_size\)"),
    (dict(input_type_ids=[[0, 2, 0]]),
     r"input_type_ids holds 2 at \[0 1\]; segment ids must be in \[0, 2\) \(type_vocab_size\)"),
    (dict(input_mask=[[1, 2, 1]]), r"input_mask holds 2 at \[0 1\]; mask values must be in "
                                   r"\[0, 2\)"),
    ({k: [[1] * 65] for k in ("input_word_ids", "input_mask")} | {"input_type_ids": [[0] * 65]},
     r"input_word_ids has 65 columns; this model reads 1 to 64 tokens per row "
     r"\(max_position_embeddings\)"),
]


@pytest.mark.parametrize("compiled", [False, True], ids=["plain", "xla"])
def test_malformed_encoder_requests_are_invalid_arguments_naming_the_input(
    exported, native_bundle, compiled):
  """Each rule holds in the plain and in the XLA-compiled export (XLA drops Assert ops: the
  checks run outside the compiled function), through the Python and the Session path."""
  export_dir = native_bundle[0]["encoder"] if compiled else exported[1]
  loaded = load_saved_model(export_dir)
  good = {"input_word_ids": [[2, 7, 3]], "input_mask": [[1, 1, 1]],
          "input_type_ids": [[0, 0, 0]]}
  # Compiled: the rules whose breach XLA would not report (its gathers clamp out-of-range ids).
  for change, pattern in BAD_ENCODER_REQUESTS[2:4] if compiled else BAD_ENCODER_REQUESTS:
    assert_rejected(export_dir, loaded, "serving_default", dict(good, **change), pattern)
  for signature in ("lean", "mlm"):  # the same rules, checked by the same wrapper
    change, pattern = BAD_ENCODER_REQUESTS[2]
    request = dict(good, **change)
    if signature == "mlm":
      request["masked_lm_positions"] = [[1]]
    assert_rejected(export_dir, loaded, signature, request, pattern)
  for positions, pattern in [([[3]], r"masked_lm_positions holds 3 at \[0 0\]; positions must "
                                     r"be in \[0, 3\) \(the columns of input_word_ids\)"),
                             ([[0], [1]], "masked_lm_positions has 2 rows but input_word_ids "
                                          "has 1")]:
    assert_rejected(export_dir, loaded, "mlm", dict(good, masked_lm_positions=positions),
                    pattern)


def test_a_damaged_encoder_export_to_start_from_is_named(exported, tmp_path):
  """--albert_hub_module_handle / --init_checkpoint of a SavedModel whose variables or graph
  were cut short: one CheckpointError naming it, not TensorFlow's traceback."""
  model, export_dir, _ = exported
  for damaged_part in ("variables", "graph"):
    copy = tmp_path / damaged_part
    shutil.copytree(export_dir, copy)
    (target,) = (copy / "variables").glob("variables.data-*") if damaged_part == "variables" \
        else [copy / "saved_model.pb"]
    target.write_bytes(target.read_bytes()[:target.stat().st_size // 3])
    with pytest.raises(ValueError, match=rf"cannot load the SavedModel {copy}: .*damaged or "
                                         "incomplete"):
      load_checkpoint(AlbertPretrainer(model.config), str(copy))


def test_saved_model_cli_shows_and_runs_the_signatures(exported):
  _, export_dir, _ = exported
  cli = str(pathlib.Path(sys.executable).parent / "saved_model_cli")
  shown = subprocess.run([cli, "show", "--dir", export_dir, "--all"], capture_output=True,
                         text=True, timeout=120)
  assert shown.returncode == 0, shown.stderr[-2000:]
  for text in ("signature_def['serving_default']", "signature_def['mlm']",
               "inputs['input_word_ids'] tensor_info:", "dtype: DT_INT32",
               "outputs['pooled_output'] tensor_info:", "outputs['mlm_logits'] tensor_info:"):
    assert text in shown.stdout
  ran = subprocess.run(
      [cli, "run", "--dir", export_dir, "--tag_set", "serve", "--signature_def",
       "serving_default", "--input_exprs",
       "input_word_ids=[[2,7,8,3]];input_mask=[[1,1,1,1]];input_type_ids=[[0,0,0,0]]"],
      capture_output=True, text=True, timeout=120)
  assert ran.returncode == 0, ran.stderr[-2000:]
  assert "pooled_output" in ran.stdout
  # A malformed request reaches the CLI's user in words.
  bad = subprocess.run(
      [cli, "run", "--dir", export_dir, "--tag_set", "serve", "--signature_def",
       "serving_default", "--input_exprs",
       "input_word_ids=[[2,7,8,3]];input_mask=[[1,1,1]];input_type_ids=[[0,0,0,0]]"],
      capture_output=True, text=True, timeout=120)
  assert bad.returncode != 0
  assert "input_mask has shape [1 3] but input_word_ids has [1 4]" in bad.stderr, bad.stderr[-2000:]


def test_real_data_export_cli_writes_every_model_and_rejects_a_checkpoint_of_another_shape(
    exported, native_bundle, tmp_path):
  model, _, folder = exported
  paths, _, _, log = native_bundle  # export_savedmodel.py --jit_compile --onnx, by the fixture
  for name in ("encoder", "preprocessing", "embed", "fill_mask"):
    assert (pathlib.Path(paths[name]) / "saved_model.pb").exists(), name
    assert f"exported {name}: {paths[name]}" in log
  # --onnx beside --jit_compile (which compiles the SavedModel's signatures only): encoder.onnx
  # of this 2-group, 2-inner-block model gives the encoder's outputs at another length too.
  onnx_file = str(pathlib.Path(paths["encoder"]).parent / "encoder.onnx")
  assert f"exported onnx: {onnx_file}" in log
  for x in (inputs(seed=3), inputs(batch=2, seq=5, seed=4)):
    got = run_onnx(onnx_file, {k: v.numpy() for k, v in x.items()})
    want = model.encoder(x, training=False)
    for name in ("pooled_output", "sequence_output"):
      assert_float32_close(got[name], want[name], err_msg=name)
  # --jit_compile reaches the encoder only (string ops cannot be XLA-compiled).
  assert b"_XlaMustCompile" in (pathlib.Path(paths["encoder"]) / "saved_model.pb").read_bytes()
  assert b"_XlaMustCompile" not in (pathlib.Path(paths["fill_mask"]) /
                                    "saved_model.pb").read_bytes()
  ran = subprocess.run([sys.executable, "-m", "albert_tf.cli.saved_model_cli", "run",
                        "--dir", paths["fill_mask"], "--tag_set", "serve",
                        "--signature_def", "serving_default", "--input_exprs",
                        'text=["a [MASK] day"]'], capture_output=True, text=True, timeout=120,
                       cwd=str(ROOT))
  assert ran.returncode == 0 and "Result for output key top_tokens" in ran.stdout, ran.stderr
  # What the script runs, in-process (the script's error path is the one above's
  # except-clause): a checkpoint of another shape fails before anything is written.
  config = tmp_path / "config.json"
  model.config.replace(intermediate_size=48).to_json_file(config)
  with pytest.raises(ValueError, match="shape mismatch"):
    export_bundle(str(config), str(folder / "tf1" / "model.ckpt"), str(tmp_path / "bad"),
                  max_seq_length=16)
  assert not (tmp_path / "bad" / "encoder").exists()


def test_an_xla_compiled_export_gives_the_plain_exports_outputs(exported, native_bundle):
  _, export_dir, _ = exported
  # The script's --jit_compile export of the same weights (the fixture's).
  compiled_dir = native_bundle[0]["encoder"]
  assert b"_XlaMustCompile" in (pathlib.Path(compiled_dir) / "saved_model.pb").read_bytes()
  plain, compiled = load_saved_model(export_dir), load_saved_model(compiled_dir)
  x = inputs(batch=2, seed=3)
  positions = tf.constant([[1, 4], [0, 2]], tf.int32)
  want = plain.signatures["mlm"](masked_lm_positions=positions, **x)
  got = compiled.signatures["mlm"](masked_lm_positions=positions, **x)
  for key in ("pooled_output", "sequence_output", "encoder_outputs", "mlm_logits"):
    assert_float32_close(got[key], want[key], err_msg=key)
  assert_float32_close(compiled.signatures["serving_default"](**x)["pooled_output"],
                       want["pooled_output"])


def test_a_model_initialised_from_the_exported_encoder_gives_its_outputs(exported):
  from albert_tf.modeling.classifier import AlbertClassifier
  model, export_dir, _ = exported
  classifier = AlbertClassifier(model.config, num_labels=2)
  report = load_checkpoint(classifier, export_dir)
  assert report.format == "savedmodel" and report.missing == ["output_weights", "output_bias"]
  x = inputs(seed=3)
  np.testing.assert_array_equal(classifier.encoder(x, training=False)["pooled_output"],
                                model.encoder(x, training=False)["pooled_output"])


# The unit roundoff of each serving dtype (half the gap between 1 and the next number):
# bfloat16 keeps 8 significant bits, float16 11.
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


@pytest.mark.parametrize("dtype", sorted(UNIT_ROUNDOFF))
def test_a_mixed_serving_export_has_float32_outputs_within_its_dtypes_rounding(
    exported, tmp_path, dtype):
  """export_savedmodel.py --serving_dtype=bfloat16 (CPUs with AVX512_BF16 / AMX, GPUs) and
  float16 (GPUs): the encoder computes in that dtype, the attention softmax, the LayerNorms
  and the logits in float32, and the SavedModel's outputs are float32, within that dtype's
  rounding of the float32 model's; the global policy is left as it was."""
  model, _, folder = exported
  config = str(folder / f"{dtype}_config.json")
  model.config.to_json_file(config)
  paths = export_bundle(config, str(folder / "tf1" / "model.ckpt"), str(tmp_path / dtype),
                        max_seq_length=SEQ, serving_dtype=dtype)
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  loaded = load_saved_model(paths["encoder"])
  with pytest.raises(ValueError, match="float32"):
    export_bundle(config, str(folder / "tf1" / "model.ckpt"), str(tmp_path / "x"),
                  max_seq_length=SEQ, serving_dtype=dtype, tflite=True)
  x = inputs(seed=5)
  positions = tf.constant([[1, 2], [0, 3], [2, 2]], tf.int32)
  got = loaded.signatures["mlm"](masked_lm_positions=positions, **x)
  want = model(dict(x, masked_lm_positions=positions), training=False)
  for name in ("pooled_output", "sequence_output", "encoder_outputs", "mlm_logits"):
    assert got[name].dtype == tf.float32, name
  # The dtype's unit roundoff u of the values' scale, grown as a random walk over the
  # roundings on the way (~14 per layer, the embeddings and the head), 4 standard deviations
  # wide for the tails of thousands of elements.
  u = UNIT_ROUNDOFF[dtype]
  roundings = 14 * model.config.num_hidden_layers + 4
  for name in ("sequence_output", "mlm_logits"):
    scale = np.max(np.abs(want[name]))
    np.testing.assert_allclose(got[name], want[name], rtol=0, err_msg=name,
                               atol=4 * u * np.sqrt(roundings) * scale)
  # The dtype's rounding, not float32's (2^-24, 2^13 to 2^16 times smaller than u / 64): the
  # export did compute in that dtype.
  error = np.max(np.abs(got["sequence_output"] - want["sequence_output"]))
  assert error > u / 64 * np.max(np.abs(want["sequence_output"]))


SPM = str(SHARED_DATA / "sentencepiece" / "spiece.model")


@pytest.fixture(scope="module")
def native_bundle(exported):
  """The bundle exported from our own pretraining checkpoint (as run_pretraining.py writes it)
  of the `exported` model, and a fine-tuned classifier's checkpoint (no MLM head)."""
  from albert_tf.modeling.classifier import AlbertClassifier
  model, _, folder = exported
  config = str(folder / "config.json")
  model.config.to_json_file(config)
  pretraining = str(folder / "pretraining")
  tf.train.CheckpointManager(native_checkpoint(model), pretraining, max_to_keep=1).save()
  full = folder / "bundles" / "full"
  # The script itself (one export serves the CLI test and the native-checkpoint tests).
  ran = subprocess.run([sys.executable, str(ROOT / "export_savedmodel.py"),
                        f"--albert_config_file={config}", f"--checkpoint={pretraining}",
                        f"--spm_model_file={SPM}", f"--max_seq_length={SEQ}",
                        f"--export_dir={full}", "--jit_compile", "--onnx"],
                       capture_output=True, text=True, timeout=300)
  assert ran.returncode == 0, ran.stderr[-2000:]
  paths = {name: str(full / name) for name in ("encoder", "preprocessing", "embed", "fill_mask")}
  classifier = native_checkpoint(AlbertClassifier(model.config, num_labels=2)).write(
      str(folder / "classifier" / "ckpt"))
  return paths, config, classifier, ran.stderr


def files(folder):
  """{relative path: bytes} of every file under `folder`."""
  return {str(p.relative_to(folder)): p.read_bytes()
          for p in sorted(pathlib.Path(folder).rglob("*")) if p.is_file()}


def test_a_native_pretraining_checkpoint_exports_fill_mask_giving_the_models_mlm(
    exported, native_bundle):
  import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops for loading)
  from albert_tf.tokenization import FullTokenizer
  model, _, folder = exported
  paths, _, _, log = native_bundle
  full = folder / "bundles" / "full"
  for name in ("encoder", "preprocessing", "embed", "fill_mask"):  # the final paths, as returned
    assert f"exported {name}: {full / name}" in log
  assert sorted(p.name for p in (folder / "bundles").iterdir()) == ["full"]  # no temp folder
  text = "the [MASK] sat on the [MASK]"
  out = tf.saved_model.load(paths["fill_mask"]).signatures["serving_default"](
      text=tf.constant([text]))
  tokenizer = FullTokenizer(spm_model_file=SPM)
  ids = [tokenizer.cls_id] + encode_with_masks_python(tokenizer, text) + [tokenizer.sep_id]
  positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_id]
  pad = [0] * (SEQ - len(ids))
  logits = model({"input_word_ids": tf.constant([ids + pad]),
                  "input_mask": tf.constant([[1] * len(ids) + pad]),
                  "input_type_ids": tf.zeros([1, SEQ], tf.int32),
                  "masked_lm_positions": tf.constant([positions])}, training=False)["mlm_logits"]
  scores, top = tf.math.top_k(tf.nn.softmax(logits[0]), 5)
  assert out["masked_positions"][0, :len(positions)].numpy().tolist() == positions
  np.testing.assert_array_equal(out["top_ids"][0, :len(positions)], top)
  # A probability p = exp(l - logsumexp): p times the logits' error, plus the rounding of the
  # normaliser's sum over the vocabulary.
  atol = (np.max(scores) * float32_atol(logits, TERMS)
          + float32_atol(scores, model.config.vocab_size))
  np.testing.assert_allclose(out["top_scores"][0, :len(positions)], scores, rtol=0, atol=atol)


def test_the_bundles_embed_model_gives_the_encoders_sentence_vectors(exported, native_bundle):
  import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops for loading)

  from albert_tf.tokenization import FullTokenizer
  texts = ["The bristlecone pines of California are among the oldest living things.", "Tom."]
  out = tf.saved_model.load(native_bundle[0]["embed"]).signatures["serving_default"](
      text=tf.constant(texts))
  mean, pooled = sentence_embeddings_python(exported[0].encoder, FullTokenizer(spm_model_file=SPM),
                                            texts, SEQ)
  assert_float32_close(out["mean_embedding"], mean, terms=TERMS + SEQ)  # the mean's SEQ terms
  assert_float32_close(out["pooled_output"], pooled)


def test_tf_hub_preprocessor_api_packs_pairs_as_fine_tuning_and_feeds_the_hub_encoder(
    exported, native_bundle):
  # TensorFlow's text-classification guides: tokenize and bert_pack_inputs of the
  # preprocessor as hub.KerasLayers, then the encoder as one.
  import tensorflow_hub as hub
  import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops for loading)
  from albert_tf.tokenization import FullTokenizer, encode_pair
  model = exported[0]
  paths = native_bundle[0]
  preprocessor = hub.load(paths["preprocessing"])
  seq = 12  # not the export's default (SEQ), so the argument is what counts
  texts = [tf_keras.Input(shape=(), dtype=tf.string) for _ in range(2)]
  tokenize = hub.KerasLayer(preprocessor.tokenize)
  pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=seq))
  packed = pack([tokenize(t) for t in texts])
  pooled = hub.KerasLayer(load_saved_model(paths["encoder"]))(packed)["pooled_output"]
  pipeline = tf_keras.Model(texts, [packed, pooled])
  # Pairs that fit, that cut the longer side, that tie, and a B with no pieces (one segment).
  a = ["How old is the oldest tree in 1990, Mr. Smith?", "short", "a b c d e f", "Héllo there"]
  b = ["The bristlecone pines of California are among the oldest living things.",
       "a much longer second sentence that has to lose tokens", "g h i j k l", " "]
  got_packed, got_pooled = pipeline([tf.constant(a), tf.constant(b)])
  tokenizer = FullTokenizer(spm_model_file=SPM)
  want = [encode_pair(tokenizer, x, y, seq) for x, y in zip(a, b)]
  assert got_packed["input_word_ids"].numpy().tolist() == [w["input_ids"] for w in want]
  assert got_packed["input_mask"].numpy().tolist() == [w["input_mask"] for w in want]
  assert got_packed["input_type_ids"].numpy().tolist() == [w["segment_ids"] for w in want]
  assert want[3]["segment_ids"].count(1) == 0 and want[1]["segment_ids"].count(1) > 0
  expected = model.encoder({k: got_packed[k] for k in got_packed}, training=False)
  assert_float32_close(got_pooled, expected["pooled_output"])
  # Called directly, one segment, the export's default length.
  single = preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant(a))])
  assert single["input_word_ids"].numpy().tolist() == [
      encode_pair(tokenizer, x, None, SEQ)["input_ids"] for x in a]


def test_reexporting_replaces_the_whole_bundle_and_removes_a_killed_exports_leftovers(
    exported, native_bundle, tmp_path, caplog):
  paths, config, classifier, _ = native_bundle
  out = tmp_path / "out"
  shutil.copytree(pathlib.Path(paths["encoder"]).parent, out)
  (out / "encoder.tflite").write_bytes(b"the previous model's")
  for leftover in ("out.tmp-0123abcd", "out.tmp-89abcdef"):  # a killed export's two copies
    (tmp_path / leftover / "encoder").mkdir(parents=True)
  (tmp_path / "out-v2").mkdir()  # not ours: stays
  with caplog.at_level(logging.INFO):
    got = export_bundle(config, classifier, str(out), spm_model_file=SPM, max_seq_length=SEQ)
  assert "the checkpoint has no MLM head: no fill_mask model" in caplog.text
  assert f"exported encoder: {out / 'encoder'}" in caplog.text
  assert got == {"encoder": str(out / "encoder"), "preprocessing": str(out / "preprocessing"),
                 "embed": str(out / "embed")}
  # No stale fill_mask/ or encoder.tflite of the previous model beside the new encoder.
  assert sorted(p.name for p in out.iterdir()) == ["embed", "encoder", "preprocessing"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out-v2"]
  from albert_tf.modeling.classifier import AlbertClassifier
  new = AlbertClassifier(exported[0].config, num_labels=2)
  load_checkpoint(new, classifier)
  x = inputs(seed=6)
  assert_float32_close(
      load_saved_model(got["encoder"]).signatures["serving_default"](**x)["pooled_output"],
      new.encoder(x, training=False)["pooled_output"])


def test_a_failed_export_leaves_the_previous_bundle_byte_identical(native_bundle, tmp_path,
                                                                   monkeypatch):
  from albert_tf.export import preprocessing
  paths, config, classifier, _ = native_bundle
  out = tmp_path / "out"
  shutil.copytree(pathlib.Path(paths["encoder"]).parent, out)
  before = files(out)

  def fail(*args, **kwargs):
    raise OSError("No space left on device")

  # Fails after the new encoder is written: the old code had overwritten the previous one.
  monkeypatch.setattr(preprocessing, "save_preprocessing_model", fail)
  with pytest.raises(OSError, match="No space left"):
    export_bundle(config, classifier, str(out), spm_model_file=SPM, max_seq_length=SEQ)
  assert files(out) == before
  assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_export_dir_holding_other_files_is_refused_and_left_as_it_was(native_bundle,
                                                                        tmp_path):
  paths, config, classifier, _ = native_bundle
  out = tmp_path / "run"  # e.g. a training output_dir given by mistake
  shutil.copytree(pathlib.Path(paths["encoder"]).parent, out)
  (out / "ckpt-10.index").write_bytes(b"a checkpoint")
  before = files(out)
  with pytest.raises(FileExistsError, match=r"--export_dir=.*run holds files that are not an "
                                            r"exported bundle \(ckpt-10.index\)"):
    export_bundle(config, classifier, str(out), spm_model_file=SPM, max_seq_length=SEQ)
  assert files(out) == before
