"""Independent float64 NumPy reference of the original (TF1) ALBERT forward pass.

Test-support only: nothing here is model code. It is written from the formulas in
SPEC.md ("TF1 checkpoint variable names") and DESIGN.md ("Model contract") so that the
TensorFlow model can be checked against it, weight for weight, by TF1 variable name.

Public helpers:
 tf1_variable_shapes(cfg, heads=False)      -> {name: shape} in checkpoint naming
 random_tf1_weights(cfg, heads=True, seed=0) -> {name: float32 array}
 write_tf1_checkpoint(path_prefix, arrays, with_optimizer_slots=False, hub_prefix=False)
 reference_forward(weights, cfg, input_ids, input_mask, token_type_ids,
          masked_lm_positions=None) -> dict of float64 arrays
 count_encoder_params(cfg) -> int

Config keys (dict, or an object with those attributes): vocab_size, embedding_size,
hidden_size, intermediate_size, num_hidden_layers, num_hidden_groups (default 1),
inner_group_num (default 1), num_attention_heads, max_position_embeddings,
type_vocab_size, hidden_act (default "gelu"), and the extensions `sharing`
("all" | "attention" | "ffn" | "none", default "all") and `ln_type`
("postln" | "preln", default "postln").

Sharing naming (our extension, the original only has "all"): layer i of L uses group
g = int(i / L * G). Its attention sub-layer (attention_1/... and LayerNorm) lives under
group_{g} when attention is shared ("all", "attention"), else under group_{i}; its FFN
sub-layer (ffn_1/... and LayerNorm_1) under group_{g} when the FFN is shared ("all",
"ffn"), else under group_{i}. Inner block k of that layer is inner_group_{k}.
"""

from __future__ import annotations

import math
import os
import zlib
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

LAYER_NORM_EPS = 1e-12
MASK_ADDER = -10000.0
SHARING_MODES = ("all", "attention", "ffn", "none")
LN_TYPES = ("postln", "preln")

# Handy configs for tests.
ALBERT_BASE_V2 = dict(
  vocab_size=30000, embedding_size=128, hidden_size=768, intermediate_size=3072,
  num_hidden_layers=12, num_hidden_groups=1, inner_group_num=1,
  num_attention_heads=12, max_position_embeddings=512, type_vocab_size=2,
  hidden_act="gelu",
)

TINY_CONFIG = dict(
  vocab_size=50, embedding_size=8, hidden_size=16, intermediate_size=32,
  num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1,
  num_attention_heads=4, max_position_embeddings=24, type_vocab_size=2,
  hidden_act="gelu",
)

_DEFAULTS = dict(num_hidden_groups=1, inner_group_num=1, hidden_act="gelu",
         sharing="all", ln_type="postln")


# --------------------------------------------------------------------------- config


def _get(cfg: Any, key: str):
  if isinstance(cfg, dict):
    if key in cfg and cfg[key] is not None:
      return cfg[key]
  elif getattr(cfg, key, None) is not None:
    return getattr(cfg, key)
  if key in _DEFAULTS:
    return _DEFAULTS[key]
  raise KeyError(f"config lacks {key!r}")


def _dims(cfg: Any) -> Dict[str, Any]:
  d = {k: _get(cfg, k) for k in (
    "vocab_size", "embedding_size", "hidden_size", "intermediate_size",
    "num_hidden_layers", "num_hidden_groups", "inner_group_num",
    "num_attention_heads", "max_position_embeddings", "type_vocab_size",
    "hidden_act", "sharing", "ln_type")}
  for k in ("vocab_size", "embedding_size", "hidden_size", "intermediate_size",
       "num_hidden_layers", "num_hidden_groups", "inner_group_num",
       "num_attention_heads", "max_position_embeddings", "type_vocab_size"):
    d[k] = int(d[k])
  if d["sharing"] not in SHARING_MODES:
    raise ValueError(f"sharing must be one of {SHARING_MODES}, got {d['sharing']!r}")
  if d["ln_type"] not in LN_TYPES:
    raise ValueError(f"ln_type must be one of {LN_TYPES}, got {d['ln_type']!r}")
  if d["hidden_size"] % d["num_attention_heads"]:
    raise ValueError("hidden_size must be a multiple of num_attention_heads")
  return d


