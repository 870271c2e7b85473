"""The training loop: one loop under every task (pretraining, classification, SQuAD, RACE, NER,
distillation).

A task (`task.Task`) describes its job: its model, loss and how it normalises over the global
batch, its starting weights. `TrainingLoop` does everything else, the same way for every task:

- the strategy scope, precision (`float16` with dynamic loss scaling, `bfloat16`), XLA for the
  forward and backward pass, recompute of the transformer blocks, frozen parts;
- one optimizer step per global batch: gradients summed over `gradient_accumulation_steps`
  micro-batches and all replicas, clipped to global norm 1.0 (the original's), applied once;
  the loss is normalised over the whole global batch, so any split gives one device's result;
- checkpoints that resume exactly (model, optimizer, step and the input position), the run's
  config checked on resume, progress lines with examples/s and ETA, TensorBoard summaries;
- the guards (`recovery`): a non-finite loss stops at the step that produced it and sets aside
  the checkpoints of bad weights; failed checkpoint writes are one clear error;
- SIGTERM (preemption) ends the loop within one step, saves a checkpoint and raises
  `Preempted`, so the scripts exit 0 and the same command resumes (`preemption`).

orbit's `Controller` drives the loop (inner loops of `iterations_per_loop` steps, cut at
checkpoint steps; train summaries; its progress line). The loop implements orbit's
`AbstractTrainer` itself rather than `StandardTrainer`: it must stop inside a `tf.function` at
the first non-finite loss or on SIGTERM, which `StandardTrainer`'s fixed `tf.while_loop`
cannot. Checkpoints are written by a train action through the guards (orbit's
`SaveCheckpointIfPreempted` needs a cluster's preemption watcher and exits 42; users of a
single machine get SIGTERM and expect 0).
"""

import functools
import logging
import math
import os
import time

import orbit
import tensorflow as tf
import tf_keras

from albert_tf.interop.checkpoints import native_checkpoint
from albert_tf.modeling.transformer import set_recompute_grad
from albert_tf.training import recovery
from albert_tf.training.freezing import freeze_parts
from albert_tf.training.optimization import AlbertLearningRate, clip_gradients, create_optimizer
from albert_tf.training.options import check_options
from albert_tf.training.precision import precision_policy
from albert_tf.training.preemption import Preempted, sigterm_raises, sigterm_stops
from albert_tf.training.progress import Progress

logger = logging.getLogger(__name__)


