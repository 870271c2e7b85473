"""The ALBERT block, split into its two sub-layers so either can be shared (paper Table 4).

A block is `attention sub-layer -> FFN sub-layer`. Each sub-layer owns its LayerNorm, matching
the original's names: `LayerNorm` after attention, `LayerNorm_1` after the FFN. Sharing means
passing the same sub-layer object to several blocks, so shared variables exist once.
"""

import tensorflow as tf
import tf_keras
from tensorflow.python.eager import record  # pylint: disable=g-direct-tensorflow-import

from albert_tf.modeling.activations import get_activation, use_training_variants
from albert_tf.modeling.attention import SelfAttention, dropout
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.embedding import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.modeling.layer_norm import layer_norm_xla


class _ResidualSublayer(tf_keras.layers.Layer):
  """`LN(x + dropout(f(x)))` (post-LN, the original) or `x + dropout(f(LN(x)))` (pre-LN)."""

  def __init__(self, dropout_rate, ln_type, layer_norm_name, **kwargs):
    super().__init__(**kwargs)
    if ln_type not in ("postln", "preln"):
      raise ValueError(f"ln_type must be 'postln' or 'preln', got {ln_type!r}")
    self.ln_type = ln_type
    self.dropout_rate = dropout_rate
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name=layer_norm_name)
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def transform(self, x, training, **kwargs):
    raise NotImplementedError

  def normalize(self, x, training):
    """The sub-layer's LayerNorm; training calls use `layer_norm_xla` (the same function, two
    compiled passes) once the layer has its weights."""
    ln = self.layer_norm
    if use_training_variants(training) and ln.built:
      return layer_norm_xla(x, ln.gamma, ln.beta, ln.epsilon)
    return ln(x)

  def call(self, x, training=None, seed=None, **kwargs):
    """`seed` (int32 `[2]`, optional): stateless dropout masks drawn from it (`seed`, and for
    the transform's own dropout `seed + [0, 1]`)."""
    if seed is not None:
      kwargs["seed"] = seed + tf.constant([0, 1], seed.dtype)
    if self.ln_type == "preln":
      y = self.transform(self.normalize(x, training), training=training, **kwargs)
      return x + dropout(self.dropout, y, training, seed)
    y = self.transform(x, training=training, **kwargs)
    return self.normalize(x + dropout(self.dropout, y, training, seed), training)


class AttentionSublayer(_ResidualSublayer):
  """Self-attention, output dense, dropout, residual and `LayerNorm`.

  Inputs: `x [batch, seq, hidden]`, `bias [batch, 1, 1, seq]`. Output: `[batch, seq, hidden]`.
  Original names: `attention_1/self/{query,key,value}`, `attention_1/output/dense`, `LayerNorm`.
  """

  def __init__(self, hidden_size, num_heads, attention_dropout_rate, dropout_rate,
               initializer_range, ln_type="postln", **kwargs):
    super().__init__(dropout_rate, ln_type, "LayerNorm", **kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.attention_dropout_rate = attention_dropout_rate
    self.initializer_range = initializer_range
    self.attention = SelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                   initializer_range, name="self")
    self.output_dense = TokenDense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="dense")

  def transform(self, x, training, bias, seed=None):
    return self.output_dense(self.attention(x, bias, training=training, seed=seed))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  attention_dropout_rate=self.attention_dropout_rate,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
                  ln_type=self.ln_type)
    return config


class FeedForwardSublayer(_ResidualSublayer):
  """Dense to `intermediate_size` with the activation, dense back, dropout, residual, `LayerNorm_1`.

  Input and output: `[batch, seq, hidden]`. Original names: `ffn_1/intermediate/dense`,
  `ffn_1/intermediate/output/dense`, `LayerNorm_1`.
  """

  def __init__(self, hidden_size, intermediate_size, activation, dropout_rate,
               initializer_range, ln_type="postln", **kwargs):
    super().__init__(dropout_rate, ln_type, "LayerNorm_1", **kwargs)
    self.hidden_size = hidden_size
    self.intermediate_size = intermediate_size
    self.activation = activation
    self.initializer_range = initializer_range
    # The activation is applied in `transform`: training calls use its faster variant.
    self.intermediate = TokenDense(
        intermediate_size, kernel_initializer=truncated_normal(initializer_range),
        name="intermediate")
    self._activation = get_activation(activation)
    self._training_activation = get_activation(activation, training=True)
    self.output_dense = TokenDense(
        hidden_size, kernel_initializer=truncated_normal(initializer_range), name="output")

  def transform(self, x, training, seed=None):
    del seed  # no dropout inside the FFN
    activation = (self._training_activation if use_training_variants(training)
                  else self._activation)
    return self.output_dense(activation(self.intermediate(x)))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                  activation=self.activation, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, ln_type=self.ln_type)
    return config


