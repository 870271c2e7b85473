"""Self-checks of the NumPy ALBERT reference (tests/reference_albert.py)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_albert as ref  # noqa: E402


def _base(**kw):
  cfg = dict(ref.ALBERT_BASE_V2)
  cfg.update(kw)
  return cfg


def _tiny(**kw):
  cfg = dict(ref.TINY_CONFIG)
  cfg.update(kw)
  return cfg


def _inputs(cfg, seed=0, B=3, S=10, lengths=(10, 6, 3)):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, cfg["vocab_size"], size=(B, S))
  mask = np.zeros((B, S), dtype=np.int64)
  tt = np.zeros((B, S), dtype=np.int64)
  for b, n in enumerate(lengths):
    mask[b, :n] = 1
    tt[b, n // 2:n] = 1
    ids[b, n:] = 0
  return ids, mask, tt


def assert_float64_close(got, want, terms):
  """Two float64 computations of the same values in other op orders (einsums against the hand
  written steps): 4 float64 ulps of the largest magnitude of `want` per addition, `terms` the
  longest chain of additions behind a value."""
  want = np.asarray(want, np.float64)
  atol = 4 * np.spacing(np.max(np.abs(want))) * terms
  np.testing.assert_allclose(got, want, rtol=0, atol=atol)


# ----------------------------------------------------------------- parameter counts


def test_base_v2_counts():
  assert ref.count_encoder_params(ref.ALBERT_BASE_V2) == 11_683_584
  assert ref.count_params(ref.ALBERT_BASE_V2, heads=True) == 11_813_810


@pytest.mark.parametrize("H,I,heads,L,expected", [
  (1024, 4096, 16, 24, 17_683_968),
  (2048, 8192, 16, 24, 58_724_864),
  (2048, 8192, 32, 24, 58_724_864),
  (4096, 16384, 64, 12, 222_595_584),
])
def test_larger_configs_counts(H, I, heads, L, expected):
  cfg = _base(hidden_size=H, intermediate_size=I, num_attention_heads=heads,
        num_hidden_layers=L)
  assert ref.count_encoder_params(cfg) == expected


@pytest.mark.parametrize("E,sharing,expected", [
  (64, "none", 87_648_000),
  (64, "all", 9_681_408),
  (128, "none", 89_650_176),
  (128, "all", 11_683_584),
  (128, "attention", 63_647_232),
  (128, "ffn", 37_686_528),
  (256, "none", 93_654_528),
  (256, "all", 15_687_936),
  (768, "none", 109_081_344),
  (768, "all", 31_114_752),
  (768, "attention", 83_078_400),
  (768, "ffn", 57_117_696),
])
def test_ablation_table_counts(E, sharing, expected):
  assert ref.count_encoder_params(_base(embedding_size=E, sharing=sharing)) == expected


def test_naming_scheme():
  names = ref.tf1_variable_shapes(_base(embedding_size=768))
  assert not any("embedding_hidden_mapping_in" in n for n in names)
  names = ref.tf1_variable_shapes(_base())
  assert names["bert/encoder/embedding_hidden_mapping_in/kernel"] == (128, 768)
  assert not any(n.startswith("cls/") for n in names)
  root = "bert/encoder/transformer"
  assert {n.split("/")[3] for n in names if n.startswith(root)} == {"group_0"}

  att = ref.tf1_variable_shapes(_base(sharing="attention"))
  g0 = {n for n in att if n.startswith(f"{root}/group_0/")}
  g1 = {n for n in att if n.startswith(f"{root}/group_1/")}
  assert len(g0) == 16 and f"{root}/group_0/inner_group_0/LayerNorm/gamma" in g0
  assert g1 == {f"{root}/group_1/inner_group_0/{s}" for s in (
    "ffn_1/intermediate/dense/kernel", "ffn_1/intermediate/dense/bias",
    "ffn_1/intermediate/output/dense/kernel", "ffn_1/intermediate/output/dense/bias",
    "LayerNorm_1/beta", "LayerNorm_1/gamma")}
  assert att[f"{root}/group_1/inner_group_0/ffn_1/intermediate/output/dense/kernel"] == (
    3072, 768)

  none = ref.tf1_variable_shapes(_base(sharing="none"))
  groups = {n.split("/")[3] for n in none if n.startswith(root)}
  assert groups == {f"group_{i}" for i in range(12)}

  # Groups and inner groups: L=4, G=2 -> layers 0,1 -> group_0; 2,3 -> group_1.
  gk = ref.tf1_variable_shapes(_base(num_hidden_layers=4, num_hidden_groups=2,
                    inner_group_num=2))
  scopes = {"/".join(n.split("/")[3:5]) for n in gk if n.startswith(root)}
  assert scopes == {f"group_{g}/inner_group_{k}" for g in range(2) for k in range(2)}

  heads = ref.tf1_variable_shapes(_base(), heads=True)
  assert heads["cls/seq_relationship/output_weights"] == (2, 768)
  assert heads["cls/predictions/transform/dense/kernel"] == (768, 128)
  assert heads["cls/predictions/output_bias"] == (30000,)


def test_random_weights_nontrivial_and_deterministic():
  cfg = _tiny(sharing="none")
  w = ref.random_tf1_weights(cfg, heads=True, seed=3)
  assert set(w) == set(ref.tf1_variable_shapes(cfg, heads=True))
  for name, v in w.items():
    assert v.dtype == np.float32 and v.shape == ref.tf1_variable_shapes(cfg, True)[name]
    assert np.all(v != 0.0) and np.all(v != 1.0), name
    assert np.std(v) > 0, name
  w2 = ref.random_tf1_weights(cfg, heads=False, seed=3)
  for name, v in w2.items():
    np.testing.assert_array_equal(v, w[name])
  w3 = ref.random_tf1_weights(cfg, heads=True, seed=4)
  assert not np.array_equal(w3["bert/pooler/dense/kernel"], w["bert/pooler/dense/kernel"])


# ----------------------------------------------------------------- checkpoint writer


def _read_all(prefix):
  import tensorflow as tf
  listed = dict(tf.train.list_variables(prefix))
  reader = tf.train.load_checkpoint(prefix)
  return listed, {n: reader.get_tensor(n) for n in listed}


@pytest.mark.parametrize("slots,hub", [(False, False), (True, False), (False, True),
                    (True, True)])
def test_checkpoint_round_trip(tmp_path, slots, hub):
  cfg = _tiny(num_hidden_groups=2, inner_group_num=2, sharing="ffn")
  w = ref.random_tf1_weights(cfg, heads=True)
  prefix = str(tmp_path / "ckpt" / "model.ckpt-1000")
  ref.write_tf1_checkpoint(prefix, w, with_optimizer_slots=slots, hub_prefix=hub)
  listed, values = _read_all(prefix)

  p = "module/" if hub else ""
  expected = {p + n: tuple(v.shape) for n, v in w.items()}
  if slots:
    for n, v in w.items():
      expected[f"{p}{n}/adam_m"] = tuple(v.shape)
      expected[f"{p}{n}/adam_v"] = tuple(v.shape)
    expected[p + "global_step"] = ()
  assert {n: tuple(s) for n, s in listed.items()} == expected
  for n, v in w.items():
    np.testing.assert_array_equal(values[p + n], v)
    assert values[p + n].dtype == np.float32
  if slots:
    assert int(values[p + "global_step"]) == 1000

  import tensorflow as tf
  assert tf.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith("model.ckpt-1000")
  # The reference ignores prefixes and slots.
  ids, mask, tt = _inputs(cfg)
  a = ref.reference_forward(values, cfg, ids, mask, tt)
  b = ref.reference_forward(w, cfg, ids, mask, tt)
  np.testing.assert_array_equal(a["sequence_output"], b["sequence_output"])


# ----------------------------------------------------------------- forward pass


CONFIGS = [
  _tiny(),
  _tiny(sharing="none"),
  _tiny(sharing="attention", ln_type="preln", hidden_act="gelu_exact"),
  _tiny(sharing="ffn", num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
     hidden_act="relu"),
  _tiny(embedding_size=16, hidden_act="swish"),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_forward_shapes_and_padding(cfg):
  w = ref.random_tf1_weights(cfg, heads=True, seed=1)
  ids, mask, tt = _inputs(cfg)
  positions = np.array([[1, 4, 9], [0, 2, 5], [1, 2, 0]])
  out = ref.reference_forward(w, cfg, ids, mask, tt, masked_lm_positions=positions)
  B, S = ids.shape
  E, H, V = cfg["embedding_size"], cfg["hidden_size"], cfg["vocab_size"]
  L, K = cfg["num_hidden_layers"], cfg["inner_group_num"]
  assert out["embedding_output"].shape == (B, S, E)
  assert len(out["encoder_outputs"]) == L * K
  for e in out["encoder_outputs"]:
    assert e.shape == (B, S, H)
  assert out["sequence_output"] is out["encoder_outputs"][-1]
  assert out["pooled_output"].shape == (B, H)
  assert out["mlm_logits"].shape == (B, 3, V)
  assert out["sop_logits"].shape == (B, 2)
  for key in ("embedding_output", "sequence_output", "pooled_output", "mlm_logits",
        "sop_logits"):
    assert out[key].dtype == np.float64
    assert np.all(np.isfinite(out[key])), key
  # Activations neither vanish nor explode.
  seq_std = out["sequence_output"].std()
  assert 0.05 < seq_std < 20, seq_std
  assert 0.1 < out["mlm_logits"].std() < 50
  # Blocks actually differ from each other.
  assert not np.allclose(out["encoder_outputs"][0], out["encoder_outputs"][-1])

  # Changing ids / token types at padded positions leaves real positions unchanged.
  rng = np.random.default_rng(7)
  ids2, tt2 = ids.copy(), tt.copy()
  pad = mask == 0
  ids2[pad] = rng.integers(1, V, size=pad.sum())
  tt2[pad] = 1 - tt2[pad]
  out2 = ref.reference_forward(w, cfg, ids2, mask, tt2, masked_lm_positions=positions)
  real = mask == 1
  # Exactly: the same ops on the same shapes, and a padded key's weight exp(score - 10000 - max)
  # underflows to 0 in float64 whatever its id, so it adds exactly 0 to every real position.
  for a, b in zip(out["encoder_outputs"], out2["encoder_outputs"]):
    np.testing.assert_array_equal(a[real], b[real])
  np.testing.assert_array_equal(out["pooled_output"], out2["pooled_output"])
  np.testing.assert_array_equal(out["sop_logits"], out2["sop_logits"])
  assert not np.allclose(out["sequence_output"][pad], out2["sequence_output"][pad])

  # A padded example equals the same example run alone without its padding.
  n = int(mask[1].sum())
  alone = ref.reference_forward(w, cfg, ids[1:2, :n], mask[1:2, :n], tt[1:2, :n])
  # Other shapes, so other blockings of the matrix products: float64 rounding of the E-term
  # projection and L * K blocks' sums over I and H.
  assert_float64_close(alone["sequence_output"][0], out["sequence_output"][1, :n],
                       E + L * K * (cfg["intermediate_size"] + H))


@pytest.mark.parametrize("cfg", CONFIGS[:3])
def test_mask_matters(cfg):
  w = ref.random_tf1_weights(cfg, heads=False, seed=2)
  ids, _, tt = _inputs(cfg, lengths=(10, 10, 10))
  full = np.ones_like(ids)
  part = full.copy()
  part[:, 7:] = 0
  a = ref.reference_forward(w, cfg, ids, full, tt)
  b = ref.reference_forward(w, cfg, ids, part, tt)
  assert "sop_logits" not in a and "mlm_logits" not in a
  np.testing.assert_array_equal(a["embedding_output"], b["embedding_output"])
  diff = np.abs(a["sequence_output"][:, :7] - b["sequence_output"][:, :7]).max()
  assert diff > 1e-3
  # Defaults: no mask = all ones, no token types = zeros.
  c = ref.reference_forward(w, cfg, ids, None, None)
  d = ref.reference_forward(w, cfg, ids, full, np.zeros_like(ids))
  np.testing.assert_array_equal(c["sequence_output"], d["sequence_output"])


def test_unshared_copies_equal_shared():
  """'none' with every layer holding group_0's weights == 'all'; naming is consistent."""
  shared_cfg = _tiny(num_hidden_layers=3)
  w = ref.random_tf1_weights(shared_cfg, heads=True, seed=5)
  ids, mask, tt = _inputs(shared_cfg)
  base_out = ref.reference_forward(w, shared_cfg, ids, mask, tt, np.zeros((3, 2), int))
  for sharing in ("none", "attention", "ffn"):
    cfg = _tiny(num_hidden_layers=3, sharing=sharing)
    w2 = {}
    for name in ref.tf1_variable_shapes(cfg, heads=True):
      parts = name.split("/")
      if name.startswith("bert/encoder/transformer/"):
        parts[3] = "group_0"
      w2[name] = w["/".join(parts)]
    out = ref.reference_forward(w2, cfg, ids, mask, tt, np.zeros((3, 2), int))
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
      np.testing.assert_array_equal(out[key], base_out[key])


