"""TokenDense: a Dense layer applied to every token as one matrix product."""

import tensorflow as tf
import tf_keras


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
    outputs = tf.matmul(flat, self.kernel)
    if self.use_bias:
      outputs = add_bias(outputs, self.bias)
    if self.activation is not None:
      outputs = self.activation(outputs)
    if rank == 2:
      return outputs
    outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], 0))
    outputs.set_shape(inputs.shape[:-1].concatenate([self.units]))
    return outputs
