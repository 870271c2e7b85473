"""Activation functions by their albert_config.json names."""

import math

import tensorflow as tf


def gelu(x):
  """GELU, tanh approximation: what the original's `gelu` computes (and its configs mean)."""
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


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
