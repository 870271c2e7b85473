"""Fine-tuning for sentence (pair) classification and regression: the run_classifier job.

Features are cached as TFRecords; training is a custom loop on any strategy (the global-batch
loss, cross-replica gradient sum, clipping at 1.0 and the optimizers of `optimization.py`, as in
pretraining); after each checkpoint the dev set is evaluated and the best checkpoint by the
task's first metric is kept in `output_dir/best`.
"""

import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import guards
from albert_tf import tokenization
from albert_tf.checkpoints import load_checkpoint, native_checkpoint, tf1_variable_map
from albert_tf.config import AlbertConfig
from albert_tf.data import classification
from albert_tf.metrics import compute_metrics
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.transformer import set_recompute_grad
from albert_tf.optimization import (AlbertLearningRate, clip_gradients, create_optimizer,
                                    layerwise_lr_multipliers)

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ClassifierOptions:
  """run_classifier.py's flags (the original's names and defaults)."""
  task_name: str = None
  data_dir: str = None
  output_dir: str = None
  albert_config_file: str = None
  init_checkpoint: str = None
  albert_hub_module_handle: str = None
  spm_model_file: str = None
  vocab_file: str = None
  do_lower_case: bool = True
  max_seq_length: int = 512
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  optimizer: str = "adamw"
  train_step: int = 1000
  warmup_step: int = 0
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  iterations_per_loop: int = 1000
  cached_dir: str = None
  export_dir: str = None
  layerwise_lr_decay: float = None
  seed: int = None
  recompute_grad: bool = False
  log_every_seconds: float = 10.0
  csv_options: dict = dataclasses.field(default_factory=dict)


