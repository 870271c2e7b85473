"""Optimizers and learning-rate schedule with the original ALBERT's semantics (SPEC.md).

- Schedule: linear warm-up to `learning_rate` over `num_warmup_steps` (counted from
  `start_warmup_step`), otherwise polynomial decay to 0 over `num_train_steps` counted from
  step 0 — the decay does not restart after warm-up, as in the original.
- LAMB: Model Garden's LAMB, with Adam's bias correction off by default (the original has
  none); AdamW: the original's AdamWeightDecay (no bias correction), written here because
  Model Garden's AdamW always corrects. Both exclude `LayerNorm`, `layer_norm` and `bias`
  variables from weight decay (and LAMB from the trust ratio).
- Gradients are clipped to global norm 1.0 by the training loop, after the cross-replica sum.
"""

import re

import tensorflow as tf
import tf_keras
from official.modeling.optimization import lamb

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
CLIP_NORM = 1.0


class AlbertLearningRate(tf_keras.optimizers.schedules.LearningRateSchedule):
  """The original's `create_optimizer` schedule: warm-up, else polynomial decay from step 0."""

  def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0,
               poly_power=1.0, name="AlbertLearningRate"):
    super().__init__()
    if num_train_steps <= 0:
      raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
    self.learning_rate = learning_rate
    self.num_train_steps = num_train_steps
    self.num_warmup_steps = num_warmup_steps
    self.start_warmup_step = start_warmup_step
    self.poly_power = poly_power
    self.name = name
    self._decay = tf_keras.optimizers.schedules.PolynomialDecay(
        learning_rate, num_train_steps, end_learning_rate=0.0, power=poly_power, cycle=False)

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    decayed = self._decay(step)
    if not self.num_warmup_steps:
      return decayed
    warm_step = step - float(self.start_warmup_step)
    warmup = self.learning_rate * warm_step / float(self.num_warmup_steps)
    return tf.where(warm_step < float(self.num_warmup_steps), warmup, decayed)

  def get_config(self):
    return dict(learning_rate=self.learning_rate, num_train_steps=self.num_train_steps,
                num_warmup_steps=self.num_warmup_steps,
                start_warmup_step=self.start_warmup_step, poly_power=self.poly_power,
                name=self.name)


class AlbertLAMB(lamb.LAMB):
  """Model Garden's LAMB; `bias_correction=False` (default) is the original ALBERT's update."""

  def __init__(self, *args, bias_correction=False, **kwargs):
    super().__init__(*args, **kwargs)
    self.bias_correction = bias_correction

  def _prepare_local(self, var_device, var_dtype, apply_state):
    super()._prepare_local(var_device, var_dtype, apply_state)
    if not self.bias_correction:
      # m / (1 - beta^t) with beta^t := 0 is m: the original's uncorrected moments.
      zero = tf.zeros([], var_dtype)
      apply_state[(var_device, var_dtype)].update(beta_1_power=zero, beta_2_power=zero)

  def get_config(self):
    config = super().get_config()
    config["bias_correction"] = self.bias_correction
    return config