def layer_group(i: int, num_layers: int, num_groups: int) -> int:
  """Group index of layer i, exactly as the original computes it."""
  return int(i / num_layers * num_groups)


def block_scopes(cfg: Any, layer: int, inner: int) -> Tuple[str, str]:
  """(attention scope, ffn scope) of layer `layer`, inner block `inner`."""
  d = _dims(cfg)
  g = layer_group(layer, d["num_hidden_layers"], d["num_hidden_groups"])
  a = g if d["sharing"] in ("all", "attention") else layer
  f = g if d["sharing"] in ("all", "ffn") else layer
  root = "bert/encoder/transformer"
  return (f"{root}/group_{a}/inner_group_{inner}",
      f"{root}/group_{f}/inner_group_{inner}")


# --------------------------------------------------------------------------- names


def _attention_shapes(scope: str, H: int) -> Dict[str, Tuple[int, ...]]:
  out = {}
  for part in ("query", "key", "value"):
    out[f"{scope}/attention_1/self/{part}/kernel"] = (H, H)
    out[f"{scope}/attention_1/self/{part}/bias"] = (H,)
  out[f"{scope}/attention_1/output/dense/kernel"] = (H, H)
  out[f"{scope}/attention_1/output/dense/bias"] = (H,)
  out[f"{scope}/LayerNorm/beta"] = (H,)
  out[f"{scope}/LayerNorm/gamma"] = (H,)
  return out


def _ffn_shapes(scope: str, H: int, I: int) -> Dict[str, Tuple[int, ...]]:
  return {
    f"{scope}/ffn_1/intermediate/dense/kernel": (H, I),
    f"{scope}/ffn_1/intermediate/dense/bias": (I,),
    f"{scope}/ffn_1/intermediate/output/dense/kernel": (I, H),
    f"{scope}/ffn_1/intermediate/output/dense/bias": (H,),
    f"{scope}/LayerNorm_1/beta": (H,),
    f"{scope}/LayerNorm_1/gamma": (H,),
  }


def tf1_variable_shapes(cfg: Any, heads: bool = False) -> Dict[str, Tuple[int, ...]]:
  """Every TF1 checkpoint variable name with its shape (insertion-ordered)."""
  d = _dims(cfg)
  V, E, H, I = d["vocab_size"], d["embedding_size"], d["hidden_size"], d["intermediate_size"]
  L, K = d["num_hidden_layers"], d["inner_group_num"]
  P, T = d["max_position_embeddings"], d["type_vocab_size"]

  shapes: Dict[str, Tuple[int, ...]] = {
    "bert/embeddings/word_embeddings": (V, E),
    "bert/embeddings/token_type_embeddings": (T, E),
    "bert/embeddings/position_embeddings": (P, E),
    "bert/embeddings/LayerNorm/beta": (E,),
    "bert/embeddings/LayerNorm/gamma": (E,),
  }
  if E != H:
    shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] = (E, H)
    shapes["bert/encoder/embedding_hidden_mapping_in/bias"] = (H,)

  # Collect (group, inner, kind) triples actually used, then emit in a stable order.
  used = set()
  for i in range(L):
    for k in range(K):
      a_scope, f_scope = block_scopes(cfg, i, k)
      used.add((a_scope, "attn"))
      used.add((f_scope, "ffn"))

  def sort_key(item):
    scope, kind = item
    parts = scope.split("/")
    g = int(parts[-2][len("group_"):])
    k = int(parts[-1][len("inner_group_"):])
    return (g, k, 0 if kind == "attn" else 1)

  for scope, kind in sorted(used, key=sort_key):
    if kind == "attn":
      shapes.update(_attention_shapes(scope, H))
    else:
      shapes.update(_ffn_shapes(scope, H, I))

  shapes["bert/pooler/dense/kernel"] = (H, H)
  shapes["bert/pooler/dense/bias"] = (H,)

  if heads:
    shapes["cls/predictions/transform/dense/kernel"] = (H, E)
    shapes["cls/predictions/transform/dense/bias"] = (E,)
    shapes["cls/predictions/transform/LayerNorm/beta"] = (E,)
    shapes["cls/predictions/transform/LayerNorm/gamma"] = (E,)
    shapes["cls/predictions/output_bias"] = (V,)
    shapes["cls/seq_relationship/output_weights"] = (2, H)
    shapes["cls/seq_relationship/output_bias"] = (2,)
  return shapes


