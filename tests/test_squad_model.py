"""The SQuAD heads: the original's formulas and the original's TF1 variable names."""

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT, float32_atol
from albert_tf.config import AlbertConfig
from albert_tf.interop.checkpoints import load_checkpoint
from albert_tf.interop.tf1_names import tf1_variable_map
from albert_tf.modeling.squad import AlbertSquad, SquadV2Head

# The original's names (squad_utils.create_v1_model / create_v2_model), written out here so
# the test does not read them from the code under test.
V1_HEAD = {"cls/squad/output_weights": [2, "H"], "cls/squad/output_bias": [2]}
V2_HEAD = {
    "start_logits/dense/kernel": ["H", 1], "start_logits/dense/bias": [1],
    "end_logits/dense_0/kernel": ["2H", "H"], "end_logits/dense_0/bias": ["H"],
    "end_logits/LayerNorm/gamma": ["H"], "end_logits/LayerNorm/beta": ["H"],
    "end_logits/dense_1/kernel": ["H", 1], "end_logits/dense_1/bias": [1],
    "answer_class/dense_0/kernel": ["2H", "H"], "answer_class/dense_0/bias": ["H"],
    "answer_class/dense_1/kernel": ["H", 1],
}


@pytest.fixture(scope="module")
def config():
  return AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")


def _shape(spec, hidden):
  return [{"H": hidden, "2H": 2 * hidden}.get(d, d) for d in spec]


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _assert_log_probs(actual, expected, terms):
  """`actual` (float32) against the float64 `expected`: a masked position's -1e30 exactly as
  float32 rounds it, an open one to float32 rounding of `terms` additions at the scale of the
  open log-probabilities (the -1e30s would set a useless scale)."""
  actual, expected = np.asarray(actual), np.asarray(expected)
  masked = expected < -1e29
  np.testing.assert_array_equal(actual[masked], expected[masked].astype(np.float32))
  np.testing.assert_allclose(actual[~masked], expected[~masked], rtol=0,
                             atol=float32_atol(expected[~masked], terms))


def test_v1_head_is_a_dense_2xH_over_every_token(config):
  model = AlbertSquad(config)
  inputs = model.encoder.dummy_inputs(2, 12)
  out = model(inputs)
  seq = model.encoder(inputs)["sequence_output"].numpy()
  w, b = model.squad_head.output_weights.numpy(), model.squad_head.output_bias.numpy()
  logits = seq @ w.T + b
  # NumPy's float32 product against the model's: the rounding of a sum over H and the bias, at
  # the scale of its terms |seq| |w| (the logits of small weights may cancel).
  atol = float32_atol(np.abs(seq) @ np.abs(w.T), config.hidden_size + 1)
  np.testing.assert_allclose(out["start_logits"], logits[..., 0], rtol=0, atol=atol)
  np.testing.assert_allclose(out["end_logits"], logits[..., 1], rtol=0, atol=atol)


