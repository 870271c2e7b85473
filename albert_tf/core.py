"""The training core: one loop under every job (pretraining, classification, SQuAD, distillation).

A job is a `Task`: it builds its model, says how a micro-batch's loss is normalised over the
global batch, and loads its starting weights. `TrainingCore` does everything else, the same way
for every task:

- the strategy scope, precision (`float16` with dynamic loss scaling, `bfloat16`), XLA for the
  forward and backward pass, recompute of the transformer blocks, frozen parts;
- one optimizer step per global batch: gradients summed over `gradient_accumulation_steps`
  micro-batches and all replicas, clipped to global norm 1.0 (the original's), applied once;
  the loss is normalised over the whole global batch, so any split gives one device's result;
- checkpoints that resume exactly (model, optimizer, step and the input position), the run's
  config checked on resume, progress lines with examples/s and ETA, TensorBoard summaries;
- the guards: a non-finite loss stops at the step that produced it and sets aside the
  checkpoints of bad weights; failed checkpoint writes are one clear error;
- SIGTERM (preemption) ends the loop within one step, saves a checkpoint and raises
  `Preempted`, so the scripts exit 0 and the same command resumes; outside the loop (a dev
  evaluation, the job's export) `sigterm_raises` stops the work at once.

orbit's `Controller` drives the loop (inner loops of `iterations_per_loop` steps, cut at
checkpoint steps; train summaries; its progress line). The core implements orbit's
`AbstractTrainer` itself rather than `StandardTrainer`: its loop must stop inside a
`tf.function` at the first non-finite loss or on SIGTERM, which `StandardTrainer`'s fixed
`tf.while_loop` cannot. Checkpoints are written by a train action through the guards (orbit's
`SaveCheckpointIfPreempted` needs a cluster's preemption watcher and exits 42; users of a
single machine get SIGTERM and expect 0).
"""

import contextlib
import dataclasses
import logging
import math
import os
import signal
import threading
import time

import orbit
import tensorflow as tf
import tf_keras

from albert_tf import guards
from albert_tf import signals
from albert_tf.checkpoints import native_checkpoint, tf1_variable_map
from albert_tf.modeling.transformer import set_recompute_grad
from albert_tf.optimization import AlbertLearningRate, clip_gradients, create_optimizer

logger = logging.getLogger(__name__)

PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


@dataclasses.dataclass
class CoreOptions:
  """The flags every training job shares (each job's options extend these)."""
  output_dir: str = None
  train_batch_size: int = 32
  optimizer: str = "adamw"
  learning_rate: float = 5e-5
  weight_decay_rate: float = 0.01
  bias_correction: bool = False
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  iterations_per_loop: int = 1000
  gradient_accumulation_steps: int = 1
  mixed_precision: str = "float32"
  jit_compile: bool = False
  recompute_grad: bool = False
  freeze: tuple = ()
  seed: int = None
  log_every_seconds: float = 10.0
  checkpoint_input_pipeline: bool = True

  # What a value must be to mean anything (`check_options`); None is "not given".
  BOUNDS = {"train_batch_size": ">= 1", "learning_rate": "> 0", "weight_decay_rate": ">= 0",
            "save_checkpoints_steps": ">= 1", "keep_checkpoint_max": ">= 1",
            "iterations_per_loop": ">= 1", "gradient_accumulation_steps": ">= 1",
            "seed": ">= 0", "log_every_seconds": ">= 0"}


def _allows(rule, value):
  """Whether `value` meets `rule`: ">= 1", "> 0", "in [0, 1]" or "in [0, 1)"."""
  if rule.startswith("in "):
    low, high = (float(x) for x in rule[4:-1].split(","))
    return low <= value and (value < high if rule.endswith(")") else value <= high)
  op, bound = rule.split()
  return value >= float(bound) if op == ">=" else value > float(bound)


def check_options(options):
  """Refuses option values that cannot mean anything (a batch of 0, negative steps, a student
  of 0 layers), naming the flag and the rule, before any work: such a value is never replaced
  by a default nor left to fail later under another name.

  Each options dataclass lists its rules in a `BOUNDS` class attribute ({field: rule}) and the
  flags named otherwise than their fields in `FLAG_NAMES`; nested options (distillation's)
  are checked too.
  """
  for klass in type(options).__mro__:
    for name, rule in vars(klass).get("BOUNDS", {}).items():
      value = getattr(options, name)
      if value is not None and not _allows(rule, value):
        flag = getattr(options, "FLAG_NAMES", {}).get(name, name)
        raise ValueError(f"--{flag} must be {rule}, got {value!r}")
  for field in dataclasses.fields(options):
    value = getattr(options, field.name)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      check_options(value)