class AlbertAdamW(tf_keras.optimizers.legacy.Optimizer):
  """The original's AdamWeightDecayOptimizer: Adam moments, decoupled weight decay.

  update = m / (sqrt(v) + epsilon) + weight_decay_rate * w (unless excluded); w -= lr * update.
  With `bias_correction`, m and v are divided by (1 - beta^t) as in Adam.
  """

  def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
               weight_decay_rate=0.0, exclude_from_weight_decay=None, bias_correction=False,
               lr_multipliers=None, name="AlbertAdamW", **kwargs):
    super().__init__(name, **kwargs)
    self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
    self._set_hyper("beta_1", beta_1)
    self._set_hyper("beta_2", beta_2)
    self._set_hyper("weight_decay_rate", weight_decay_rate)
    self.epsilon = epsilon
    self.exclude_from_weight_decay = list(exclude_from_weight_decay or [])
    self.bias_correction = bias_correction
    # {variable name: factor} on the learning rate (layer-wise decay); missing names use 1.
    self.lr_multipliers = dict(lr_multipliers or {})

  def _create_slots(self, var_list):
    for var in var_list:
      self.add_slot(var, "m")
    for var in var_list:
      self.add_slot(var, "v")

  def _resource_apply_dense(self, grad, var, apply_state=None):
    dtype = var.dtype.base_dtype
    lr = self._decayed_lr(dtype)
    beta_1 = self._get_hyper("beta_1", dtype)
    beta_2 = self._get_hyper("beta_2", dtype)
    m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
    m_t = m.assign(beta_1 * m + (1.0 - beta_1) * grad)
    v_t = v.assign(beta_2 * v + (1.0 - beta_2) * tf.square(grad))
    if self.bias_correction:
      step = tf.cast(self.iterations + 1, dtype)
      m_t = m_t / (1.0 - tf.pow(beta_1, step))
      v_t = v_t / (1.0 - tf.pow(beta_2, step))
    update = m_t / (tf.sqrt(v_t) + self.epsilon)
    if self._use_weight_decay(var.name):
      update += self._get_hyper("weight_decay_rate", dtype) * var
    multiplier = self.lr_multipliers.get(var.name, 1.0)
    return var.assign_sub(lr * multiplier * update)

  def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
    dense = tf.convert_to_tensor(tf.IndexedSlices(grad, indices, tf.shape(var)))
    return self._resource_apply_dense(dense, var, apply_state)

  def _use_weight_decay(self, name):
    return not any(re.search(pattern, name) for pattern in self.exclude_from_weight_decay)

  def get_config(self):
    config = super().get_config()
    config.update(learning_rate=self._serialize_hyperparameter("learning_rate"),
                  beta_1=self._serialize_hyperparameter("beta_1"),
                  beta_2=self._serialize_hyperparameter("beta_2"),
                  weight_decay_rate=self._serialize_hyperparameter("weight_decay_rate"),
                  epsilon=self.epsilon, exclude_from_weight_decay=self.exclude_from_weight_decay,
                  bias_correction=self.bias_correction)
    return config


def create_optimizer(name, schedule, weight_decay_rate=0.01, bias_correction=False,
                     beta_1=0.9, beta_2=0.999, epsilon=1e-6, lr_multipliers=None):
  """`lamb` or `adamw` with the original's hyperparameters and exclusions.

  `lr_multipliers` ({variable name: factor}, AdamW only) scales each variable's learning rate,
  e.g. from `layerwise_lr_multipliers`.
  """
  common = dict(learning_rate=schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                weight_decay_rate=weight_decay_rate,
                exclude_from_weight_decay=list(EXCLUDE_FROM_WEIGHT_DECAY),
                bias_correction=bias_correction)
  if name == "lamb":
    if lr_multipliers:
      raise ValueError("layer-wise learning-rate decay needs --optimizer=adamw")
    return AlbertLAMB(exclude_from_layer_adaptation=list(EXCLUDE_FROM_WEIGHT_DECAY), **common)
  if name == "adamw":
    return AlbertAdamW(lr_multipliers=lr_multipliers, **common)
  raise ValueError(f"--optimizer must be 'lamb' or 'adamw', got {name!r}")


def layerwise_lr_multipliers(tf1_names, decay):
  """{variable name: decay ** depth}: depth 0 for the task head and pooler, 1 for the top
  transformer group, ..., groups + 1 for the embeddings (ELECTRA-style layer-wise decay over
  ALBERT's distinct groups; with full sharing: head 1, shared block decay, embeddings decay^2).

  `tf1_names` is `tf1_names.tf1_variable_map(model)`.
  """
  if not 0.0 < decay <= 1.0:
    raise ValueError(f"--layerwise_lr_decay must be in (0, 1], got {decay}")
  groups = [int(m.group(1)) for name in tf1_names
            for m in [re.search(r"/transformer/group_(\d+)/", name)] if m]
  top = max(groups, default=-1) + 1
  multipliers = {}
  for name, variable in tf1_names.items():
    match = re.search(r"/transformer/group_(\d+)/", name)
    if match:
      depth = top - int(match.group(1))
    elif name.startswith(("bert/embeddings/", "bert/encoder/embedding_hidden_mapping_in")):
      depth = top + 1
    else:
      depth = 0
    multipliers[variable.name] = decay ** depth
  return multipliers


def clip_gradients(grads):
  """The original's clip_by_global_norm(grads, 1.0)."""
  clipped, _ = tf.clip_by_global_norm(grads, CLIP_NORM)
  return clipped
