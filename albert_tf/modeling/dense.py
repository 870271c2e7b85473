"""TokenDense: a Dense layer applied to every token as one matrix product."""

import tensorflow as tf
import tf_keras


class TokenDense(tf_keras.layers.Dense):
  """`tf_keras.layers.Dense` for `[batch, seq, in]` inputs, computed as one `[batch*seq, in]`
  product: the MatMul and BiasAdd are then adjacent, and TensorFlow fuses them into one
  kernel (`_FusedMatMul`). Keras' Dense goes through `tensordot`, whose reshape between the
  two stops the fusion. Same variables, names and products; `[batch, seq, units]` out.
  """

  def call(self, inputs):
    if inputs.shape.rank is None or inputs.shape.rank <= 2:
      return super().call(inputs)
    leading = tf.shape(inputs)[:-1]
    flat = super().call(tf.reshape(inputs, [-1, inputs.shape[-1]]))
    outputs = tf.reshape(flat, tf.concat([leading, [self.units]], 0))
    outputs.set_shape(inputs.shape[:-1].concatenate([self.units]))
    return outputs
