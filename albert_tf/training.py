"""The pretraining loop: any strategy, LAMB/AdamW, accumulation, checkpoints that resume.

One `tf.function` runs `iterations_per_loop` optimizer steps; each step sums gradients over
`gradient_accumulation_steps` micro-batches and all replicas, clips them to global norm 1.0 and
applies them once. The loss is normalised over the whole global batch (MLM by the sum of its
weights + 1e-5, SOP by the number of examples), so any split across replicas and micro-batches
computes exactly the original's single-device loss.
"""

import dataclasses
import logging
import math
import os
import time

import tensorflow as tf
import tf_keras

from albert_tf import guards
from albert_tf.checkpoints import load_checkpoint, native_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.data.pretraining_dataset import (check_pretraining_files, count_instances,
                                                expand_file_patterns, pretraining_dataset)
from albert_tf.data.records import feature_spec
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.modeling.transformer import set_recompute_grad
from albert_tf.optimization import AlbertLearningRate, clip_gradients, create_optimizer

logger = logging.getLogger(__name__)

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
EVAL_KEYS = ("loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy",
             "sentence_order_loss")


@dataclasses.dataclass
class PretrainingOptions:
  """run_pretraining.py's flags, the original's names and defaults."""
  albert_config_file: str = None
  input_file: str = None
  output_dir: str = None
  init_checkpoint: str = None
  max_seq_length: int = 512
  max_predictions_per_seq: int = 20
  do_train: bool = False
  do_eval: bool = False
  train_batch_size: int = 4096
  eval_batch_size: int = 64
  optimizer: str = "lamb"
  learning_rate: float = 0.00176
  poly_power: float = 1.0
  num_train_steps: int = 125000
  num_warmup_steps: int = 3125
  start_warmup_step: int = 0
  save_checkpoints_steps: int = 5000
  keep_checkpoint_max: int = 5
  iterations_per_loop: int = 1000
  max_eval_steps: int = 100
  init_from_group0: bool = False
  # Ours.
  gradient_accumulation_steps: int = 1
  mixed_precision: str = "float32"
  recompute_grad: bool = False
  jit_compile: bool = False
  bias_correction: bool = False
  weight_decay_rate: float = 0.01
  seed: int = None
  log_every_seconds: float = 10.0
  checkpoint_input_pipeline: bool = True


def pretraining_losses(outputs, batch, mlm_denominator, global_batch_size):
  """(loss share of this micro-batch, per-prediction CE, per-example SOP CE)."""
  mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
  sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
  mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(batch["masked_lm_ids"], tf.int32), logits=mlm_logits)
  sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(batch["next_sentence_labels"][:, 0], tf.int32), logits=sop_logits)
  weights = tf.cast(batch["masked_lm_weights"], tf.float32)
  loss = (tf.reduce_sum(weights * mlm_ce) / mlm_denominator
          + tf.reduce_sum(sop_ce) / float(global_batch_size))
  return loss, mlm_ce, sop_ce


class PretrainingMetrics:
  """The original's eval metrics (weighted MLM accuracy/loss, SOP accuracy/loss), plus loss."""

  def __init__(self):
    self.masked_lm_accuracy = tf_keras.metrics.Accuracy("masked_lm_accuracy")
    self.masked_lm_loss = tf_keras.metrics.Mean("masked_lm_loss")
    self.sentence_order_accuracy = tf_keras.metrics.Accuracy("sentence_order_accuracy")
    self.sentence_order_loss = tf_keras.metrics.Mean("sentence_order_loss")
    self.loss = tf_keras.metrics.Mean("loss")

  def update(self, outputs, batch, mlm_ce, sop_ce):
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    self.masked_lm_accuracy.update_state(
        batch["masked_lm_ids"], tf.argmax(outputs["mlm_logits"], -1, output_type=tf.int32),
        sample_weight=weights)
    self.masked_lm_loss.update_state(mlm_ce, sample_weight=weights)
    labels = batch["next_sentence_labels"][:, 0]
    self.sentence_order_accuracy.update_state(
        labels, tf.argmax(outputs["sop_logits"], -1, output_type=tf.int32))
    self.sentence_order_loss.update_state(sop_ce)

  def all(self):
    return [self.loss, self.masked_lm_accuracy, self.masked_lm_loss,
            self.sentence_order_accuracy, self.sentence_order_loss]

  def result(self):
    return {m.name: float(m.result()) for m in self.all()}

  def reset(self):
    for m in self.all():
      m.reset_state()