def count_encoder_params(cfg: Any) -> int:
  """Encoder + pooler parameter count (no pretraining heads)."""
  return int(sum(int(np.prod(s)) for s in tf1_variable_shapes(cfg, heads=False).values()))


def count_params(cfg: Any, heads: bool = True) -> int:
  return int(sum(int(np.prod(s)) for s in tf1_variable_shapes(cfg, heads=heads).values()))


# --------------------------------------------------------------------------- weights


def _random_value(name: str, shape: Tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
  leaf = name.rsplit("/", 1)[-1]
  if leaf == "gamma":
    return 1.0 + rng.normal(0.0, 0.1, shape)
  if leaf in ("beta", "bias", "output_bias"):
    return rng.normal(0.0, 0.1, shape)
  if "embeddings" in leaf:  # word / position / token_type embeddings
    return rng.normal(0.0, 0.2, shape)
  if leaf == "output_weights":  # [out, in]
    return rng.normal(0.0, 0.8 / math.sqrt(shape[-1]), shape)
  if leaf == "kernel":  # [in, out]
    return rng.normal(0.0, 0.8 / math.sqrt(shape[0]), shape)
  return rng.normal(0.0, 0.2, shape)


def random_tf1_weights(cfg: Any, heads: bool = True, seed: int = 0) -> Dict[str, np.ndarray]:
  """Random float32 values for every TF1 variable of `cfg`.

  Each variable's values depend only on (seed, name, shape), so the encoder weights
  are the same with or without heads.
  """
  out = {}
  for name, shape in tf1_variable_shapes(cfg, heads=heads).items():
    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(name.encode("utf-8"))])
    out[name] = np.asarray(_random_value(name, shape, rng), dtype=np.float32)
  return out


# --------------------------------------------------------------------------- checkpoint