class Preempted(BaseException):
  """SIGTERM stopped the job; `checkpoint` holds the state to resume from.

  `during` names the work outside the training loop that it stopped (an evaluation, the
  export), which the same command does again. A BaseException, as KeyboardInterrupt: a
  request to stop that no `except Exception` on the way may swallow.
  """

  def __init__(self, checkpoint, step, during=None):
    if during is None:
      message = (f"stopped by SIGTERM at step {step}; saved {checkpoint}: run the same "
                 "command again to resume")
    else:
      saved = f" ({checkpoint} is saved)" if checkpoint else ""
      message = (f"stopped by SIGTERM during {during}{saved}; its outputs appear only "
                 "whole: run the same command again to finish the job")
    super().__init__(message)
    self.checkpoint = checkpoint
    self.step = step
    self.during = during


class Task:
  """A job on the core. Subclasses set `options`, `config`, `config_file` and create
  `self.core = TrainingCore(self, ...)`; they override what their job needs."""

  core = None

  def build_model(self):
    """The trained Keras model (called under the strategy scope and precision policy)."""
    raise NotImplementedError

  def train_loss(self, model, batch, normalizers):
    """(this micro-batch's share of the global-batch loss, aux for `update_train_metrics`)."""
    raise NotImplementedError

  def normalizers(self, batch):
    """Per-replica sums that, summed over replicas, normalise the loss (default: examples)."""
    return {"examples": tf.cast(tf.shape(batch[next(iter(batch))])[0], tf.float32)}

  def initialize(self, model):
    """Loads the starting weights when there is no checkpoint to resume."""

  def model_flags(self):
    """Flags besides albert_config.json that shape the model's variables (checked on resume)."""
    return {}

  def lr_multipliers(self, model):
    return None

  def checkpoint_items(self):
    """Trackables trained besides the model (saved and restored with it)."""
    return {}

  def trainable_variables(self, model):
    return model.trainable_variables

  def build_metrics(self):
    """Train metrics besides the loss: an object with update(batch, aux), result(), reset()."""
    return None

  def progress(self, results):
    """Extra fields of the progress line."""
    return ""

  def train_steps_flag(self):
    """The flag that set the step budget, with its value (for messages)."""
    return f"--num_train_steps={self.core.train_steps}"

  def locate_bad_record(self, error):
    """An error naming the input file behind a record error, or None."""
    return None

  # Shortcuts to the core's state.
  model = property(lambda self: self.core.model)
  optimizer = property(lambda self: self.core.optimizer)
  manager = property(lambda self: self.core.manager)
  schedule = property(lambda self: self.core.schedule)
  write_dir = property(lambda self: self.core.write_dir)
  global_step = property(lambda self: self.core.global_step)

  def restore_or_initialize(self):
    return self.core.restore_or_initialize()


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


def freeze_parts(model, parts):
  """The variables of the named parts: `embeddings` (word, position and token-type embeddings,
  their LayerNorm and the E -> H projection), `group_<g>` (one transformer group of the
  encoder), `pooler`. Unknown names are an error listing the model's parts."""
  parts = [p.strip() for p in (parts or ()) if p.strip()]
  if not parts:
    return set()
  found = {}
  for name, variable in tf1_variable_map(model).items():
    part = _part_of(name)
    if part:
      found.setdefault(part, []).append(variable)
  unknown = [p for p in parts if p not in found]
  if unknown:
    raise ValueError(f"--freeze={','.join(unknown)}: this model's parts are "
                     f"{', '.join(sorted(found))} (with full sharing every layer is group_0)")
  return {v.ref() for p in parts for v in found[p]}


def _part_of(tf1_name):
  if tf1_name.startswith("bert/embeddings/") or "embedding_hidden_mapping_in" in tf1_name:
    return "embeddings"
  if tf1_name.startswith("bert/encoder/transformer/"):
    return tf1_name.split("/")[3]
  if tf1_name.startswith("bert/pooler/"):
    return "pooler"
  return None


