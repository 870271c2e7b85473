"""Compute precision: the flag's names and Keras' global dtype policy they stand for."""

import contextlib

import tf_keras

PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


@contextlib.contextmanager
def precision_policy(name):
  """Keras' global dtype policy for the models built inside; restored after."""
  if name not in PRECISIONS:
    raise ValueError(f"--mixed_precision={name} is not one of {', '.join(PRECISIONS)}")
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(PRECISIONS[name])
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
