"""The TF model against the independent float64 NumPy reference, through TF1 checkpoints."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import reference_albert as ref
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer, load_checkpoint
from albert_tf import save_tf1_checkpoint
from albert_tf.interop.checkpoints import CheckpointError
from albert_tf.interop.tf1_names import tf1_variable_map
from conftest import ROOT, float32_atol

BASE = dict(vocab_size=61, embedding_size=12, hidden_size=16, intermediate_size=40,
            num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1,
            num_attention_heads=4, max_position_embeddings=20, type_vocab_size=2,
            hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
            initializer_range=0.02)

CASES = {
    "G1_K1": {},
    "G2_K2": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    "E_equals_H": dict(embedding_size=16),
    "share_attention": dict(sharing="attention"),
    "share_ffn": dict(sharing="ffn"),
    "share_none": dict(sharing="none"),
    "preln": dict(ln_type="preln", num_hidden_groups=3),
    "relu": dict(hidden_act="relu"),
    "gelu_exact": dict(hidden_act="gelu_exact"),
    "swish": dict(hidden_act="swish"),
    "tanh": dict(hidden_act="tanh"),
    # Google's albert_*_zh: the released config's own activation and dropout (ReLU: the
    # Chinese models were trained with it), shrunk to BASE's sizes.
    "google_zh": {k: v for k, v in json.loads(
        (ROOT / "configs" / "albert_base_zh.json").read_text()).items()
                  if k in ("hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob")},
}


def make_inputs(cfg, batch=3, seq=9, seed=7):
  """Ids with padding in the mask and both segment ids, plus masked positions."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, cfg["vocab_size"], size=(batch, seq)).astype(np.int32)
  lengths = [seq, seq - 3, 4][:batch]
  mask = np.array([[1] * n + [0] * (seq - n) for n in lengths], np.int32)
  types = np.array([[0] * (n // 2) + [1] * (seq - n // 2) for n in lengths], np.int32) * mask
  positions = np.array([[1, 2, 5], [0, 3, 4], [1, 2, 3]][:batch], np.int32)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types,
              masked_lm_positions=positions)


def assert_close(actual, expected, cfg):
  """The float32 model against the float64 reference on the same (float32) weights: float32
  rounding at the tensor's scale (elementwise relative error is meaningless for entries near
  zero) of the longest chain of additions behind a value: the E-term projection, per block use
  a sum over I and one over H, then a head's: the MLM transform's H, its LayerNorm's mean and
  variance over E and the logits' E, or the pooler's H and a classifier's or SOP's H."""
  actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
  assert actual.shape == expected.shape
  blocks = cfg["num_hidden_layers"] * cfg["inner_group_num"]
  terms = (cfg["embedding_size"] + blocks * (cfg["intermediate_size"] + cfg["hidden_size"])
           + cfg["hidden_size"] + 3 * max(cfg["hidden_size"], cfg["embedding_size"]))
  atol = float32_atol(expected, terms)
  err = np.max(np.abs(actual - expected))
  assert err <= atol, f"max abs error {err:.3g} > {atol:.3g} ({terms} terms)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_pretrainer_matches_numpy_reference_from_tf1_checkpoint(case, tmp_path):
  cfg = dict(BASE, **CASES[case])
  weights = ref.random_tf1_weights(cfg, heads=True, seed=len(case))
  prefix = str(tmp_path / "model.ckpt-100")
  ref.write_tf1_checkpoint(prefix, weights, with_optimizer_slots=True)

  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  report = load_checkpoint(model, prefix)
  assert report.format == "tf1"
  assert sorted(report.loaded) == sorted(weights)
  assert report.missing == [] and report.unused == []
  assert "global_step" in report.skipped and len(report.skipped) == 1 + 2 * len(weights)

  inputs = make_inputs(cfg)
  out = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
  expected = ref.reference_forward(weights, cfg, inputs["input_word_ids"], inputs["input_mask"],
                                   inputs["input_type_ids"], inputs["masked_lm_positions"])
  assert_close(out["embedding_output"], expected["embedding_output"], cfg)
  assert len(out["encoder_outputs"]) == cfg["num_hidden_layers"] * cfg["inner_group_num"]
  for got, want in zip(out["encoder_outputs"], expected["encoder_outputs"]):
    assert_close(got, want, cfg)
  for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
    assert_close(out[key], expected[key], cfg)


def test_hub_module_prefix_loads_into_encoder_and_reports_heads_unused(tmp_path):
  cfg = dict(BASE)
  weights = ref.random_tf1_weights(cfg, heads=True, seed=3)
  prefix = str(tmp_path / "hub" / "variables")
  (tmp_path / "hub").mkdir()
  ref.write_tf1_checkpoint(prefix, weights, hub_prefix=True)
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  report = load_checkpoint(encoder, prefix)
  assert report.unused == sorted(n for n in weights if n.startswith("cls/"))
  inputs = make_inputs(cfg)
  del inputs["masked_lm_positions"]
  out = encoder({k: tf.constant(v) for k, v in inputs.items()})
  expected = ref.reference_forward(weights, cfg, inputs["input_word_ids"], inputs["input_mask"],
                                   inputs["input_type_ids"])
  assert_close(out["pooled_output"], expected["pooled_output"], cfg)


def test_save_tf1_checkpoint_writes_the_original_names_and_round_trips_exactly(tmp_path):
  cfg = dict(BASE, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
  config = AlbertConfig.from_dict(cfg)
  source = AlbertPretrainer(config)
  prefix = save_tf1_checkpoint(source, str(tmp_path / "out" / "model.ckpt"), global_step=7)

  written = dict(tf.train.list_variables(prefix))
  expected_shapes = ref.tf1_variable_shapes(cfg, heads=True)
  assert set(written) == set(expected_shapes) | {"global_step"}
  for name, shape in expected_shapes.items():
    assert tuple(written[name]) == tuple(shape), name
  assert tf.train.latest_checkpoint(str(tmp_path / "out")) == prefix

  target = AlbertPretrainer(config)
  load_checkpoint(target, str(tmp_path / "out"))
  src_vars, dst_vars = tf1_variable_map(source), tf1_variable_map(target)
  for name in src_vars:
    np.testing.assert_array_equal(src_vars[name].numpy(), dst_vars[name].numpy(), err_msg=name)


def test_save_tf1_checkpoint_writes_to_a_file_system_with_a_scheme(tmp_path):
  """Its renames go through files.py, so a gs:// prefix works as a local one does; TensorFlow's
  in-memory ram:// file system stands in for the bucket (read back from a local copy)."""
  config = AlbertConfig.from_dict(dict(BASE, num_hidden_layers=1))
  source = AlbertPretrainer(config)
  prefix = save_tf1_checkpoint(source, "ram://tf1_out/model.ckpt")
  assert tf.train.latest_checkpoint("ram://tf1_out") == prefix
  written = tf.io.gfile.listdir("ram://tf1_out")
  assert not [name for name in written if ".tmp-" in name], written
  for name in written:
    tf.io.gfile.copy(f"ram://tf1_out/{name}", str(tmp_path / name))
  target = AlbertPretrainer(config)
  load_checkpoint(target, str(tmp_path / "model.ckpt"))
  src_vars, dst_vars = tf1_variable_map(source), tf1_variable_map(target)
  for name in src_vars:
    np.testing.assert_array_equal(src_vars[name].numpy(), dst_vars[name].numpy(), err_msg=name)


def test_shape_mismatch_names_both_variables_and_loads_nothing(tmp_path):
  weights = ref.random_tf1_weights(dict(BASE, vocab_size=70), heads=False)
  prefix = str(tmp_path / "other.ckpt")
  ref.write_tf1_checkpoint(prefix, weights)
  encoder = AlbertEncoder(AlbertConfig.from_dict(BASE))
  before = encoder.embedding_layer.position_embeddings.numpy()
  with pytest.raises(CheckpointError, match=r"bert/embeddings/word_embeddings.*\[70, 12\]"
                                            r".*word_embeddings:0.*\[61, 12\]"):
    load_checkpoint(encoder, prefix)
  np.testing.assert_array_equal(encoder.embedding_layer.position_embeddings.numpy(), before)


def test_checkpoint_of_another_model_is_rejected(tmp_path):
  prefix = str(tmp_path / "foreign.ckpt")
  ref.write_tf1_checkpoint(prefix, {"bert/foo/kernel": np.ones([2, 2], np.float32)})
  with pytest.raises(CheckpointError, match="no variable of"):
    load_checkpoint(AlbertEncoder(AlbertConfig.from_dict(BASE)), prefix)


def test_missing_checkpoint_names_the_path(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere.ckpt"):
    load_checkpoint(AlbertEncoder(AlbertConfig.from_dict(BASE)), str(tmp_path / "nowhere.ckpt"))


def test_dropout_is_active_only_in_training():
  model = AlbertEncoder(AlbertConfig.from_dict(BASE))
  inputs = {k: tf.constant(v) for k, v in make_inputs(BASE).items() if k != "masked_lm_positions"}
  a = model(inputs, training=False)["sequence_output"]
  b = model(inputs, training=False)["sequence_output"]
  c = model(inputs, training=True)["sequence_output"]
  np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert np.max(np.abs(a.numpy() - c.numpy())) > 1e-3


def test_native_checkpoint_of_pretrainer_restores_encoder_and_pretrainer(tmp_path):
  from albert_tf.interop.checkpoints import native_checkpoint
  config = AlbertConfig.from_dict(dict(BASE, num_hidden_layers=4, num_hidden_groups=2))
  source = AlbertPretrainer(config)
  optimizer = tf_keras.optimizers.Adam(1e-3)  # a training checkpoint also holds its slots
  optimizer.build(source.trainable_variables)
  path = native_checkpoint(source, step=tf.Variable(5, dtype=tf.int64),
                           optimizer=optimizer).write(str(tmp_path / "ckpt-5"))

  encoder = AlbertEncoder(config)
  report = load_checkpoint(encoder, path)
  assert report.format == "native" and report.missing == []
  assert report.summary().startswith(  # the line a run logs when it starts from a checkpoint
      f"Loaded {len(report.loaded)} variables from native checkpoint {path}")
  assert any(k.startswith("masked_lm/") for k in report.unused)
  assert "step/.ATTRIBUTES/VARIABLE_VALUE" in report.unused
  # Optimizer state is counted as skipped, not listed name by name as unused.
  assert not any(".OPTIMIZER_SLOT" in k or k.startswith("optimizer/") for k in report.unused)
  assert len(report.skipped) >= 2 * len(source.trainable_variables)
  inputs = {k: tf.constant(v) for k, v in make_inputs(BASE).items()
            if k != "masked_lm_positions"}
  np.testing.assert_array_equal(encoder(inputs)["pooled_output"].numpy(),
                                source.encoder(inputs)["pooled_output"].numpy())

  target = AlbertPretrainer(config)
  report = load_checkpoint(target, str(tmp_path))  # a directory works too (no state file:
  assert report.missing == []                       # the single .index is found)
  for name, var in tf1_variable_map(source).items():
    np.testing.assert_array_equal(var.numpy(), tf1_variable_map(target)[name].numpy())


def test_native_checkpoint_of_another_config_is_an_error_naming_variables(tmp_path):
  from albert_tf.interop.checkpoints import native_checkpoint
  path = native_checkpoint(AlbertEncoder(AlbertConfig.from_dict(BASE))).write(
      str(tmp_path / "ckpt-1"))
  wider = AlbertEncoder(AlbertConfig.from_dict(dict(BASE, intermediate_size=48)))
  with pytest.raises(CheckpointError, match=r"ffn_sublayers/group_0.Sinner_group_0/intermediate"
                                            r".*\[16, 40\].*\[16, 48\]"):
    load_checkpoint(wider, path)
  grouped = AlbertEncoder(AlbertConfig.from_dict(dict(BASE, num_hidden_groups=3)))
  with pytest.raises(CheckpointError, match="group_1"):
    load_checkpoint(grouped, path)


@pytest.mark.parametrize("native", [False, True])
def test_init_from_group0_copies_group_0_into_every_group(tmp_path, native):
  from albert_tf.interop.checkpoints import native_checkpoint
  one_group = AlbertEncoder(AlbertConfig.from_dict(dict(BASE, num_hidden_layers=4)))
  if native:
    path = native_checkpoint(one_group).write(str(tmp_path / "ckpt-1"))
  else:
    path = save_tf1_checkpoint(one_group, str(tmp_path / "model.ckpt"))
  grouped = AlbertEncoder(AlbertConfig.from_dict(dict(BASE, num_hidden_layers=4,
                                                      num_hidden_groups=2)))
  with pytest.raises(CheckpointError):
    load_checkpoint(grouped, path)  # group_1 is missing without the flag
  report = load_checkpoint(grouped, path, init_from_group0=True)
  assert report.missing == [] and report.unused == []
  source = one_group.attention_sublayers["group_0/inner_group_0"].attention.query.kernel
  for key in ("group_0/inner_group_0", "group_1/inner_group_0"):
    np.testing.assert_array_equal(
        grouped.attention_sublayers[key].attention.query.kernel.numpy(), source.numpy())


@pytest.mark.parametrize("num_labels", [3, 1])
def test_classifier_head_matches_the_original_and_round_trips_its_names(tmp_path, num_labels):
  from albert_tf.modeling.classifier import AlbertClassifier
  config = AlbertConfig.from_dict(BASE)
  weights = ref.random_tf1_weights(BASE, heads=False, seed=5)
  rng = np.random.default_rng(5)
  weights["output_weights"] = rng.normal(size=(num_labels, 16)).astype(np.float32)
  weights["output_bias"] = rng.normal(size=(num_labels,)).astype(np.float32)
  prefix = str(tmp_path / "classifier.ckpt")
  ref.write_tf1_checkpoint(prefix, weights, with_optimizer_slots=True)
  model = AlbertClassifier(config, num_labels)
  report = load_checkpoint(model, prefix)
  assert "output_weights" in report.loaded and report.unused == []
  inputs = make_inputs(BASE)
  del inputs["masked_lm_positions"]
  logits = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
  pooled = ref.reference_forward(weights, BASE, inputs["input_word_ids"], inputs["input_mask"],
                                 inputs["input_type_ids"])["pooled_output"]
  expected = pooled @ weights["output_weights"].T + weights["output_bias"]
  assert_close(logits, expected[:, 0] if num_labels == 1 else expected, BASE)
  saved = save_tf1_checkpoint(model, str(tmp_path / "out" / "model.ckpt"))
  assert {"output_weights", "output_bias"} <= set(dict(tf.train.list_variables(saved)))


@pytest.mark.parametrize("name", ["gelu", "gelu_xla"])
def test_gelu_forward_is_the_formula_and_its_written_gradient_is_the_derivative(name):
  """`gelu` keeps the original's forward ops; its hand-written gradient (which recomputes from
  `x` to save memory) must equal the formula's derivative, in float32 and under bfloat16. The
  training steps' `gelu_xla` (the same, XLA-compiled) must agree too."""
  from albert_tf.modeling import activations  # pylint: disable=g-import-not-at-top
  gelu = getattr(activations, name)
  x64 = np.linspace(-6.0, 6.0, 241)
  c, a = np.sqrt(2.0 / np.pi), 0.044715
  t = np.tanh(c * (x64 + a * x64 ** 3))
  derivative = 0.5 * (1 + t) + 0.5 * x64 * (1 - t * t) * c * (1 + 3 * a * x64 ** 2)
  x = tf.constant(x64, tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = gelu(x)
  dy = 0.5 + np.arange(241, dtype=np.float32) / 241  # not all ones: the upstream grad is used
  # float32 against the float64 formula on x64: x's own rounding to float32 (a gradient of at
  # most 1.13 times half an ulp), then each of the formula's operations rounds: the forward's 8
  # (the cube, 3 multiplies, 2 additions, tanh, the last multiply), the derivative's about twice
  # as many, and the product with dy. The derivative's 1 - t * t also carries t's rounding (an
  # ulp of 1 where t nears 1), times 0.5 x c (1 + 3 a x^2), up to 14 at |x| = 6.
  want = ref.activation("gelu", x64)
  np.testing.assert_allclose(y.numpy(), want, rtol=0, atol=float32_atol(want, 1 + 8))
  want = dy * derivative
  amplified = np.max(np.abs(dy * 0.5 * x64 * c * (1 + 3 * a * x64 ** 2)))
  np.testing.assert_allclose(tape.gradient(y, x, output_gradients=tf.constant(dy)).numpy(),
                             want, rtol=0,
                             atol=float32_atol(want, 1 + 2 * 8 + 1) + float32_atol(1.0, amplified))
  xb = tf.cast(x, tf.bfloat16)
  with tf.GradientTape() as tape:
    tape.watch(xb)
    yb = gelu(xb)
  gb = tape.gradient(yb, xb)
  assert gb.dtype == tf.bfloat16
  # bfloat16's unit roundoff u: the same amplified rounding of t, and the derivative's other
  # roundings as a random walk (x's, ~16 operations'), 4 standard deviations wide for 241 values.
  u = 2.0 ** -8
  amplified = np.max(np.abs(0.5 * x64 * c * (1 + 3 * a * x64 ** 2)))
  np.testing.assert_allclose(tf.cast(gb, tf.float32).numpy(), derivative, rtol=0,
                             atol=u * amplified + 4 * u * np.sqrt(17) * np.max(np.abs(derivative)))
  assert activations.get_activation("GELU", training=name == "gelu_xla") is gelu


@pytest.mark.parametrize("hidden,heads", [(128, 2), (52, 2)])  # heads of 64 (exact), 26 (not)
def test_attention_rounds_as_the_originals_scaled_scores(hidden, heads):
  """The original multiplies the scores `q k^T` by 1/sqrt(d). Where that scale is a power of
  two we scale q instead (fewer elements): the context must stay bit-identical to the
  original's order, and other head sizes keep that order."""
  from albert_tf.modeling.attention import SelfAttention, attention_bias
  layer = SelfAttention(hidden, heads, 0.1, 0.02)
  x = tf.random.stateless_normal([2, 7, hidden], [3, 4]) * 3.0
  bias = attention_bias(tf.constant([[1] * 7, [1] * 4 + [0] * 3]))
  got = layer(x, bias, training=False).numpy()
  d = hidden // heads

  def heads_first(t):
    return tf.transpose(tf.reshape(t, [2, 7, heads, d]), [0, 2, 1, 3])

  q, k, v = (heads_first(dense(x)) for dense in (layer.query, layer.key, layer.value))
  scores = tf.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(float(d)))
  context = tf.matmul(tf.nn.softmax(scores + bias, axis=-1), v)
  want = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [2, 7, hidden]).numpy()
  np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_training_layer_norm_is_the_layer_norm_and_its_gradient(dtype, monkeypatch):
  """The blocks' training LayerNorm (`layer_norm_xla`: compiled forward, hand-written compiled
  gradient) must compute the original's LayerNorm and its exact derivative (float64 autodiff of
  the reference formula), in float32 and from bfloat16 inputs; training calls of a block use
  it and inference calls keep the Keras layer."""
  from albert_tf.modeling import transformer  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.layer_norm import layer_norm_xla  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(5)
  x64 = rng.normal(1.0, 3.0, (3, 5, 48))
  gamma64, beta64 = rng.normal(size=48), rng.normal(size=48)
  dy64 = rng.normal(size=x64.shape)
  x, gamma, beta = (tf.Variable(v.astype(np.float32)) for v in (x64, gamma64, beta64))
  xin = tf.cast(x, dtype)
  with tf.GradientTape() as tape:
    tape.watch(xin)
    y = layer_norm_xla(xin, gamma, beta, 1e-12)
  grads = tape.gradient(y, [xin, gamma, beta], output_gradients=tf.cast(dy64, dtype))
  assert y.dtype == dtype and grads[0].dtype == dtype and grads[1].dtype == tf.float32
  xr, gr, br = (tf.constant(v) for v in (
      tf.cast(xin, tf.float64).numpy(), gamma64.astype(np.float32).astype(np.float64),
      beta64.astype(np.float32).astype(np.float64)))
  with tf.GradientTape() as tape:
    tape.watch([xr, gr, br])  # the reference's formula, differentiated by TF in float64
    mean = tf.reduce_mean(xr, -1, keepdims=True)
    variance = tf.reduce_mean((xr - mean) ** 2, -1, keepdims=True)
    want = (xr - mean) / tf.sqrt(variance + 1e-12) * gr + br
  np.testing.assert_allclose(want.numpy(), ref.layer_norm(xr.numpy(), gr.numpy(), br.numpy()))
  want_grads = tape.gradient(want, [xr, gr, br], output_gradients=tf.constant(dy64))
  # float32: the rounding of sums over 48 (the mean and variance, and dx's two sums over them)
  # and over 15 rows (gamma, beta). A bfloat16 output or dx is rounded to 8 bits: a unit
  # roundoff of its value and of the scale.
  for got, exp in zip([y] + grads, [want] + want_grads):
    got, exp = tf.cast(got, tf.float64).numpy(), exp.numpy()
    if dtype == "float32":
      np.testing.assert_allclose(got, exp, rtol=0, atol=float32_atol(exp, 4 * 48 + 15))
    else:
      np.testing.assert_allclose(got, exp, rtol=2 ** -8, atol=2 ** -8 * np.abs(exp).max())
  block_inputs = tf.constant(x64[:2, :, :32], tf.float32)
  sublayer = transformer.FeedForwardSublayer(32, 64, "gelu", 0.0, 0.02)
  plain = sublayer(block_inputs, training=False)
  calls = []
  monkeypatch.setattr(transformer, "layer_norm_xla",
                      lambda *args: calls.append(1) or layer_norm_xla(*args))
  trained = sublayer(block_inputs, training=True)
  assert calls and len(calls) == 1
  sublayer(block_inputs, training=False)
  assert len(calls) == 1
  # XLA's fusion against Keras's ops: the dense layers' sums over 32 and 64, then the
  # LayerNorm's mean and variance over 32.
  np.testing.assert_allclose(trained.numpy(), plain.numpy(), rtol=0,
                             atol=float32_atol(plain, 32 + 64 + 2 * 32))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_training_attention_softmax_is_the_masked_softmax_and_its_gradient(dtype, monkeypatch):
  """The training steps' `masked_softmax_xla` (compiled forward, compiled gradient recomputing
  the probabilities) must give the original's masked softmax (-10000 on padded keys) and its
  exact derivative (float64 autodiff), from float32 and bfloat16 scores. Attention uses it in
  training calls under a mixed policy only (in float32 oneDNN's softmax is faster)."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling import attention  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.attention import attention_bias, masked_softmax_xla  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(9)
  scores = tf.cast(tf.constant(rng.normal(0.0, 4.0, (2, 3, 6, 6)), tf.float32), dtype)
  bias = attention_bias(tf.constant([[1] * 6, [1] * 4 + [0] * 2]))
  dprobs = rng.normal(size=(2, 3, 6, 6))
  with tf.GradientTape() as tape:
    tape.watch(scores)
    probs = masked_softmax_xla(scores, bias, scores.dtype)
  dscores = tape.gradient(probs, scores, output_gradients=tf.cast(dprobs, dtype))
  assert probs.dtype == dtype and dscores.dtype == dtype
  s64 = tf.cast(scores, tf.float64)
  with tf.GradientTape() as tape:
    tape.watch(s64)
    e = tf.exp(s64 + tf.cast(bias, tf.float64))
    want = e / tf.reduce_sum(e, -1, keepdims=True)
  want_grad = tape.gradient(want, s64, output_gradients=tf.constant(dprobs)).numpy()
  # float32: the rounding of the sums over 6 keys (the normaliser, and the gradient's sum of
  # dprobs times probs) and of the exp; bfloat16 as in the LayerNorm test above.
  for got, exp in ((probs, want.numpy()), (dscores, want_grad)):
    got = tf.cast(got, tf.float64).numpy()
    if dtype == "float32":
      np.testing.assert_allclose(got, exp, rtol=0, atol=float32_atol(exp, 2 * 6 + 1))
    else:
      np.testing.assert_allclose(got, exp, rtol=2 ** -8, atol=2 ** -8 * np.abs(exp).max())
  assert np.all(want.numpy()[1, :, :, 4:] < 1e-4)  # the padded keys are masked
  calls = []
  monkeypatch.setattr(attention, "masked_softmax_xla",
                      lambda *args: calls.append(1) or masked_softmax_xla(*args))
  policy = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("float32" if dtype == "float32" else "mixed_bfloat16")
  try:
    layer = attention.SelfAttention(8, 2, 0.0, 0.02)
    x = tf.constant(rng.normal(size=(2, 6, 8)), tf.float32)
    layer(x, bias, training=False)
    assert not calls
    layer(x, bias, training=True)
  finally:
    tf_keras.mixed_precision.set_global_policy(policy)
  assert len(calls) == (0 if dtype == "float32" else 1)
