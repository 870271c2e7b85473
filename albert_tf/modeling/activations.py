"""Activation functions by their albert_config.json names."""

import math

import tensorflow as tf


_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _gelu_cdf(x):
  return 0.5 * (1.0 + tf.tanh(_GELU_C * (x + _GELU_A * tf.pow(x, 3))))


@tf.custom_gradient
def gelu(x):
  """GELU, tanh approximation: what the original's `gelu` computes (and its configs mean).

  The forward pass is the original's formula op for op. The gradient is written out and
  recomputed from `x` alone, so a training step keeps one tensor per application instead of
  the formula's five intermediates (each as large as the FFN's `[tokens, intermediate]`).
  """
  y = x * _gelu_cdf(x)

  def grad(dy):
    t = tf.tanh(_GELU_C * (x + _GELU_A * tf.pow(x, 3)))
    dt = (1.0 - t * t) * (_GELU_C * (1.0 + 3.0 * _GELU_A * x * x))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * dt)

  return y, grad


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


def get_activation(name):
  """The function for a config's `hidden_act` (case-insensitive)."""
  try:
    return _ACTIVATIONS[name.lower()]
  except (KeyError, AttributeError):
    raise ValueError(f"Unsupported activation {name!r}; choose one of "
                     f"{sorted(_ACTIVATIONS)}") from None