def test_manual_single_token():
  """One token, one layer, E == H: attention reduces to the value path; check by hand."""
  cfg = _tiny(embedding_size=16, num_hidden_layers=1, hidden_act="tanh")
  w = {k: v.astype(np.float64) for k, v in ref.random_tf1_weights(cfg, seed=9).items()}
  ids, tt = np.array([[7]]), np.array([[1]])
  out = ref.reference_forward(w, cfg, ids, np.ones((1, 1)), tt,
                masked_lm_positions=np.array([[0]]))

  def ln(x, s):
    m = x.mean()
    return (x - m) / np.sqrt(((x - m) ** 2).mean() + 1e-12) * w[s + "/gamma"] + w[s + "/beta"]

  e = (w["bert/embeddings/word_embeddings"][7] + w["bert/embeddings/token_type_embeddings"][1]
     + w["bert/embeddings/position_embeddings"][0])
  x = ln(e, "bert/embeddings/LayerNorm")
  s = "bert/encoder/transformer/group_0/inner_group_0/"
  v = x @ w[s + "attention_1/self/value/kernel"] + w[s + "attention_1/self/value/bias"]
  a = v @ w[s + "attention_1/output/dense/kernel"] + w[s + "attention_1/output/dense/bias"]
  x1 = ln(x + a, s + "LayerNorm")
  h = np.tanh(x1 @ w[s + "ffn_1/intermediate/dense/kernel"]
        + w[s + "ffn_1/intermediate/dense/bias"])
  y = h @ w[s + "ffn_1/intermediate/output/dense/kernel"] + w[
    s + "ffn_1/intermediate/output/dense/bias"]
  x2 = ln(x1 + y, s + "LayerNorm_1")
  # Up to x2: the value, attention output and intermediate dense layers' sums over H, the FFN
  # output's over I, and three LayerNorms' means and variances over H (H = E = 16, I = 32).
  terms = 9 * 16 + 32
  assert_float64_close(out["sequence_output"][0, 0], x2, terms)
  pooled = np.tanh(x2 @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
  assert_float64_close(out["pooled_output"][0], pooled, terms + 16)  # the pooler's H
  t = np.tanh(x2 @ w["cls/predictions/transform/dense/kernel"]
        + w["cls/predictions/transform/dense/bias"])
  t = ln(t, "cls/predictions/transform/LayerNorm")
  logits = t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
  assert_float64_close(out["mlm_logits"][0, 0], logits, terms + 4 * 16)  # H, its LayerNorm's 2H, E
  sop = w["cls/seq_relationship/output_weights"] @ pooled + w["cls/seq_relationship/output_bias"]
  assert_float64_close(out["sop_logits"][0], sop, terms + 2 * 16)  # the pooler's H, then H


def test_activations():
  x = np.linspace(-4, 4, 81)
  g, ge = ref.activation("gelu", x), ref.activation("gelu_exact", x)
  assert np.abs(g - ge).max() < 1e-3 and np.abs(g - ge).max() > 1e-6
  np.testing.assert_allclose(ref.activation("swish", x), x / (1 + np.exp(-x)))
  np.testing.assert_array_equal(ref.activation("relu", x), np.maximum(x, 0))
  np.testing.assert_array_equal(ref.activation("linear", x), x)
  with pytest.raises(ValueError):
    ref.activation("nope", x)