def write_tf1_checkpoint(path_prefix: str, arrays: Dict[str, np.ndarray],
             with_optimizer_slots: bool = False, hub_prefix: bool = False,
             global_step: int = 1000, seed: int = 1,
             write_state_file: bool = True) -> Dict[str, np.ndarray]:
  """Write a TF1-format (V2 bundle) checkpoint holding exactly `arrays`.

  with_optimizer_slots: also `global_step` (int64 scalar) and `<var>/adam_m`,
  `<var>/adam_v` (float32, same shape as the variable) for every variable.
  hub_prefix: prefix every name with `module/` (TF-Hub TF1 module layout).
  write_state_file: also write the `checkpoint` state file next to it so that
  tf.train.latest_checkpoint(dirname) finds it.
  Returns the dict of everything written (name -> array), as stored.
  """
  import tensorflow as tf  # local import: the rest of this module is NumPy-only

  written: Dict[str, np.ndarray] = {}
  for name, value in arrays.items():
    written[name] = np.asarray(value)
  if with_optimizer_slots:
    rng = np.random.default_rng(seed)
    for name, value in list(arrays.items()):
      v = np.asarray(value)
      written[f"{name}/adam_m"] = rng.normal(0.0, 1e-3, v.shape).astype(v.dtype)
      written[f"{name}/adam_v"] = np.abs(rng.normal(0.0, 1e-6, v.shape)).astype(v.dtype)
    written["global_step"] = np.asarray(global_step, dtype=np.int64)
  if hub_prefix:
    written = {f"module/{k}": v for k, v in written.items()}

  names = sorted(written)
  dirname = os.path.dirname(os.path.abspath(path_prefix))
  os.makedirs(dirname, exist_ok=True)
  if not tf.executing_eagerly():
    raise RuntimeError("write_tf1_checkpoint needs eager execution")
  with tf.device("CPU:0"):
    tf.raw_ops.SaveV2(
      prefix=tf.constant(path_prefix),
      tensor_names=tf.constant(names),
      shape_and_slices=tf.constant([""] * len(names)),
      tensors=[tf.constant(written[n]) for n in names],
    )
  if write_state_file:
    base = os.path.basename(path_prefix)
    with open(os.path.join(dirname, "checkpoint"), "w") as fh:
      fh.write(f'model_checkpoint_path: "{base}"\n')
      fh.write(f'all_model_checkpoint_paths: "{base}"\n')
  return written


# --------------------------------------------------------------------------- forward


def _erf(x: np.ndarray) -> np.ndarray:
  try:
    from scipy.special import erf
    return erf(x)
  except ImportError:  # pragma: no cover
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def activation(name: str, x: np.ndarray) -> np.ndarray:
  name = (name or "linear").lower()
  if name == "gelu":
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
  if name in ("gelu_exact", "gelu_new_exact"):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
  if name == "relu":
    return np.maximum(x, 0.0)
  if name == "tanh":
    return np.tanh(x)
  if name in ("swish", "silu"):
    return x / (1.0 + np.exp(-x))
  if name in ("linear", "identity", "none"):
    return x
  raise ValueError(f"unknown activation {name!r}")


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
        eps: float = LAYER_NORM_EPS) -> np.ndarray:
  mean = x.mean(axis=-1, keepdims=True)
  var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _softmax(x: np.ndarray) -> np.ndarray:
  x = x - x.max(axis=-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=-1, keepdims=True)


def _normalise_weights(weights: Dict[str, Any]) -> Dict[str, np.ndarray]:
  w = {}
  for k, v in weights.items():
    if k.startswith("module/"):
      k = k[len("module/"):]
    if k == "global_step" or k.endswith("/adam_m") or k.endswith("/adam_v"):
      continue
    w[k] = np.asarray(v, dtype=np.float64)
  return w


def _dense(w, scope, x):
  return x @ w[f"{scope}/kernel"] + w[f"{scope}/bias"]


def _attention(w, scope, x, mask_adder, num_heads):
  B, S, H = x.shape
  d = H // num_heads

  def split(t):  # [B,S,H] -> [B,heads,S,d]
    return t.reshape(B, S, num_heads, d).transpose(0, 2, 1, 3)

  q = split(_dense(w, f"{scope}/attention_1/self/query", x))
  k = split(_dense(w, f"{scope}/attention_1/self/key", x))
  v = split(_dense(w, f"{scope}/attention_1/self/value", x))
  scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + mask_adder
  probs = _softmax(scores)
  ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
  return _dense(w, f"{scope}/attention_1/output/dense", ctx)


def _ffn(w, scope, x, act):
  h = activation(act, _dense(w, f"{scope}/ffn_1/intermediate/dense", x))
  return _dense(w, f"{scope}/ffn_1/intermediate/output/dense", h)


def _ln(w, scope, x):
  return layer_norm(x, w[f"{scope}/gamma"], w[f"{scope}/beta"])


