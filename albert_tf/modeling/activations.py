"""Activation functions by their albert_config.json names."""

import contextlib
import math
import threading

import tensorflow as tf


_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _gelu_formula(x):
  """The original's `0.5 * x * (1 + tanh(c * (x + a * x^3)))` written as
  `x * sigmoid(2c * x + 2ca * x^3)` (0.5 * (1 + tanh(z)) is sigmoid(2z)): six elementwise
  passes instead of nine, which a served graph (no XLA) runs one by one; within 6e-7 of the
  float64 formula where the tanh form is within 1.1e-6 (x in [-12, 12]).
  """
  return x * tf.sigmoid(x * ((2.0 * _GELU_C) + (2.0 * _GELU_C * _GELU_A) * tf.square(x)))


def _gelu_gradient(x, dy):
  """`dy` times the derivative of the formula at `x`."""
  t = tf.tanh(_GELU_C * (x + _GELU_A * tf.pow(x, 3)))
  dt = (1.0 - t * t) * (_GELU_C * (1.0 + 3.0 * _GELU_A * x * x))
  return dy * (0.5 * (1.0 + t) + 0.5 * x * dt)


@tf.custom_gradient
def gelu(x):
  """GELU, tanh approximation: what the original's `gelu` computes (and its configs mean).

  The forward pass is the original's formula in its sigmoid form (`_gelu_formula`: the same
  function, fewer passes over the FFN's activations). The gradient is written out and
  recomputed from `x` alone, so a training step keeps one tensor per application instead of
  the formula's five intermediates (each as large as the FFN's `[tokens, intermediate]`).
  """
  return _gelu_formula(x), lambda dy: _gelu_gradient(x, dy)


def _in_float32(function):
  """`function` computed in float32 from bfloat16/float16 tensors, the result in their dtype.
  For XLA on CPUs: its bfloat16 elementwise code rounds after every op and ran the GELU 2.8x
  slower than the float32 formula with the casts fused in (ALBERT-base FFN activations,
  forward and gradient; docs/benchmarks-history.md), and rounding once is closer to the formula."""
  def computed(*tensors):
    dtype = tensors[0].dtype
    return tf.cast(function(*(tf.cast(t, tf.float32) for t in tensors)), dtype)
  return computed


_gelu_formula_xla = tf.function(_in_float32(_gelu_formula), jit_compile=True)
_gelu_gradient_xla = tf.function(_in_float32(_gelu_gradient), jit_compile=True)


@tf.custom_gradient
def gelu_xla(x):
  """`gelu` with its forward and its gradient each compiled by XLA into one elementwise pass
  (TensorFlow's kernels make one pass per op, about eight here): the training steps' GELU.
  Same formula, computed in float32 for bfloat16 inputs (rounded once, at the end); XLA's tanh
  rounds differently, within 2e-6 of `gelu` at unit scale. Exported models keep `gelu`, which
  needs no XLA at serving time.
  """
  return _gelu_formula_xla(x), lambda dy: _gelu_gradient_xla(x, dy)


def gelu_exact(x):
  """GELU with the exact Gaussian CDF (erf)."""
  return tf.nn.gelu(x, approximate=False)


def swish(x):
  return x * tf.sigmoid(x)


def linear(x):
  return x


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "swish": swish,
    "linear": linear,
}


# Training-time replacements: same function, faster kernels.
_TRAINING_ACTIVATIONS = {"gelu": gelu_xla}
_plain = threading.local()


@contextlib.contextmanager
def plain_activations():
  """Within it, training calls use the plain activations too. Exports save in it: Keras traces
  its layers in training mode when saving, and a SavedModel must not need XLA to load or serve
  (TF Serving's XLA is off by default)."""
  previous = getattr(_plain, "active", False)
  _plain.active = True
  try:
    yield
  finally:
    _plain.active = previous


def training_variants_enabled():
  return not getattr(_plain, "active", False)


def use_training_variants(training):
  """Whether a layer call with this `training` uses the training steps' compiled variants (the
  GELU, LayerNorm and softmax): a Python True outside `plain_activations`. A symbolic
  `training` (Keras traces both modes when saving) keeps the plain ops."""
  return training is True and training_variants_enabled()


def get_activation(name, training=False):
  """The function for a config's `hidden_act` (case-insensitive); with `training`, the variant
  used in training steps where one exists (`gelu_xla` for `gelu`)."""
  if training and isinstance(name, str) and name.lower() in _TRAINING_ACTIVATIONS:
    return _TRAINING_ACTIVATIONS[name.lower()]
  try:
    return _ACTIVATIONS[name.lower()]
  except (KeyError, AttributeError):
    raise ValueError(f"Unsupported activation {name!r}; choose one of "
                     f"{sorted(_ACTIVATIONS)}") from None
