"""The training steps' dropout (albert_tf/modeling/dropout.py): rate, scale, mask and gradient."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.modeling import dropout as dropout_module
from albert_tf.modeling.activations import plain_activations
from albert_tf.modeling.dropout import hashed_dropout

SHAPE = (64, 128, 128)  # 2**20 elements: the attention probabilities' layout


def reference_keep(shape, seed, rate):
  """The mask rule written out in NumPy (uint32 arithmetic wraps as in the graph): element i is
  kept when mix(mix(i * 0x9E3779B9 + seed[0]) ^ seed[1]) >= round(rate * 2**32)."""
  def mix(h):
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))
  key = np.array(seed, np.int32).view(np.uint32)
  index = np.arange(int(np.prod(shape)), dtype=np.uint32)
  with np.errstate(over="ignore"):
    h = mix(mix(index * np.uint32(0x9E3779B9) + key[0]) ^ key[1])
  return (h >= np.uint32(round(rate * 2**32))).reshape(shape)


def dropped(x, rate, seed=None):
  return hashed_dropout(tf.ones(x, tf.float32), rate, seed).numpy() == 0


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_masks_follow_the_rule_and_drop_at_the_rate(rate):
  seed = [123456789, -987654321]
  y = hashed_dropout(tf.ones(SHAPE), rate, tf.constant(seed)).numpy()
  np.testing.assert_array_equal(y != 0, reference_keep(SHAPE, seed, rate))
  n = y.size
  assert abs((y == 0).mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / n)
  np.testing.assert_array_equal(np.unique(y), [0.0, np.float32(1.0 / (1.0 - rate))])


def test_masks_of_neighbouring_seeds_and_elements_are_independent():
  """Pairs of drops occur at rate**2 between seeds one apart (the recomputed blocks' seeds are
  offsets of one seed) and between neighbouring elements along each axis."""
  rate, n = 0.1, int(np.prod(SHAPE))
  tolerance = 5 * np.sqrt(rate**2 * (1 - rate**2) / n)
  base = dropped(SHAPE, rate, tf.constant([5, 11]))
  for other in ([6, 11], [5, 12], [5 + 2**20, 11]):
    both = (base & dropped(SHAPE, rate, tf.constant(other))).mean()
    assert abs(both - rate**2) < tolerance, other
  for axis in range(3):
    ahead = np.take(base, range(1, SHAPE[axis]), axis=axis)
    behind = np.take(base, range(SHAPE[axis] - 1), axis=axis)
    assert abs((ahead & behind).mean() - rate**2) < 2 * tolerance, axis


def test_unseeded_calls_draw_new_masks_and_a_global_seed_repeats_them():
  def two_masks():
    tf.random.set_seed(42)
    return dropped([256, 256], 0.1), dropped([256, 256], 0.1)
  first, second = two_masks()
  assert (first != second).mean() > 0.1
  again = two_masks()
  np.testing.assert_array_equal(first, again[0])
  np.testing.assert_array_equal(second, again[1])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gradient_is_the_forward_mask_and_scale(dtype):
  rng = np.random.default_rng(3)
  x = tf.cast(tf.constant(rng.normal(size=(16, 300)), tf.float32), dtype)
  dy = tf.cast(tf.constant(rng.normal(size=(16, 300)), tf.float32), dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = hashed_dropout(x, 0.25, tf.constant([7, 8]))
  dx = tape.gradient(y, x, output_gradients=dy)
  assert y.dtype == dtype and dx.dtype == dtype
  keep = reference_keep(x.shape, [7, 8], 0.25)
  # Kept elements scaled by 4/3 in float32 and rounded once to the dtype.
  for got, value in ((y, x), (dx, dy)):
    want = tf.cast(tf.cast(value, tf.float32) * np.float32(4.0 / 3.0), dtype).numpy()
    np.testing.assert_array_equal(tf.cast(got, tf.float32).numpy(),
                                  tf.cast(np.where(keep, want, 0), tf.float32).numpy())


def test_rate_outside_zero_one_is_an_error_and_zero_is_the_identity():
  with pytest.raises(ValueError, match="rate 1.0"):
    hashed_dropout(tf.ones([2]), 1.0)
  np.testing.assert_array_equal(hashed_dropout(tf.ones([3, 3]), 0.0).numpy(), np.ones([3, 3]))


def test_training_calls_of_the_encoder_use_it_and_inference_and_exports_do_not(monkeypatch):
  config = AlbertConfig.from_dict(dict(
      vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=3,
      num_attention_heads=2, intermediate_size=32, max_position_embeddings=16,
      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
  model = AlbertEncoder(config)
  inputs = {"input_word_ids": tf.constant([[2, 5, 9, 3, 7, 3]]),
            "input_mask": tf.ones([1, 6], tf.int32), "input_type_ids": tf.zeros([1, 6], tf.int32)}
  calls = []
  real = dropout_module.hashed_dropout
  monkeypatch.setattr(dropout_module, "hashed_dropout",
                      lambda *args: calls.append(args[1]) or real(*args))
  inference = model(inputs, training=False)["sequence_output"]
  assert not calls
  with plain_activations():  # what exports trace: the Keras layer
    model(inputs, training=True)
  assert not calls
  trained = model(inputs, training=True)["sequence_output"]
  # The embeddings' dropout, then per application the attention probabilities' and each
  # sublayer's output.
  assert calls == [0.1] * (1 + 3 * config.num_hidden_layers)
  assert np.max(np.abs(trained.numpy() - inference.numpy())) > 1e-3