class TrainingLoop(orbit.AbstractTrainer):
  """Model, optimizer, checkpoints and the training loop of one task on one strategy."""

  def __init__(self, task, options, strategy=None, do_train=True):
    o = self.options = options
    self.task = task
    self.strategy = strategy or tf.distribute.get_strategy()
    schedule = task.schedule()
    self.train_steps = schedule.train_steps
    self.do_train = do_train
    check_options(o)
    k = o.gradient_accumulation_steps
    replicas = self.strategy.num_replicas_in_sync
    if do_train and o.train_batch_size % (replicas * k):
      raise ValueError(f"--train_batch_size={o.train_batch_size} is not divisible by "
                       f"{replicas} replicas x {k} accumulation steps")
    if o.seed is not None:  # Initial weights, dropout and shuffling repeat run to run.
      tf_keras.utils.set_random_seed(o.seed)
    with precision_policy(o.mixed_precision), self.strategy.scope():
      self.model = task.build_model()
      set_recompute_grad(self.model, o.recompute_grad)
      self.schedule = AlbertLearningRate(o.learning_rate, max(schedule.train_steps, 1),
                                         schedule.warmup_steps, schedule.start_warmup_step,
                                         schedule.poly_power)
      optimizer = create_optimizer(o.optimizer, self.schedule, o.weight_decay_rate,
                                   o.bias_correction,
                                   lr_multipliers=task.lr_multipliers(self.model))
      if o.mixed_precision == "float16":
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
      self.optimizer = optimizer
      self.loss_metric = tf_keras.metrics.Mean("loss")
      self.task_metrics = task.build_metrics()
      self.checkpoint = native_checkpoint(self.model, optimizer=optimizer,
                                          **task.checkpoint_items())
    self.frozen = freeze_parts(self.model, o.freeze)
    if self.frozen:
      logger.info("Frozen: %s (%d variables)", ",".join(o.freeze), len(self.frozen))
    self.write_dir = _write_dir(o.output_dir, self.strategy)
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, self.write_dir, max_to_keep=o.keep_checkpoint_max,
        step_counter=self.optimizer.iterations, checkpoint_name="ckpt")
    self._restored = False
    # Why the weights are not a trained model's (no checkpoint resumed, starting weights that
    # leave some part random), or None: set by `restore_or_initialize`.
    self.untrained = None
    self._stop = tf.Variable(False, trainable=False, name="stop_requested")

  @property
  def global_step(self):
    return int(self.optimizer.iterations.numpy())

  # --- starting point -----------------------------------------------------------------------
  def restore_or_initialize(self, check_start=None):
    """Resumes from the latest checkpoint of the output folder (its config checked first),
    else loads the task's starting weights, calls `check_start()` (which may refuse them:
    `untrained` says why they are no trained model) and saves the run's config. Returns the
    checkpoint resumed from, or None."""
    if self._restored is not False:
      return self._restored
    task = self.task
    latest = self.manager.latest_checkpoint
    recovery.remove_stale_temp_checkpoints(self.write_dir)
    config, config_file = task.model_config()
    save_config = functools.partial(recovery.check_run_config, self.write_dir, config,
                                    config_file, resuming=latest is not None,
                                    model_flags=task.model_flags())
    if latest:
      save_config()
      try:
        status = self._restorable(latest).restore(latest)
      except (tf.errors.OpError, IndexError) as e:  # TensorFlow's reader on damaged files
        raise recovery.damaged_checkpoint_error(self.manager, latest,
                                              getattr(e, "message", e)) from None
      status.assert_existing_objects_matched()
      status.expect_partial()  # eval-only runs have no optimizer slots to restore into
      logger.info("Resumed from %s at step %d", latest, self.global_step)
      self._check_step_budget(latest)
    else:
      self.untrained = _untrained(self.model, task.initialize(self.model))
      if check_start is not None:
        check_start()
      save_config()  # after the start was accepted: a refused run leaves its folder as it was
    self._restored = latest
    return latest

  def _restorable(self, latest):
    """The run's checkpoint, or its model parts alone when `latest` holds weights and no
    optimizer (a directory `python -m albert_tf.convert --to=native` wrote): those evaluate and
    predict as they are, and training on them starts at step 0."""
    if any(name.startswith("optimizer/") for name, _ in tf.train.list_variables(latest)):
      return self.checkpoint
    logger.info("%s holds model weights without training state (a converted checkpoint?): "
                "the step count starts at 0", latest)
    return native_checkpoint(self.model)

  def _check_step_budget(self, latest):
    """A step budget below the step resumed from would train nothing, without a word."""
    step = self.global_step
    if not self.do_train or step < self.train_steps:
      return
    if step == self.train_steps:
      logger.info("%s is reached already (%s): nothing left to train",
                  self.task.train_steps_flag(), latest)
      return
    raise ValueError(f"{self.task.train_steps_flag()} is below step {step} of {latest}, which "
                     f"this run resumes from: nothing would be trained. Give more than {step} "
                     "steps to train on, leave out --do_train to only evaluate or predict, or "
                     "use a new --output_dir to start again")

  # --- the loop -----------------------------------------------------------------------------
  def _build_train_loop(self):
    o, task, model, optimizer = self.options, self.task, self.model, self.optimizer
    k = o.gradient_accumulation_steps
    loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    variables = [v for v in task.trainable_variables(model) if v.ref() not in self.frozen]
    updated = []  # the variables the loss reaches, found when tracing

    @tf.function(jit_compile=o.jit_compile)
    def micro_step(micro, normalizers):
      with tf.GradientTape() as tape:
        loss, aux = task.train_loss(model, micro, normalizers)
        scaled = optimizer.get_scaled_loss(loss) if loss_scaling else loss
      # Variables the loss does not reach (SQuAD's pooler) get no update, as in the
      # original, whose optimizer skips None gradients.
      reached = [(g, v) for g, v in zip(tape.gradient(scaled, variables), variables)
                 if g is not None]
      updated[:] = [v for _, v in reached]
      grads = [tf.convert_to_tensor(g) for g, _ in reached]  # IndexedSlices of embeddings
      if loss_scaling:
        grads = optimizer.get_unscaled_gradients(grads)
      return loss, grads, aux

    def replica_step(batch):
      ctx = tf.distribute.get_replica_context()
      normalizers = ctx.all_reduce(tf.distribute.ReduceOp.SUM, task.normalizers(batch))
      size = tf.shape(batch[next(iter(batch))])[0] // k
      total_loss, total_grads = 0.0, None
      for i in range(k):
        micro = {n: t[i * size:(i + 1) * size] for n, t in batch.items()}
        loss, grads, aux = micro_step(micro, normalizers)
        total_loss += loss
        total_grads = grads if total_grads is None else [a + b for a, b in
                                                         zip(total_grads, grads)]
        if self.task_metrics is not None:
          self.task_metrics.update(micro, aux)
      total_grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, total_grads)
      total_loss = ctx.all_reduce(tf.distribute.ReduceOp.SUM, total_loss)
      self.loss_metric.update_state(total_loss)
      optimizer.apply_gradients(zip(clip_gradients(total_grads), updated),
                                experimental_aggregate_gradients=False)
      return total_loss

    @tf.function
    def train_loop(iterator, steps):
      """Runs up to `steps` steps; returns -1, or the step count whose weights gave a
      non-finite loss (the loop stops there, so later steps cannot hide which state
      diverged). A stop request (SIGTERM) ends it before the next step."""
      traced_from = time.time()  # Python here runs once, when tracing
      nonfinite_state = tf.constant(-1, tf.int64)
      for _ in tf.range(steps):
        if self._stop.read_value():
          break
        state = tf.identity(optimizer.iterations)
        loss = self.strategy.run(replica_step, args=(next(iterator),))
        loss = self.strategy.experimental_local_results(loss)[0]
        if not tf.math.is_finite(loss):
          nonfinite_state = state
          break
      # The first loop's long silence, explained: what follows is graph optimisation and steps.
      logger.info("Traced the training loop in %.1f s", time.time() - traced_from)
      return nonfinite_state
    return train_loop

  def run_on_data(self, function, *args):
    """`function(*args)`; a bad record in the input becomes the task's error naming its file."""
    try:
      return function(*args)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      if not recovery.is_record_error(e):
        raise
      located = self.task.locate_bad_record(e)
      if located is None:
        raise
      raise located from None

  def attach(self, dataset):
    """Makes `dataset` (global batches) what `train` reads, with a fresh compiled loop;
    returns the distributed iterator."""
    self._iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
    self._train_loop = self._build_train_loop()
    return self._iterator

  def train(self, num_steps):
    """orbit's inner loop: up to `num_steps` steps; returns this loop's metrics."""
    o = self.options
    start, before = time.time(), self.global_step
    self.loss_metric.reset_state()
    if self.task_metrics is not None:
      self.task_metrics.reset()
    nonfinite_state = int(self.run_on_data(self._train_loop, self._iterator,
                                           tf.cast(num_steps, tf.int32)))
    step = self.global_step
    results = self.task_metrics.result() if self.task_metrics is not None else {}
    results["loss"] = float(self.loss_metric.result())
    if nonfinite_state >= 0 or not math.isfinite(results["loss"]):
      raise recovery.nonfinite_error(
          self.manager, nonfinite_state if nonfinite_state >= 0 else before, results["loss"])
    results["learning_rate"] = float(self.schedule(step))
    results["examples_per_second"] = ((step - before) * o.train_batch_size /
                                      max(time.time() - start, 1e-9))
    return results

  def fit(self, dataset, on_checkpoint=None, history=None):
    """Trains to `train_steps` over `dataset` (repeating global batches): a checkpoint every
    `save_checkpoints_steps` and at the end, then `on_checkpoint(path)` (dev evaluation, say).

    `history` (a list) receives each loop's results with its step. Raises `Preempted` after
    SIGTERM, once the checkpoint of the current step is written; a SIGTERM during
    `on_checkpoint` stops it at once (its checkpoint is written; the caller redoes its work).
    """
    o = self.options
    self.restore_or_initialize()
    iterator = self.attach(dataset)
    if o.checkpoint_input_pipeline and not isinstance(
        self.strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)):
      # The input position (shuffle buffers included) goes into every checkpoint, so a resumed
      # run sees exactly the batches an uninterrupted one would; restored lazily if resuming.
      self.checkpoint.input_pipeline = iterator
    progress = Progress(self.global_step, self.train_steps, o.train_batch_size,
                        o.log_every_seconds, self.task.progress, history)

    def after_loop(results):
      step = self.global_step
      if bool(self._stop.numpy()):
        latest = self.manager.latest_checkpoint
        saved = (latest if latest and latest.endswith(f"-{step}")
                 else recovery.save_checkpoint(self.manager, step))
        raise Preempted(saved, step)
      progress(step, results)
      if step % o.save_checkpoints_steps == 0 or step == self.train_steps:
        saved = recovery.save_checkpoint(self.manager, step)
        if on_checkpoint is not None:
          if bool(self._stop.numpy()):  # SIGTERM came while saving
            raise Preempted(saved, step)
          # A dev evaluation takes minutes: SIGTERM ends it at once rather than after it.
          with sigterm_raises(f"the evaluation at step {step}", saved, step):
            on_checkpoint(saved)

    def steps_in_next_loop(step):  # inner loops end at checkpoint steps
      next_save = (step // o.save_checkpoints_steps + 1) * o.save_checkpoints_steps
      return max(1, min(o.iterations_per_loop, next_save - step))

    controller = orbit.Controller(
        trainer=self, strategy=self.strategy, global_step=self.optimizer.iterations,
        steps_per_loop=steps_in_next_loop, train_actions=[after_loop],
        summary_dir=os.path.join(self.write_dir, "train"))
    self._stop.assign(False)
    with sigterm_stops(self._stop):
      controller.train(self.train_steps, checkpoint_at_completion=False)
    if bool(self._stop.numpy()):  # SIGTERM during the last save: its checkpoint is written
      raise Preempted(self.manager.latest_checkpoint, self.global_step)
    return progress.last


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


def _untrained(model, report):
  """Why `model`, started from `report` (a LoadReport, or None: nothing loaded), is not a
  trained model; None when every trainable weight came from the starting checkpoint."""
  if report is None:
    return "no starting weights were given (--init_checkpoint): every weight is random"
  assigned = {v.ref() for v in report.assigned}
  random_weights = [v.name for v in model.trainable_variables if v.ref() not in assigned]
  if not random_weights:
    return None
  shown = ", ".join(random_weights[:3]) + (", ..." if len(random_weights) > 3 else "")
  return (f"{report.path} leaves {len(random_weights)} of the model's weights random (a head "
          f"trained on nothing: {shown})")