class TrainingCore(orbit.AbstractTrainer):
  """Model, optimizer, checkpoints and the training loop of one task on one strategy."""

  def __init__(self, task, options, strategy=None, train_steps=0, warmup_steps=0,
               start_warmup_step=0, poly_power=1.0, do_train=True):
    o = self.options = options
    self.task = task
    task.core = self
    self.strategy = strategy or tf.distribute.get_strategy()
    self.train_steps = train_steps
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
      self.schedule = AlbertLearningRate(o.learning_rate, max(train_steps, 1), warmup_steps,
                                         start_warmup_step, poly_power)
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
    self._stop = tf.Variable(False, trainable=False, name="stop_requested")

  @property
  def global_step(self):
    return int(self.optimizer.iterations.numpy())

  # --- starting point -----------------------------------------------------------------------
  def restore_or_initialize(self):
    """Resumes from the latest checkpoint of the output folder (its config checked first),
    else loads the task's starting weights. Returns the checkpoint resumed from, or None."""
    if self._restored is not False:
      return self._restored
    task = self.task
    latest = self.manager.latest_checkpoint
    guards.remove_stale_temp_checkpoints(self.write_dir)
    guards.check_run_config(self.write_dir, task.config, task.config_file,
                            resuming=latest is not None, model_flags=task.model_flags())
    if latest:
      try:
        status = self._restorable(latest).restore(latest)
      except (tf.errors.OpError, IndexError) as e:  # TensorFlow's reader on damaged files
        raise guards.damaged_checkpoint_error(self.manager, latest,
                                              getattr(e, "message", e)) from None
      status.assert_existing_objects_matched()
      status.expect_partial()  # eval-only runs have no optimizer slots to restore into
      logger.info("Resumed from %s at step %d", latest, self.global_step)
      self._check_step_budget(latest)
    else:
      task.initialize(self.model)
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
      return nonfinite_state
    return train_loop

  def run_on_data(self, function, *args):
    """`function(*args)`; a bad record in the input becomes the task's error naming its file."""
    try:
      return function(*args)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      if not guards.is_record_error(e):
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
      raise guards.nonfinite_error(
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
    progress = _Progress(self, history)

    def after_loop(results):
      step = self.global_step
      if bool(self._stop.numpy()):
        latest = self.manager.latest_checkpoint
        saved = (latest if latest and latest.endswith(f"-{step}")
                 else guards.save_checkpoint(self.manager, step))
        raise Preempted(saved, step)
      progress(step, results)
      if step % o.save_checkpoints_steps == 0 or step == self.train_steps:
        saved = guards.save_checkpoint(self.manager, step)
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
    with _sigterm_stops(self._stop):
      controller.train(self.train_steps, checkpoint_at_completion=False)
    if bool(self._stop.numpy()):  # SIGTERM during the last save: its checkpoint is written
      raise Preempted(self.manager.latest_checkpoint, self.global_step)
    return progress.last


class _Progress:
  """One progress line every `log_every_seconds` (and at the end): step, loss, the task's
  metrics, learning rate, steps/s, examples/s and ETA. The rates count from the end of the
  first loop on: that loop traces (and compiles) the step, a one-off that would make a short
  run's examples/s and every early ETA a fraction of what training runs at."""

  def __init__(self, core, history):
    self.core, self.history = core, history
    self.start_step, self.start_time, self.last_log = core.global_step, time.time(), 0.0
    self.first_loop = None  # (step, time) at the end of the first loop
    self.last = {}

  def __call__(self, step, results):
    core = self.core
    results = {k: float(v) for k, v in results.items()}
    self.last = results
    if self.history is not None:
      self.history.append(dict(results, step=step))
    now = time.time()
    if self.first_loop is None:
      self.first_loop = (step, now)
    if now - self.last_log < core.options.log_every_seconds and step != core.train_steps:
      return
    self.last_log = now
    since_step, since = self.first_loop if step > self.first_loop[0] else (self.start_step,
                                                                            self.start_time)
    rate = (step - since_step) / max(now - since, 1e-9)
    eta = (core.train_steps - step) / rate if rate > 0 else float("inf")
    extra = core.task.progress(results)
    logger.info("step %d/%d  loss %.4f  %slr %.3g  %.2f steps/s  %.1f examples/s  ETA %s",
                step, core.train_steps, results["loss"], extra + "  " if extra else "",
                results["learning_rate"], rate, rate * core.options.train_batch_size,
                duration(eta))


@contextlib.contextmanager
def _sigterm_stops(stop):
  """While inside, SIGTERM sets `stop` (read by the in-graph loop before every step).

  A Python signal handler runs only when the main thread returns to the interpreter, which a
  long `tf.function` call does not; so the signal's wake-up byte is read by a watcher thread
  that sets the variable at once, and the loop ends within one step.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  read_fd, write_fd = os.pipe()
  os.set_blocking(write_fd, False)

  def watch():
    while True:
      data = os.read(read_fd, 64)
      if not data:
        return
      if signal.SIGTERM in data:
        logger.warning("SIGTERM: stopping, with a checkpoint of this step")
        stop.assign(True)

  previous_handler = signal.signal(signal.SIGTERM, lambda signum, frame: None)
  previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
  watcher = threading.Thread(target=watch, name="sigterm-watcher", daemon=True)
  watcher.start()
  try:
    yield
  finally:
    signal.set_wakeup_fd(previous_fd)
    signal.signal(signal.SIGTERM, previous_handler)
    os.close(write_fd)
    watcher.join(timeout=5)
    os.close(read_fd)


def sigterm_raises(during, checkpoint=None, step=None):
  """While inside (in the main thread), SIGTERM raises `Preempted` at once, wherever the job
  is: for the work outside the training loop (features, evaluations, predictions, exports).
  What that work writes appears only whole (temporary names, renamed when complete) and the
  same command does it again, so stopping half-way loses nothing; waiting for its end could
  outlast a scheduler's grace period. Nests: the innermost `during` names the work.
  """
  return signals.raising_on_sigterm(lambda signum: Preempted(checkpoint, step, during))


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


def duration(seconds):
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
