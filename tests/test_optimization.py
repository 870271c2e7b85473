"""LAMB, AdamW and the schedule against the original's formulas, a few steps by hand."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training.optimization import AlbertLearningRate, clip_gradients, create_optimizer
from conftest import float32_atol


def test_schedule_warms_up_linearly_then_decays_from_step_zero():
  schedule = AlbertLearningRate(1e-3, num_train_steps=100, num_warmup_steps=10, poly_power=2.0)
  for step in (0, 3, 9):
    assert float(schedule(step)) == pytest.approx(1e-3 * step / 10)
  for step in (10, 50, 99, 100, 150):
    assert float(schedule(step)) == pytest.approx(1e-3 * (1 - min(step, 100) / 100) ** 2)
  shifted = AlbertLearningRate(1e-3, 100, num_warmup_steps=10, start_warmup_step=5)
  assert float(shifted(5)) == 0.0 and float(shifted(10)) == pytest.approx(5e-4)
  assert float(shifted(15)) == pytest.approx(1e-3 * (1 - 15 / 100))
  assert float(AlbertLearningRate(1e-3, 100)(25)) == pytest.approx(7.5e-4)


def numpy_steps(kind, w, grads, names, lr, bias_correction=False, wd=0.01, b1=0.9, b2=0.999,
                eps=1e-6):
  """The original's LAMB / AdamW update, written out in NumPy."""
  w = [x.astype(np.float64).copy() for x in w]
  m = [np.zeros_like(x) for x in w]
  v = [np.zeros_like(x) for x in w]
  for t, step_grads in enumerate(grads, start=1):
    for i, g in enumerate(step_grads):
      m[i] = b1 * m[i] + (1 - b1) * g
      v[i] = b2 * v[i] + (1 - b2) * g * g
      mh, vh = m[i], v[i]
      if bias_correction:
        mh, vh = m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)
      update = mh / (np.sqrt(vh) + eps)
      excluded = any(k in names[i] for k in ("LayerNorm", "layer_norm", "bias"))
      if not excluded:
        update = update + wd * w[i]
      ratio = 1.0
      if kind == "lamb" and not excluded:
        wn, un = np.linalg.norm(w[i]), np.linalg.norm(update)
        ratio = wn / un if wn > 0 and un > 0 else 1.0
      w[i] = w[i] - ratio * lr * update
  return w


@pytest.mark.parametrize("kind", ["lamb", "adamw"])
@pytest.mark.parametrize("bias_correction", [False, True])
def test_optimizer_steps_match_the_original_formulas(kind, bias_correction):
  rng = np.random.default_rng(0)
  names = ["encoder/dense/kernel", "encoder/dense/bias", "encoder/LayerNorm/gamma"]
  init = [rng.normal(size=(4, 3)), rng.normal(size=(3,)), 1 + 0.1 * rng.normal(size=(3,))]
  variables = [tf.Variable(x.astype(np.float32), name=n) for x, n in zip(init, names)]
  grads = [[rng.normal(size=x.shape) for x in init] for _ in range(3)]
  optimizer = create_optimizer(kind, 0.01, bias_correction=bias_correction)
  for step_grads in grads:
    optimizer.apply_gradients(zip([tf.constant(g, tf.float32) for g in step_grads], variables))
  expected = numpy_steps(kind, init, grads, names, 0.01, bias_correction)
  # float32 against float64 from the same start: the weights' and gradients' rounding to
  # float32, then per step about 10 roundings (m, v, their corrections, the square root, the
  # division, the decay, the subtraction) and LAMB's norms' sums over at most 12 elements.
  for var, want in zip(variables, expected):
    np.testing.assert_allclose(var.numpy(), want, rtol=0,
                               atol=float32_atol(want, 1 + len(grads) * (10 + 12)))


def test_gradients_are_clipped_to_global_norm_one():
  grads = [tf.constant([3.0, 4.0]), tf.constant([0.0, 0.0])]
  clipped = clip_gradients(grads)
  assert float(tf.linalg.global_norm(clipped)) == pytest.approx(1.0)
  small = [tf.constant([0.3, 0.4])]
  np.testing.assert_allclose(clip_gradients(small)[0].numpy(), [0.3, 0.4])


def test_unknown_optimizer_is_named():
  with pytest.raises(ValueError, match="--optimizer must be 'lamb' or 'adamw', got 'sgd'"):
    create_optimizer("sgd", 0.1)


def test_layerwise_decay_scales_each_groups_learning_rate():
  from albert_tf import AlbertConfig
  from albert_tf.interop.tf1_names import tf1_variable_map
  from albert_tf.modeling.classifier import AlbertClassifier
  from albert_tf.training.optimization import layerwise_lr_multipliers
  from conftest import ROOT
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      num_hidden_layers=4, num_hidden_groups=2)
  names = tf1_variable_map(AlbertClassifier(config, 2))
  multipliers = layerwise_lr_multipliers(names, 0.5)
  by_tf1 = {n: multipliers[v.name] for n, v in names.items()}
  assert by_tf1["output_weights"] == by_tf1["bert/pooler/dense/kernel"] == 1.0
  group1 = "bert/encoder/transformer/group_1/inner_group_0/attention_1/self/query/kernel"
  assert by_tf1[group1] == 0.5 and by_tf1[group1.replace("group_1", "group_0")] == 0.25
  assert by_tf1["bert/embeddings/word_embeddings"] == 0.125
  assert by_tf1["bert/encoder/embedding_hidden_mapping_in/kernel"] == 0.125
  with pytest.raises(ValueError, match="layerwise_lr_decay"):
    layerwise_lr_multipliers(names, 1.5)


def test_adamw_applies_the_multipliers_and_lamb_refuses_them():
  w = tf.Variable([1.0, -2.0], name="encoder/dense/kernel")
  v = tf.Variable([1.0, -2.0], name="encoder/other/kernel")
  optimizer = create_optimizer("adamw", 0.1, weight_decay_rate=0.0,
                               lr_multipliers={w.name: 0.5})
  optimizer.apply_gradients([(tf.constant([1.0, 1.0]), w), (tf.constant([1.0, 1.0]), v)])
  # 1 - w is exact (Sterbenz), the weights are not: each rounds at the scale of its value 1 in
  # its update's few operations (the moments, the square root, the division, the subtraction).
  np.testing.assert_allclose(1.0 - w.numpy()[0], 0.5 * (1.0 - v.numpy()[0]), rtol=0,
                             atol=float32_atol([1.0], 2 * 5))
  with pytest.raises(ValueError, match="adamw"):
    create_optimizer("lamb", 0.1, lr_multipliers={w.name: 0.5})
