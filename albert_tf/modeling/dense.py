"""TokenDense: a Dense layer applied to every token as one matrix product."""

import contextlib
import threading

import tensorflow as tf
import tf_keras

_casts = threading.local()


@contextlib.contextmanager
def kernels_cast_once():
  """Within it, a `TokenDense` kernel that a mixed policy casts (float32 -> bfloat16/float16) is
  cast once per graph and the copy reused by every later use: an ALBERT block applied 12 times
  otherwise casts its 7.1M weights 12 times per call (Keras casts at every read). The gradient
  still reaches the float32 variable once per use, cast back to float32 there and summed in
  float32, as without it. `AlbertEncoder` enters it for each call: within one call the weights
  do not change."""
  previous = getattr(_casts, "cache", None)
  _casts.cache = {}
  try:
    yield
  finally:
    _casts.cache = previous


def _kernel(layer):
  """`layer.kernel` in the compute dtype, from the `kernels_cast_once` cache where one is open."""
  kernel = layer.kernel
  cache = getattr(_casts, "cache", None)
  variable = getattr(kernel, "_variable", None)  # the float32 variable of an AutoCastVariable
  if cache is None or variable is None or variable.dtype == layer.compute_dtype:
    return kernel
  key = (id(variable), id(tf.compat.v1.get_default_graph()))
  if key not in cache:
    value = tf.convert_to_tensor(variable)
    cache[key] = (value, tf.stop_gradient(tf.cast(value, layer.compute_dtype)))
  value, cast = cache[key]

  @tf.custom_gradient
  def use(value):
    return tf.identity(cast), lambda dy: tf.cast(dy, value.dtype)

  return use(value)


def add_bias(x, bias):
  """`x + bias` over the last axis, its bias gradient summed in float32.

  TensorFlow's CPU `BiasAddGrad` sums bfloat16 in bfloat16 (4096 rows of ones give 256), so
  under `mixed_bfloat16` a bias's gradient over batch*seq rows kept about 8 bits of a long
  sum. The gradient of a broadcasting add is a `Sum`, which accumulates in float32. Other
  dtypes keep `bias_add`, which TensorFlow fuses with the MatMul before it.
  """
  if x.dtype == tf.bfloat16:
    return x + bias
  return tf.nn.bias_add(x, bias)


class TokenDense(tf_keras.layers.Dense):
  """`tf_keras.layers.Dense` for inputs `[..., in]` of any rank, computed as one `[rows, in]`
  product: the MatMul and BiasAdd are then adjacent, and TensorFlow fuses them into one
  kernel (`_FusedMatMul`). Keras' Dense goes through `tensordot` for rank 3 and above, whose
  reshape between the two stops the fusion. Same variables, names and products;
  `[..., units]` out. Under a bfloat16 policy the bias gradient is summed in float32
  (`add_bias`).
  """

  def call(self, inputs):
    rank = inputs.shape.rank
    if rank is None or rank < 2:
      return super().call(inputs)
    inputs = tf.cast(inputs, self.compute_dtype)
    flat = inputs if rank == 2 else tf.reshape(inputs, [-1, inputs.shape[-1]])
    outputs = tf.matmul(flat, _kernel(self))
    if self.use_bias:
      outputs = add_bias(outputs, self.bias)
    if self.activation is not None:
      outputs = self.activation(outputs)
    if rank == 2:
      return outputs
    outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], 0))
    outputs.set_shape(inputs.shape[:-1].concatenate([self.units]))
    return outputs