class FineTuner:
  """What every fine-tuning job shares: the model under the strategy, the optimizer and its
  schedule, checkpoints that resume, and the training loop.

  Subclasses build the model (`build_model`) and give the per-example loss of a batch
  (`per_example_loss`); `train` runs the loop over a repeating dataset and calls
  `on_checkpoint(saved_path)` after each checkpoint (a dev evaluation, say).
  """

  def __init__(self, options, strategy, train_steps, warmup_steps):
    o = options
    self.options = o
    self.strategy = strategy or tf.distribute.get_strategy()
    self.train_steps = train_steps
    self.config = AlbertConfig.from_json_file(o.albert_config_file)
    if o.max_seq_length > self.config.max_position_embeddings:
      raise ValueError(f"--max_seq_length={o.max_seq_length} exceeds the config's "
                       f"max_position_embeddings={self.config.max_position_embeddings}")
    if o.do_train and o.train_batch_size % self.strategy.num_replicas_in_sync:
      raise ValueError(f"--train_batch_size={o.train_batch_size} is not divisible by "
                       f"{self.strategy.num_replicas_in_sync} replicas")
    self.tokenizer = tokenization.FullTokenizer(
        vocab_file=None if o.spm_model_file else getattr(o, "vocab_file", None),
        do_lower_case=o.do_lower_case, spm_model_file=o.spm_model_file)
    if self.tokenizer.vocab_size != self.config.vocab_size:
      raise ValueError(f"the tokenizer has {self.tokenizer.vocab_size} entries but "
                       f"{o.albert_config_file} says vocab_size={self.config.vocab_size}")
    guards.check_writable(o.output_dir)
    if o.seed is not None:  # Initial weights, dropout and shuffling repeat run to run.
      tf_keras.utils.set_random_seed(o.seed)
    with self.strategy.scope():
      self.model = self.build_model()
      set_recompute_grad(self.model, o.recompute_grad)
      self.schedule = AlbertLearningRate(o.learning_rate, max(train_steps, 1), warmup_steps)
      multipliers = None
      if getattr(o, "layerwise_lr_decay", None) is not None:
        multipliers = layerwise_lr_multipliers(tf1_variable_map(self.model),
                                               o.layerwise_lr_decay)
      self.optimizer = create_optimizer(o.optimizer, self.schedule, lr_multipliers=multipliers)
      self.checkpoint = native_checkpoint(self.model, optimizer=self.optimizer)
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, o.output_dir, max_to_keep=o.keep_checkpoint_max,
        step_counter=self.optimizer.iterations, checkpoint_name="ckpt")

  def build_model(self):
    raise NotImplementedError

  def per_example_loss(self, batch):
    """float32 [per-replica batch] losses of `batch` in training mode."""
    raise NotImplementedError

  def model_flags(self):
    """The flags besides albert_config.json that shape the model's variables (saved with
    the run and checked on resume)."""
    return {}

  @property
  def global_step(self):
    return int(self.optimizer.iterations.numpy())

  def restore_or_initialize(self):
    """Resumes from the output folder's latest checkpoint, else loads the starting weights."""
    latest = self.manager.latest_checkpoint
    guards.remove_stale_temp_checkpoints(self.options.output_dir)
    guards.check_run_config(self.options.output_dir, self.config,
                            self.options.albert_config_file, resuming=latest is not None,
                            model_flags=self.model_flags())
    if latest:
      status = self.checkpoint.restore(latest)
      status.assert_existing_objects_matched()
      status.expect_partial()
      logger.info("Resumed from %s at step %d", latest, self.global_step)
      return
    start = self.options.albert_hub_module_handle or self.options.init_checkpoint
    if start:
      logger.info(load_checkpoint(self.model, start).summary())
    else:
      logger.warning("no --init_checkpoint or --albert_hub_module_handle: training from "
                     "random weights")

  def _make_train_loop(self):
    model, optimizer = self.model, self.optimizer
    global_batch = self.options.train_batch_size
    with self.strategy.scope():
      self.train_loss = tf_keras.metrics.Mean("loss")

    def replica_step(batch):
      ctx = tf.distribute.get_replica_context()
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(self.per_example_loss(batch)) / float(global_batch)
      # Variables the loss does not reach (the pooler, for SQuAD) get no update, as in the
      # original, whose optimizer skips None gradients.
      pairs = [(g, v) for g, v in zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables) if g is not None]
      grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                             [tf.convert_to_tensor(g) for g, _ in pairs])
      optimizer.apply_gradients(zip(clip_gradients(grads), [v for _, v in pairs]),
                                experimental_aggregate_gradients=False)
      loss = ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss)
      self.train_loss.update_state(loss)
      return loss

    @tf.function
    def train_loop(iterator, steps):
      """Runs `steps` steps; returns -1, or the step count whose weights gave a non-finite
      loss (the loop stops there)."""
      nonfinite_state = tf.constant(-1, tf.int64)
      for _ in tf.range(steps):
        state = tf.identity(optimizer.iterations)
        loss = self.strategy.run(replica_step, args=(next(iterator),))
        if not tf.math.is_finite(self.strategy.experimental_local_results(loss)[0]):
          nonfinite_state = state
          break
      return nonfinite_state
    return train_loop

  def train(self, dataset, on_checkpoint=None):
    """Steps up to `train_steps` over `dataset` (repeating, global batches), with progress
    lines, TensorBoard summaries in `output_dir/train`, and a checkpoint every
    `save_checkpoints_steps` and at the end."""
    o = self.options
    iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
    train_loop = self._make_train_loop()
    writer = tf.summary.create_file_writer(os.path.join(o.output_dir, "train"))
    start_step, start_time, last_log = self.global_step, time.time(), 0.0
    while self.global_step < self.train_steps:
      step = self.global_step
      next_save = (step // o.save_checkpoints_steps + 1) * o.save_checkpoints_steps
      steps = min(o.iterations_per_loop, self.train_steps - step, next_save - step)
      self.train_loss.reset_state()
      nonfinite_state = int(train_loop(iterator, tf.constant(steps, tf.int32)))
      step, loss = self.global_step, float(self.train_loss.result())
      if nonfinite_state >= 0 or not math.isfinite(loss):
        raise guards.nonfinite_error(
            self.manager, nonfinite_state if nonfinite_state >= 0 else step - steps, loss)
      with writer.as_default(step=step):
        tf.summary.scalar("loss", loss)
        tf.summary.scalar("learning_rate", float(self.schedule(step)))
      if step % o.save_checkpoints_steps == 0 or step == self.train_steps:
        saved = guards.save_checkpoint(self.manager, step)
        if on_checkpoint is not None:
          on_checkpoint(saved)
      now = time.time()
      if now - last_log >= o.log_every_seconds or step == self.train_steps:
        last_log = now
        rate = (step - start_step) / max(now - start_time, 1e-9)
        eta = (self.train_steps - step) / rate if rate > 0 else float("inf")
        logger.info("step %d/%d  loss %.4f  %.2f steps/s  %.1f examples/s  ETA %.0fs", step,
                    self.train_steps, loss, rate, rate * o.train_batch_size, eta)
    writer.flush()


class ClassifierRunner(FineTuner):
  """Data, model, optimizer and checkpoints of one fine-tuning job."""

  def __init__(self, options, strategy=None):
    o = options
    self.processor = classification.get_processor(o.task_name, **o.csv_options)
    self.regression = self.processor.is_regression
    self.labels = None if self.regression else self.processor.get_labels(
        **({"data_dir": o.data_dir} if o.task_name.lower() == "csv" else {}))
    super().__init__(options, strategy, o.train_step, o.warmup_step)

  last_eval = None  # the latest dev results of this run

  def build_model(self):
    return AlbertClassifier(self.config, 1 if self.regression else len(self.labels))

  def model_flags(self):
    return {"task_name": self.options.task_name.lower(),
            "num_labels": 1 if self.regression else len(self.labels)}

  # --- data ---------------------------------------------------------------------------------
  def _records(self, split):
    """The split's examples and their cached TFRecord (built once per task, split and length)."""
    o = self.options
    examples = getattr(self.processor, f"get_{split}_examples")(o.data_dir)
    if not examples:
      raise ValueError(f"the {split} split of {o.task_name} in {o.data_dir} is empty")
    folder = o.cached_dir or o.output_dir
    tf.io.gfile.makedirs(folder)
    path = os.path.join(folder, f"{self.processor.name}_{split}_{o.max_seq_length}.tf_record")
    # The file name alone (the original's cache key) would silently reuse features of other
    # data or another vocabulary: a sidecar holds the hash of what they were built from.
    sidecar, key = path + ".json", self._features_key(examples)
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(sidecar):
      with tf.io.gfile.GFile(sidecar) as f:
        if json.load(f).get("key") == key:
          return examples, path
      logger.info("%s was built from other data, vocabulary or labels; rebuilding it", path)
    features = classification.convert_examples_to_features(
        examples, self.labels, o.max_seq_length, self.tokenizer)
    classification.write_features_tfrecord(features, path)
    guards.write_text_atomically(sidecar, json.dumps({"key": key, "examples": len(examples)}))
    return examples, path

  def _features_key(self, examples):
    o = self.options
    digest = hashlib.sha256()
    vocabulary = o.spm_model_file or getattr(o, "vocab_file", None)
    with tf.io.gfile.GFile(vocabulary, "rb") as f:
      digest.update(f.read())
    digest.update(json.dumps([o.do_lower_case, o.max_seq_length, self.labels]).encode())
    for e in examples:
      digest.update(json.dumps([e.guid, e.text_a, e.text_b, e.label]).encode())
    return digest.hexdigest()

  # --- train --------------------------------------------------------------------------------
  def _loss(self, logits, labels):
    if self.regression:
      return tf.square(logits - tf.cast(labels, tf.float32))
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int32),
                                                          logits=logits)

  def per_example_loss(self, batch):
    logits = self.model({n: batch[n] for n in INPUT_NAMES}, training=True)
    return self._loss(logits, batch["label_ids"])

  def train(self):  # pylint: disable=arguments-differ
    o = self.options
    _, path = self._records("train")
    dataset = classification.classification_dataset(path, o.max_seq_length, o.train_batch_size,
                                                    True, self.regression, seed=o.seed)
    best = [self._best_score()]

    def on_checkpoint(saved):
      if o.do_eval:
        best[0] = self._keep_if_best(saved, self.evaluate(), best[0])
    super().train(dataset, on_checkpoint)

  # --- eval and predict ---------------------------------------------------------------------
  def _predict(self, path, batch_size):
    dataset = classification.classification_dataset(path, self.options.max_seq_length,
                                                    batch_size, False, self.regression)
    model = self.model

    @tf.function
    def step(batch):
      return model({n: batch[n] for n in INPUT_NAMES}, training=False)

    outputs, labels = [], []
    for batch in dataset:
      outputs.append(step(batch).numpy())
      labels.append(batch["label_ids"].numpy())
    return np.concatenate(outputs), np.concatenate(labels)

  def evaluate(self):
    o = self.options
    _, path = self._records("dev")
    outputs, labels = self._predict(path, o.eval_batch_size)
    loss = float(np.mean(self._loss(tf.constant(outputs), tf.constant(labels)).numpy()))
    if not (math.isfinite(loss) and np.isfinite(outputs).all()):
      raise guards.nonfinite_eval_error(loss, self.global_step, self.manager.latest_checkpoint)
    results = {"global_step": self.global_step, "loss": loss}
    results.update(compute_metrics(self.processor, outputs, labels))
    write_results(os.path.join(o.output_dir, "eval_results.txt"), results)
    self.last_eval = results
    logger.info("Eval at step %d: %s", self.global_step,
                ", ".join(f"{k} = {v:.4f}" for k, v in results.items() if k != "global_step"))
    return results

  def predict(self):
    o = self.options
    examples, path = self._records("test")
    outputs, _ = self._predict(path, o.predict_batch_size)
    guids = [e.guid for e in examples]
    if self.processor.submission == "clue":  # Chinese tasks: CLUE's JSON-lines submission
      target = os.path.join(o.output_dir, f"{self.processor.name}_predict.json")
      classification.write_clue_predictions(self.processor, outputs, target, ids=guids)
    else:
      target = os.path.join(o.output_dir, f"{self.processor.name.upper()}.tsv")
      classification.write_glue_predictions(self.processor, outputs, target, guids=guids)
    logger.info("Wrote %d test predictions to %s", len(examples), target)
    return target

  def export(self):
    """A raw-text serving SavedModel of the current weights (TF Serving ready)."""
    from albert_tf.export.task_models import export_classifier  # pylint: disable=g-import-not-at-top
    o = self.options
    path = export_classifier(self.model, o.export_dir, self.labels,
                             spm_model_file=o.spm_model_file,
                             vocab_file=None if o.spm_model_file else o.vocab_file,
                             do_lower_case=o.do_lower_case, max_seq_length=o.max_seq_length)
    logger.info("Exported the serving model (raw text in) to %s", path)
    return path

  # --- best checkpoint -------------------------------------------------------------------------
  def _best_score(self):
    path = os.path.join(self.options.output_dir, "best", "best_results.txt")
    if not tf.io.gfile.exists(path):
      return None
    metric = self.processor.metric_names[0]
    with tf.io.gfile.GFile(path) as f:
      for line in f:
        key, _, value = line.partition(" = ")
        if key == metric:
          return float(value)
    return None

  def _keep_if_best(self, saved, results, best):
    metric = self.processor.metric_names[0]
    score = results[metric]
    if best is not None and not score > best:
      return best
    folder = os.path.join(self.options.output_dir, "best")
    tmp = folder + ".tmp"
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
    tf.io.gfile.makedirs(tmp)
    for source in tf.io.gfile.glob(saved + ".*"):
      tf.io.gfile.copy(source, os.path.join(tmp, os.path.basename(source)))
    write_results(os.path.join(tmp, "best_results.txt"), results)
    if tf.io.gfile.exists(folder):
      shutil.rmtree(folder)
    tf.io.gfile.rename(tmp, folder)
    logger.info("New best %s = %.4f at step %d -> %s", metric, score, results["global_step"],
                folder)
    return score


write_results = guards.write_results  # (run_squad imports it from here)


def run_classifier(options, strategy=None):
  """What run_classifier.py does; returns the last eval results (or None)."""
  if not (options.do_train or options.do_eval or options.do_predict):
    raise ValueError("at least one of --do_train, --do_eval or --do_predict must be set")
  runner = ClassifierRunner(options, strategy)
  runner.restore_or_initialize()
  results = None
  if options.do_train:
    runner.train()
  if options.do_eval:
    results = runner.last_eval if options.do_train and runner.last_eval else runner.evaluate()
  if options.do_predict:
    runner.predict()
  if options.export_dir:
    runner.export()
  return results