class TransformerBlock(tf_keras.layers.Layer):
  """One block application: `ffn(attention(x, bias))`; its sub-layers may be shared objects.

  Inputs: `x [batch, seq, hidden]`, `bias [batch, 1, 1, seq]`. Output: `[batch, seq, hidden]`.

  `recompute_grad` (see `set_recompute_grad`) marks the block for recomputation in the
  backward pass; `AlbertEncoder`'s training call then applies it through `recomputed_rounds`.
  """

  def __init__(self, attention_sublayer, ffn_sublayer, **kwargs):
    super().__init__(**kwargs)
    self.attention_sublayer = attention_sublayer
    self.ffn_sublayer = ffn_sublayer
    self.recompute_grad = False

  def apply_block(self, x, bias, training=None, seed=None):
    """The block on `x`; with `seed`, stateless dropout (`seed`, `seed + [0, 2]`)."""
    ffn_seed = None if seed is None else seed + tf.constant([0, 2], seed.dtype)
    x = self.attention_sublayer(x, bias=bias, training=training, seed=seed)
    return self.ffn_sublayer(x, training=training, seed=ffn_seed)

  def call(self, x, bias, training=None):
    return self.apply_block(x, bias, training=training)


def recomputed_rounds(blocks, rounds, x, bias, seed=None):
  """`rounds` passes of `blocks` (applied in order) over `x`, each application keeping only its
  input for the backward pass and recomputed there, as one loop: `--recompute_grad` for a run
  of layers that apply the same blocks (ALBERT's usual case: one block, applied L times; a
  layer that shares nothing with its neighbours is a run of one round).

  Recomputing each application by itself (`tf.recompute_grad` per call) leaves the gradient of
  a shared weight as L contributions that TensorFlow sums when the last one is ready, so all L
  are alive at once (ALBERT-base: about 28 MB of weight gradients per layer, 0.34 GB in all,
  at any batch size). Here the backward
  pass walks the applications in reverse in a `tf.while_loop`, recomputes each from its
  stored input, and adds its weight gradients to one running sum per weight. The forward
  pass keeps each application's input (what per-call recomputation keeps) and draws its
  dropout masks statelessly from one seed per call, offset by application, so the
  recomputation repeats them. Same outputs as applying the blocks one by one; gradients the
  same up to the order of the L-term sums.

  `seed` (int32 `[2]`, drawn per call if None): application `s` draws its masks from
  `seed + [s, 0]` (see `TransformerBlock.apply_block`). Returns `(output, outputs)`: the last
  output and every application's output stacked, `[rounds * len(blocks), batch, seq, hidden]`
  (the encoder's `encoder_outputs`).
  """
  n = len(blocks)
  total = rounds * n

  @tf.custom_gradient
  def run(x):
    base = (tf.random.uniform([2], maxval=tf.int32.max - total, dtype=tf.int32)
            if seed is None else tf.convert_to_tensor(seed, tf.int32))

    def step_seed(step):
      return base + tf.stack([step, 0])

    with record.stop_recording():  # the backward pass below is the only one
      outputs = tf.TensorArray(x.dtype, size=total, element_shape=x.shape)

      def forward(i, h, outputs):
        for j, block in enumerate(blocks):
          h = block.apply_block(h, bias, True, step_seed(i * n + j))
          outputs = outputs.write(i * n + j, h)
        return i + 1, h, outputs

      _, y, outputs = tf.while_loop(lambda i, h, o: i < rounds, forward,
                                    (tf.constant(0), x, outputs), maximum_iterations=rounds,
                                    parallel_iterations=1)
      outputs = outputs.stack()

    def grad(dy, doutputs, variables=None):
      variables = list(variables or [])

      def backward(r, dh, sums):
        i = rounds - 1 - r
        for j in reversed(range(n)):
          step = i * n + j
          if doutputs is not None:
            dh = dh + doutputs[step]
          h = tf.cond(step > 0, lambda: outputs[tf.maximum(step - 1, 0)], lambda: x)
          with tf.GradientTape() as tape:
            tape.watch(h)
            tape.watch(variables)
            out = blocks[j].apply_block(h, bias, True, step_seed(step))
          grads = tape.gradient(out, [h] + variables, output_gradients=dh)
          dh = grads[0]
          sums = [s if g is None else s + tf.convert_to_tensor(g, s.dtype)
                  for s, g in zip(sums, grads[1:])]
        return r + 1, dh, sums

      sums = [tf.zeros(v.shape, v.dtype) for v in variables]
      # parallel_iterations=1: one recomputed application alive at a time.
      _, dx, sums = tf.while_loop(lambda r, dh, s: r < rounds, backward,
                                  (tf.constant(0), dy, sums), maximum_iterations=rounds,
                                  parallel_iterations=1)
      return dx, sums

    return (y, outputs), grad

  return run(x)


def set_recompute_grad(model, enabled=True):
  """Turn block recomputation (`recomputed_rounds`) on or off in every block of `model`; takes
  effect at the next trace of a training call. Returns the number of blocks changed."""
  blocks = [layer for layer in model.submodules if isinstance(layer, TransformerBlock)]
  for block in blocks:
    block.recompute_grad = bool(enabled)
  return len(blocks)