def reference_forward(weights: Dict[str, Any], cfg: Any, input_ids, input_mask=None,
           token_type_ids=None, masked_lm_positions=None) -> Dict[str, Any]:
  """Float64 inference forward pass of the original ALBERT (no dropout).

  Returns embedding_output [B,S,E] (after the embedding LayerNorm),
  projected_embedding_output [B,S,H] (after embedding_hidden_mapping_in, or the same as
  embedding_output when E == H), encoder_outputs (list of L*K arrays [B,S,H], one per
  block application), sequence_output [B,S,H], pooled_output [B,H]; with heads in the
  weights also sop_logits [B,2], and mlm_logits [B,P,V] when masked_lm_positions
  [B,P] is given. `module/` prefixes and optimizer slots in `weights` are ignored.
  """
  d = _dims(cfg)
  w = _normalise_weights(weights)
  ids = np.asarray(input_ids, dtype=np.int64)
  if ids.ndim != 2:
    raise ValueError("input_ids must be [batch, seq]")
  B, S = ids.shape
  mask = (np.ones((B, S)) if input_mask is None
      else np.asarray(input_mask, dtype=np.float64))
  tt = (np.zeros((B, S), dtype=np.int64) if token_type_ids is None
     else np.asarray(token_type_ids, dtype=np.int64))
  if S > d["max_position_embeddings"]:
    raise ValueError("sequence longer than max_position_embeddings")

  emb = (w["bert/embeddings/word_embeddings"][ids]
      + w["bert/embeddings/token_type_embeddings"][tt]
      + w["bert/embeddings/position_embeddings"][:S][None, :, :])
  emb = _ln(w, "bert/embeddings/LayerNorm", emb)
  out: Dict[str, Any] = {"embedding_output": emb}

  if "bert/encoder/embedding_hidden_mapping_in/kernel" in w:
    x = _dense(w, "bert/encoder/embedding_hidden_mapping_in", emb)
  else:
    x = emb
  out["projected_embedding_output"] = x

  mask_adder = (1.0 - mask[:, None, None, :]) * MASK_ADDER  # [B,1,1,S]
  act = d["hidden_act"]
  heads = d["num_attention_heads"]
  preln = d["ln_type"] == "preln"
  encoder_outputs: List[np.ndarray] = []
  for i in range(d["num_hidden_layers"]):
    for k in range(d["inner_group_num"]):
      a_scope, f_scope = block_scopes(cfg, i, k)
      if preln:
        x1 = x + _attention(w, a_scope, _ln(w, f"{a_scope}/LayerNorm", x),
                  mask_adder, heads)
        x = x1 + _ffn(w, f_scope, _ln(w, f"{f_scope}/LayerNorm_1", x1), act)
      else:
        x1 = _ln(w, f"{a_scope}/LayerNorm",
             x + _attention(w, a_scope, x, mask_adder, heads))
        x = _ln(w, f"{f_scope}/LayerNorm_1", x1 + _ffn(w, f_scope, x1, act))
      encoder_outputs.append(x)
  out["encoder_outputs"] = encoder_outputs
  out["sequence_output"] = x
  pooled = np.tanh(_dense(w, "bert/pooler/dense", x[:, 0]))
  out["pooled_output"] = pooled

  if "cls/seq_relationship/output_weights" in w:
    out["sop_logits"] = (pooled @ w["cls/seq_relationship/output_weights"].T
               + w["cls/seq_relationship/output_bias"])
  if masked_lm_positions is not None and "cls/predictions/output_bias" in w:
    pos = np.asarray(masked_lm_positions, dtype=np.int64)
    gathered = np.take_along_axis(x, pos[:, :, None], axis=1)  # [B,P,H]
    h = activation(act, _dense(w, "cls/predictions/transform/dense", gathered))
    h = _ln(w, "cls/predictions/transform/LayerNorm", h)
    out["mlm_logits"] = (h @ w["bert/embeddings/word_embeddings"].T
               + w["cls/predictions/output_bias"])
  return out