class Pretrainer:
  """Builds model, optimizer, data and checkpoints under a strategy; runs train and eval."""

  def __init__(self, options, strategy=None):
    self.options = o = options
    if o.gradient_accumulation_steps < 1:
      raise ValueError("--gradient_accumulation_steps must be at least 1")
    self.strategy = strategy or tf.distribute.get_strategy()
    self.config = AlbertConfig.from_json_file(o.albert_config_file)
    if o.max_seq_length > self.config.max_position_embeddings:
      raise ValueError(f"--max_seq_length={o.max_seq_length} exceeds the config's "
                       f"max_position_embeddings={self.config.max_position_embeddings}")
    replicas = self.strategy.num_replicas_in_sync
    per_step = replicas * o.gradient_accumulation_steps
    if o.do_train and o.train_batch_size % per_step:
      raise ValueError(f"--train_batch_size={o.train_batch_size} is not divisible by "
                       f"{replicas} replicas x {o.gradient_accumulation_steps} accumulation "
                       "steps")
    if o.do_eval and o.eval_batch_size % replicas:
      raise ValueError(f"--eval_batch_size={o.eval_batch_size} is not divisible by "
                       f"{replicas} replicas")
    self.files = expand_file_patterns(o.input_file)
    check_pretraining_files(self.files, o.max_seq_length, o.max_predictions_per_seq,
                            self.config.vocab_size)
    if o.mixed_precision != "float32":
      tf_keras.mixed_precision.set_global_policy(
          {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[o.mixed_precision])
    if o.seed is not None:  # Initial weights, dropout and shuffling repeat run to run.
      tf_keras.utils.set_random_seed(o.seed)
    with self.strategy.scope():
      self.model = AlbertPretrainer(self.config)
      set_recompute_grad(self.model, o.recompute_grad)
      schedule = AlbertLearningRate(o.learning_rate, o.num_train_steps, o.num_warmup_steps,
                                    o.start_warmup_step, o.poly_power)
      self.schedule = schedule
      optimizer = create_optimizer(o.optimizer, schedule, o.weight_decay_rate,
                                   o.bias_correction)
      if o.mixed_precision == "float16":
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
      self.optimizer = optimizer
      self.train_metrics = PretrainingMetrics()
      self.eval_metrics = PretrainingMetrics()
      self.checkpoint = native_checkpoint(self.model, optimizer=self.optimizer)
    self.write_dir = _write_dir(o.output_dir, self.strategy)
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, self.write_dir, max_to_keep=o.keep_checkpoint_max,
        step_counter=self.optimizer.iterations, checkpoint_name="ckpt")

  @property
  def global_step(self):
    return int(self.optimizer.iterations.numpy())

  # --- initialisation -----------------------------------------------------------------------
  def restore_or_initialize(self):
    """Resumes from output_dir's latest checkpoint, else loads --init_checkpoint if given."""
    latest = self.manager.latest_checkpoint
    guards.remove_stale_temp_checkpoints(self.write_dir)
    guards.check_run_config(self.write_dir, self.config, self.options.albert_config_file,
                            resuming=latest is not None)
    if latest:
      status = self.checkpoint.restore(latest)
      status.assert_existing_objects_matched()
      status.expect_partial()  # eval-only runs have no optimizer slots to restore into
      logger.info("Resumed from %s at step %d", latest, self.global_step)
      return latest
    if self.options.init_checkpoint:
      report = load_checkpoint(self.model, self.options.init_checkpoint,
                               init_from_group0=self.options.init_from_group0)
      logger.info(report.summary())
    return None

  # --- steps --------------------------------------------------------------------------------
  def _distributed_dataset(self, batch_size, is_training):
    """The global batch, split across replicas in order: replica r gets rows [r*b, (r+1)*b),
    so any number of replicas sees the same global batch as one device."""
    o = self.options
    dataset = pretraining_dataset(self.files, o.max_seq_length, o.max_predictions_per_seq,
                                  batch_size, is_training, seed=o.seed)
    return self.strategy.experimental_distribute_dataset(dataset)

  def _make_train_loop(self):
    o = self.options
    model, optimizer, metrics = self.model, self.optimizer, self.train_metrics
    k = o.gradient_accumulation_steps
    global_batch = o.train_batch_size
    loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

    @tf.function(jit_compile=o.jit_compile)
    def micro_step(micro, mlm_denominator):
      with tf.GradientTape() as tape:
        outputs = model({n: micro[n] for n in MODEL_INPUTS}, training=True)
        loss, mlm_ce, sop_ce = pretraining_losses(outputs, micro, mlm_denominator, global_batch)
        scaled = optimizer.get_scaled_loss(loss) if loss_scaling else loss
      grads = tape.gradient(scaled, model.trainable_variables)
      grads = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices from the embeddings
      if loss_scaling:
        grads = optimizer.get_unscaled_gradients(grads)
      return loss, grads, outputs, mlm_ce, sop_ce

    def replica_step(batch):
      ctx = tf.distribute.get_replica_context()
      weights = tf.cast(batch["masked_lm_weights"], tf.float32)
      mlm_denominator = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                       tf.reduce_sum(weights)) + 1e-5
      size = tf.shape(batch["input_word_ids"])[0] // k
      total_loss, total_grads = 0.0, None
      for i in range(k):
        micro = {n: t[i * size:(i + 1) * size] for n, t in batch.items()}
        loss, grads, outputs, mlm_ce, sop_ce = micro_step(micro, mlm_denominator)
        total_loss += loss
        total_grads = grads if total_grads is None else [a + b for a, b in
                                                         zip(total_grads, grads)]
        metrics.update(outputs, micro, mlm_ce, sop_ce)
      total_grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, total_grads)
      total_loss = ctx.all_reduce(tf.distribute.ReduceOp.SUM, total_loss)
      metrics.loss.update_state(total_loss)
      optimizer.apply_gradients(zip(clip_gradients(total_grads), model.trainable_variables),
                                experimental_aggregate_gradients=False)
      return total_loss

    @tf.function
    def train_loop(iterator, steps):
      """Runs `steps` steps; returns -1, or the step count whose weights gave a non-finite
      loss (the loop stops there, so later steps cannot hide which state diverged)."""
      nonfinite_state = tf.constant(-1, tf.int64)
      for _ in tf.range(steps):
        state = tf.identity(optimizer.iterations)
        loss = self.strategy.run(replica_step, args=(next(iterator),))
        loss = self.strategy.experimental_local_results(loss)[0]
        if not tf.math.is_finite(loss):
          nonfinite_state = state
          break
      return nonfinite_state
    return train_loop

  def _make_eval_step(self):
    model, metrics = self.model, self.eval_metrics
    global_batch = self.options.eval_batch_size

    def replica_step(batch):
      ctx = tf.distribute.get_replica_context()
      weights = tf.cast(batch["masked_lm_weights"], tf.float32)
      denominator = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.reduce_sum(weights)) + 1e-5
      outputs = model({n: batch[n] for n in MODEL_INPUTS}, training=False)
      loss, mlm_ce, sop_ce = pretraining_losses(outputs, batch, denominator, global_batch)
      metrics.update(outputs, batch, mlm_ce, sop_ce)
      metrics.loss.update_state(ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss))

    @tf.function
    def eval_step(iterator):
      self.strategy.run(replica_step, args=(next(iterator),))
    return eval_step

  def _run_on_data(self, function, *args):
    """`function(*args)`; a bad record in the input becomes an error naming its file."""
    try:
      return function(*args)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      if not guards.is_record_error(e):
        raise
      spec = feature_spec(self.options.max_seq_length, self.options.max_predictions_per_seq)
      located = guards.locate_bad_record(self.files,
                                         lambda batch: tf.io.parse_example(batch, spec), e)
      if located is None:
        raise
      raise located from None

  # --- train and eval -----------------------------------------------------------------------
  def train(self, history=None):
    """Trains to num_train_steps, saving every save_checkpoints_steps; returns final metrics.

    `history` (a list) receives one dict per loop: step, loss, accuracies, learning rate.
    """
    o = self.options
    train_loop = self._make_train_loop()
    iterator = iter(self._distributed_dataset(o.train_batch_size, True))
    if o.checkpoint_input_pipeline and not isinstance(
        self.strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)):
      # The input position (shuffle buffers included) goes into every checkpoint, so a resumed
      # run sees exactly the batches an uninterrupted one would; restored lazily if resuming.
      self.checkpoint.input_pipeline = iterator
    writer = tf.summary.create_file_writer(os.path.join(self.write_dir, "train"))
    instances = count_instances(self.files)
    if instances:
      logger.info("Training data: %d instances; %d steps of %d = %.2f epochs", instances,
                  o.num_train_steps, o.train_batch_size,
                  o.num_train_steps * o.train_batch_size / instances)
    start_step, start_time = self.global_step, time.time()
    last_log = 0.0
    results = {}
    while self.global_step < o.num_train_steps:
      step = self.global_step
      next_save = (step // o.save_checkpoints_steps + 1) * o.save_checkpoints_steps
      steps = min(o.iterations_per_loop, o.num_train_steps - step, next_save - step)
      loop_start = time.time()
      nonfinite_state = int(self._run_on_data(train_loop, iterator,
                                              tf.constant(steps, tf.int32)))
      step = self.global_step
      results = self.train_metrics.result()
      self.train_metrics.reset()
      if nonfinite_state >= 0 or not math.isfinite(results["loss"]):
        raise guards.nonfinite_error(self.manager,
                                     nonfinite_state if nonfinite_state >= 0 else step - steps,
                                     results["loss"])
      elapsed = time.time() - loop_start
      learning_rate = float(self.schedule(step))
      with writer.as_default(step=step):
        for name, value in results.items():
          tf.summary.scalar(name, value)
        tf.summary.scalar("learning_rate", learning_rate)
        tf.summary.scalar("examples_per_second", steps * o.train_batch_size / elapsed)
      if history is not None:
        history.append(dict(results, step=step, learning_rate=learning_rate))
      if step % o.save_checkpoints_steps == 0 or step == o.num_train_steps:
        guards.save_checkpoint(self.manager, step)
      now = time.time()
      if now - last_log >= o.log_every_seconds or step == o.num_train_steps:
        last_log = now
        rate = (step - start_step) / max(now - start_time, 1e-9)
        eta = (o.num_train_steps - step) / rate if rate > 0 else float("inf")
        logger.info("step %d/%d  loss %.4f  mlm_acc %.3f  sop_acc %.3f  lr %.3g  %.2f steps/s  "
                    "%.1f examples/s  ETA %s", step, o.num_train_steps, results["loss"],
                    results["masked_lm_accuracy"], results["sentence_order_accuracy"],
                    learning_rate, rate, rate * o.train_batch_size, _duration(eta))
    writer.flush()
    return results

  def evaluate(self):
    """Runs max_eval_steps batches (or the whole eval data) and writes eval_results.txt."""
    o = self.options
    eval_step = self._make_eval_step()
    self.eval_metrics.reset()
    iterator = iter(self._distributed_dataset(o.eval_batch_size, False))
    steps = 0
    while steps < o.max_eval_steps:
      try:
        self._run_on_data(eval_step, iterator)
      except (StopIteration, tf.errors.OutOfRangeError):
        break
      steps += 1
    if steps == 0:
      raise ValueError(f"no eval batch of {o.eval_batch_size}: the input has fewer records")
    results = self.eval_metrics.result()
    results["global_step"] = self.global_step
    if not all(math.isfinite(results[key]) for key in EVAL_KEYS):
      raise guards.nonfinite_eval_error(results["loss"], self.global_step,
                                        self.manager.latest_checkpoint)
    writer = tf.summary.create_file_writer(os.path.join(self.write_dir, "eval"))
    with writer.as_default(step=self.global_step):
      for key in EVAL_KEYS:
        tf.summary.scalar(key, results[key])
    writer.flush()
    guards.write_results(os.path.join(self.write_dir, "eval_results.txt"), results)
    logger.info("Eval at step %d over %d batches: %s", self.global_step, steps,
                ", ".join(f"{k} = {results[k]:.4f}" for k in EVAL_KEYS))
    return results


def _write_dir(output_dir, strategy):
  """output_dir for the chief; other multi-worker workers write their (identical) checkpoints
  and summaries under output_dir/workers/worker_N, as every worker must save collectively."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
    return output_dir
  task_type, task_id = resolver.task_type, resolver.task_id
  if task_type in (None, "chief") or (task_type == "worker" and task_id == 0 and
                                      "chief" not in resolver.cluster_spec().as_dict()):
    return output_dir
  path = os.path.join(output_dir, "workers", f"{task_type}_{task_id}")
  tf.io.gfile.makedirs(path)
  return path


def _duration(seconds):
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def run_pretraining(options, strategy=None, history=None):
  """What run_pretraining.py does: train and/or evaluate; returns (train, eval) results."""
  if not (options.do_train or options.do_eval):
    raise ValueError("at least one of --do_train or --do_eval must be set")
  guards.check_writable(options.output_dir)
  trainer = Pretrainer(options, strategy)
  trainer.restore_or_initialize()
  train_results = trainer.train(history) if options.do_train else None
  eval_results = trainer.evaluate() if options.do_eval else None
  return train_results, eval_results