def test_v2_head_matches_the_original_formulas():
  hidden, batch, seq, k, k_end = 8, 3, 10, 3, 2
  head = SquadV2Head(hidden, 0.5, start_n_top=k, end_n_top=k_end, dropout_rate=0.1)
  rng = np.random.default_rng(0)
  # Small inputs keep dense_0's tanh near linear and its outputs' variance small (~4e-3), so
  # the end LayerNorm's epsilon shows: 1e-5 for the original's 1e-12 moves the end
  # log-probabilities by ~1e-3, far outside the float32 tolerance below.
  x = (0.03 * rng.normal(size=(batch, seq, hidden))).astype(np.float32)
  p_mask = (rng.random((batch, seq)) < 0.3).astype(np.int32)
  p_mask[:, :k + 1] = 0  # enough open positions for the beam
  starts = np.array([1, 4, 2])
  train = head(tf.constant(x), tf.constant(p_mask), tf.constant(starts), training=False)
  beam = head(tf.constant(x), tf.constant(p_mask))
  # The reference in float64: its own rounding is negligible beside the head's float32.
  v = {n: t.numpy().astype(np.float64) for n, t in head.tf1_variables().items()}
  x = x.astype(np.float64)
  p = p_mask.astype(np.float64)
  # The longest chains of float32 additions behind a log-probability: start, a dense over H
  # then the softmax's sum over seq; end, dense_0 over [token; start] (2H), the LayerNorm's
  # mean and variance (H each), dense_1 (H), then the softmax's sum over seq.
  start_terms, end_terms = hidden + seq, 2 * hidden + 3 * hidden + seq

  start = (x @ v["start_logits/dense/kernel"])[..., 0] + v["start_logits/dense/bias"]
  start_masked = start * (1 - p) - 1e30 * p
  start_lp = _log_softmax(start_masked)

  def end_logits(tokens, start_feature):
    h = np.tanh(np.concatenate([tokens, start_feature], -1) @ v["end_logits/dense_0/kernel"]
                + v["end_logits/dense_0/bias"])
    h = _layer_norm(h, v["end_logits/LayerNorm/gamma"], v["end_logits/LayerNorm/beta"])
    return (h @ v["end_logits/dense_1/kernel"])[..., 0] + v["end_logits/dense_1/bias"]

  gold = x[np.arange(batch), starts][:, None].repeat(seq, 1)
  end_lp = _log_softmax(end_logits(x, gold) * (1 - p) - 1e30 * p)
  _assert_log_probs(train["start_log_probs"], start_lp, start_terms)
  _assert_log_probs(train["end_log_probs"], end_lp, end_terms)

  top = np.argsort(-start_lp, -1)[:, :k]
  np.testing.assert_array_equal(beam["start_top_index"], top)
  for b in range(batch):
    for i, s in enumerate(top[b]):
      lp = _log_softmax(end_logits(x[b], x[b, s][None].repeat(seq, 0)) * (1 - p[b])
                        - 1e30 * p[b])
      best = np.argsort(-lp)[:k_end]
      np.testing.assert_array_equal(beam["end_top_index"][b, i * k_end:(i + 1) * k_end], best)
      _assert_log_probs(beam["end_top_log_probs"][b, i * k_end:(i + 1) * k_end], lp[best],
                        end_terms)

  start_p = np.exp(_log_softmax(start_masked))
  feature = np.concatenate([(start_p[..., None] * x).sum(1), x[:, 0]], -1)
  cls = (np.tanh(feature @ v["answer_class/dense_0/kernel"] + v["answer_class/dense_0/bias"])
         @ v["answer_class/dense_1/kernel"])[:, 0]
  # The start probabilities' chain, the feature's sum over seq, dense_0 over 2H, dense_1 over
  # H, at the scale of dense_1's terms (its sum may cancel).
  cls_terms = start_terms + seq + 2 * hidden + hidden
  hidden_cls = np.tanh(feature @ v["answer_class/dense_0/kernel"] + v["answer_class/dense_0/bias"])
  atol = float32_atol(np.abs(hidden_cls) @ np.abs(v["answer_class/dense_1/kernel"]), cls_terms)
  np.testing.assert_allclose(beam["cls_logits"], cls, rtol=0, atol=atol)
  np.testing.assert_allclose(train["cls_logits"], cls, rtol=0, atol=atol)


@pytest.mark.parametrize("version_2", [False, True])
def test_original_tf1_squad_checkpoints_load(config, tmp_path, version_2):
  model = AlbertSquad(config, version_2=version_2)
  head_names = V2_HEAD if version_2 else V1_HEAD
  names = {n: v for n, v in tf1_variable_map(model).items() if n.startswith("bert/")}
  rng = np.random.default_rng(1)
  values = {n: rng.normal(size=v.shape).astype(np.float32) for n, v in names.items()}
  values.update({n: rng.normal(size=_shape(s, config.hidden_size)).astype(np.float32)
                 for n, s in head_names.items()})
  values["global_step"] = np.int64(7)
  prefix = str(tmp_path / "model.ckpt-7")
  ordered = sorted(values)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=ordered, shape_and_slices=[""] * len(ordered),
                    tensors=[tf.constant(values[n]) for n in ordered])
  report = load_checkpoint(model, prefix)
  assert not report.missing and not report.unused
  loaded = tf1_variable_map(model)
  for name in head_names:
    np.testing.assert_array_equal(loaded[name].numpy(), values[name])
