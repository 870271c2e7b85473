"""Fine-tuning for sentence (pair) classification and regression: the run_classifier job.

Features are cached as TFRecords; training runs on the training core (`core.py`: strategies,
accumulation, precision, guards), optionally distilling a teacher (`distillation.py`); after
each checkpoint the dev set is evaluated and the best checkpoint by the task's first metric is
kept in `output_dir/best`.
"""

import dataclasses
import hashlib
import json
import logging
import math
import os

import numpy as np
import tensorflow as tf

from albert_tf import distillation
from albert_tf import guards
from albert_tf import tokenization
from albert_tf.checkpoints import load_checkpoint, tf1_variable_map
from albert_tf.config import AlbertConfig
from albert_tf.core import CoreOptions, Task, TrainingCore, check_options, sigterm_raises
from albert_tf.data import classification
from albert_tf.distillation import DistillOptions
from albert_tf.metrics import compute_metrics
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.optimization import layerwise_lr_multipliers

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class FineTuningOptions(CoreOptions):
  """The flags every fine-tuning job shares: the model, its starting point, the vocabulary."""
  albert_config_file: str = None
  init_checkpoint: str = None
  albert_hub_module_handle: str = None
  spm_model_file: str = None
  vocab_file: str = None
  do_lower_case: bool = True
  do_train: bool = False
  do_predict: bool = False
  predict_batch_size: int = 8
  export_dir: str = None

  BOUNDS = {"predict_batch_size": ">= 1"}


@dataclasses.dataclass
class ClassifierOptions(FineTuningOptions):
  """run_classifier.py's flags (the original's names and defaults)."""
  task_name: str = None
  data_dir: str = None
  max_seq_length: int = 512
  do_eval: bool = False
  eval_batch_size: int = 8
  train_step: int = 1000
  warmup_step: int = 0
  # BERT's / brightmart's way to say the length (their run_classifier_lcqmc.sh): when set,
  # train_step = int(train examples / train_batch_size * epochs) and warmup_step = that times
  # warmup_proportion.
  num_train_epochs: float = None
  warmup_proportion: float = 0.1
  cached_dir: str = None
  tflite_quantize: bool = False
  layerwise_lr_decay: float = None
  csv_options: dict = dataclasses.field(default_factory=dict)
  distill: DistillOptions = None

  BOUNDS = {"max_seq_length": ">= 3", "eval_batch_size": ">= 1", "train_step": ">= 1",
            "warmup_step": ">= 0", "num_train_epochs": "> 0", "warmup_proportion": "in [0, 1)",
            "layerwise_lr_decay": "> 0"}


class FineTuner(Task):
  """What every fine-tuning job shares on the training core: the config and tokenizer, the
  starting weights (a checkpoint of ours or the original's, or an encoder SavedModel).

  Subclasses build the model (`build_model`) and give the per-example loss of a batch
  (`per_example_loss(model, batch)`); the core normalises it over the global batch.
  """

  def __init__(self, options, strategy, train_steps, warmup_steps):
    o = options
    check_options(o)
    self.options = o
    self.config_file = o.albert_config_file
    self.config = AlbertConfig.from_json_file(o.albert_config_file)
    self.distill = getattr(o, "distill", None)
    if self.distill is not None and not self.distill.enabled:
      self.distill.check_teacher_given()
      self.distill = None
    if self.distill is not None and self.distill.student_num_hidden_layers:
      # The teacher's shared block applied fewer times: the same variables, fewer layers.
      self.config = self.config.replace(
          num_hidden_layers=self.distill.student_num_hidden_layers)
    if o.max_seq_length > self.config.max_position_embeddings:
      raise ValueError(f"--max_seq_length={o.max_seq_length} exceeds the config's "
                       f"max_position_embeddings={self.config.max_position_embeddings}")
    self.tokenizer = tokenization.FullTokenizer(
        vocab_file=None if o.spm_model_file else getattr(o, "vocab_file", None),
        do_lower_case=o.do_lower_case, spm_model_file=o.spm_model_file)
    if self.tokenizer.vocab_size != self.config.vocab_size:
      raise ValueError(f"the tokenizer has {self.tokenizer.vocab_size} entries but "
                       f"{o.albert_config_file} says vocab_size={self.config.vocab_size}")
    guards.check_writable(o.output_dir)
    if o.export_dir:
      check_export_dir(o.export_dir)
    guards.remove_interrupted_writes(o.output_dir, o.export_dir)
    self.best_update_interrupted = self._finish_best_update()
    self.read_data()
    self.train_steps = train_steps
    TrainingCore(self, o, strategy, train_steps, warmup_steps, do_train=o.do_train)
    self.strategy = self.core.strategy

  def per_example_loss(self, model, batch):
    """float32 [per-replica batch] losses of `batch` in training mode."""
    raise NotImplementedError

  # --- data ---------------------------------------------------------------------------------
  def read_examples(self, split):
    """The examples of `split` ("train", "dev" or "test") as the task reads them."""
    raise NotImplementedError

  def examples(self, split):
    """The examples of `split`, read once per job."""
    cache = self.__dict__.setdefault("_examples", {})
    if split not in cache:
      cache[split] = self.read_examples(split)
    return cache[split]

  def read_data(self):
    """Reads every split the flags ask for before the model is built: a missing or broken dev
    or test split must fail now, not after hours of training."""
    for split, flag in (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict")):
      if getattr(self.options, flag, False):
        try:
          self.examples(split)
        except FileNotFoundError as e:
          raise FileNotFoundError(f"--{flag}: {e}") from None

  def train_steps_flag(self):
    o = self.options
    if getattr(o, "num_train_epochs", None) is not None:
      return f"--num_train_epochs={o.num_train_epochs:g} ({self.train_steps} steps)"
    return f"--train_step={o.train_step}"

  def train_loss(self, model, batch, normalizers):
    return tf.reduce_sum(self.per_example_loss(model, batch)) / normalizers["examples"], None

  def lr_multipliers(self, model):
    if getattr(self.options, "layerwise_lr_decay", None) is None:
      return None
    return layerwise_lr_multipliers(tf1_variable_map(model), self.options.layerwise_lr_decay)

  def initialize(self, model):
    start = self.options.albert_hub_module_handle or self.options.init_checkpoint
    if (not start and self.distill is not None and self.distill.student_num_hidden_layers
        and self.distill.teacher_checkpoint):
      start = distillation.checkpoint_of(self.distill.teacher_checkpoint)
      logger.info("The student starts from the teacher's weights: %s", start)
    if start:
      logger.info(load_checkpoint(model, start).summary())
    else:
      logger.warning("no --init_checkpoint or --albert_hub_module_handle: training from "
                     "random weights")

  def train(self, dataset, on_checkpoint=None, history=None):
    """Trains to `train_steps` over `dataset` (repeating global batches) on the core; returns
    the last loop's metrics (`history`, a list, receives every loop's)."""
    return self.core.fit(dataset, on_checkpoint, history)


  # --- best checkpoint -------------------------------------------------------------------------
  best_metric = None  # the dev metric that picks the best checkpoint (higher is better)

  def train_keeping_best(self, dataset, history=None):
    """Trains; with --do_eval, evaluates after every checkpoint and keeps the best one (by
    `best_metric`) in output_dir/best with its results (best_results.txt).

    A SIGTERM during the evaluation of a checkpoint (or while it was being kept as the best)
    stops the job at once; resuming from that checkpoint evaluates it first.
    """
    o = self.options
    best = [self._best_score()]
    self.restore_or_initialize()
    step, latest = self.global_step, self.manager.latest_checkpoint
    evaluated = _read_result(os.path.join(o.output_dir, "eval_results.txt"), "global_step")
    if (o.do_eval and latest and (step % o.save_checkpoints_steps == 0 or
                                  step == self.train_steps)
        and (evaluated != step or self.best_update_interrupted)):
      logger.info("Evaluating %s, which the run that saved it did not finish evaluating",
                  latest)
      with sigterm_raises(f"the evaluation at step {step}", latest, step):
        best[0] = self._keep_if_best(latest, self.evaluate(), best[0])

    def on_checkpoint(saved):
      if o.do_eval:
        best[0] = self._keep_if_best(saved, self.evaluate(), best[0])
    return self.core.fit(dataset, on_checkpoint, history)

  def _best_score(self):
    return _read_result(os.path.join(self.options.output_dir, "best", "best_results.txt"),
                        self.best_metric)

  def _finish_best_update(self):
    """`_keep_if_best` fills `best.tmp` (best_results.txt last), then swaps it for `best`: a
    stop in between leaves `best.tmp`. Complete, it is swapped in now; incomplete, it is
    removed and True returned (the checkpoint it was for is evaluated again)."""
    folder = os.path.join(self.options.output_dir, "best")
    tmp = folder + ".tmp"
    if not tf.io.gfile.exists(tmp):
      return False
    if tf.io.gfile.exists(os.path.join(tmp, "best_results.txt")):
      if tf.io.gfile.exists(folder):
        tf.io.gfile.rmtree(folder)
      tf.io.gfile.rename(tmp, folder)
      logger.info("%s: finished replacing it by %s, which a stopped run had completed", folder,
                  tmp)
      return False
    tf.io.gfile.rmtree(tmp)
    logger.info("removed %s, left incomplete by a stopped run", tmp)
    return True

  def _keep_if_best(self, saved, results, best):
    score = results[self.best_metric]
    if best is not None and not score > best:
      return best
    folder = os.path.join(self.options.output_dir, "best")
    tmp = folder + ".tmp"
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
    tf.io.gfile.makedirs(tmp)
    for source in tf.io.gfile.glob(saved + ".*"):
      tf.io.gfile.copy(source, os.path.join(tmp, os.path.basename(source)))
    guards.write_results(os.path.join(tmp, "best_results.txt"), results)
    if tf.io.gfile.exists(folder):
      tf.io.gfile.rmtree(folder)
    tf.io.gfile.rename(tmp, folder)
    logger.info("New best %s = %.4f at step %d -> %s", self.best_metric, score,
                results["global_step"], folder)
    return score


class ClassifierRunner(FineTuner):
  """Data, model, optimizer and checkpoints of one fine-tuning job."""

  def __init__(self, options, strategy=None):
    o = self.options = options
    check_options(o)  # before the epochs below turn into steps
    self.processor = classification.get_processor(o.task_name, **o.csv_options)
    self.regression = self.processor.is_regression
    self.labels = None if self.regression else self.processor.get_labels(
        **({"data_dir": o.data_dir} if o.task_name.lower() == "csv" else {}))
    self.best_metric = self.processor.metric_names[0]
    train_steps, warmup_steps = o.train_step, o.warmup_step
    if o.num_train_epochs is not None and o.do_train:
      examples = len(self.examples("train"))
      train_steps = max(1, int(examples / o.train_batch_size * o.num_train_epochs))
      warmup_steps = int(train_steps * o.warmup_proportion)
      logger.info("--num_train_epochs=%g over %d training examples at batch %d: %d steps, "
                  "%d of warm-up", o.num_train_epochs, examples, o.train_batch_size,
                  train_steps, warmup_steps)
    super().__init__(options, strategy, train_steps, warmup_steps)

  last_eval = None  # the latest dev results of this run

  def build_model(self):
    num_labels = 1 if self.regression else len(self.labels)
    self.distiller = None
    if self.distill is not None:
      self.distiller = distillation.Distiller(self.distill, self.config, num_labels,
                                              self.regression, self.config_file)
      self.distiller.build()
    return AlbertClassifier(self.config, num_labels)

  def checkpoint_items(self):
    if self.distiller is not None and self.distiller.projection is not None:
      return {"distill_projection": self.distiller.projection}
    return {}

  def trainable_variables(self, model):
    extra = self.distiller.trainable_variables() if self.distiller is not None else []
    return model.trainable_variables + extra

  def model_flags(self):
    return {"task_name": self.options.task_name.lower(),
            "num_labels": 1 if self.regression else len(self.labels)}

  # --- data ---------------------------------------------------------------------------------
  def read_examples(self, split):
    o = self.options
    examples = getattr(self.processor, f"get_{split}_examples")(o.data_dir)
    if not examples:
      raise ValueError(f"the {split} split of {o.task_name} in {o.data_dir} is empty")
    return examples

  def _records(self, split):
    """The split's examples and their cached TFRecord (built once per task, split and length)."""
    o = self.options
    examples = self.examples(split)
    folder = o.cached_dir or o.output_dir
    tf.io.gfile.makedirs(folder)
    path = os.path.join(folder, f"{self.processor.name}_{split}_{o.max_seq_length}.tf_record")

    def build():
      features = classification.convert_examples_to_features(
          examples, self.labels, o.max_seq_length, self.tokenizer)
      return classification.write_features_tfrecord(features, path)
    reuse_or_build(path, self._features_key(examples), build)
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

  def per_example_loss(self, model, batch):
    if self.distiller is not None:
      return self.distiller.per_example_loss(model, batch, self._loss)
    logits = model({n: batch[n] for n in INPUT_NAMES}, training=True)
    return self._loss(logits, batch["label_ids"])

  def train(self, history=None):  # pylint: disable=arguments-differ
    o = self.options
    _, path = self._records("train")
    dataset = classification.classification_dataset(path, o.max_seq_length, o.train_batch_size,
                                                    True, self.regression, seed=o.seed)
    return self.train_keeping_best(dataset, history)

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
    """A raw-text serving SavedModel of the current weights (TF Serving ready); with
    --tflite_quantize also `classifier.tflite` in it (token ids -> logits, int8 weights)."""
    from albert_tf.export.task_models import export_classifier  # pylint: disable=g-import-not-at-top
    from albert_tf.export.tflite import export_classifier_tflite  # pylint: disable=g-import-not-at-top
    o = self.options
    path = export_classifier(self.model, o.export_dir, self.labels,
                             spm_model_file=o.spm_model_file,
                             vocab_file=None if o.spm_model_file else o.vocab_file,
                             do_lower_case=o.do_lower_case, max_seq_length=o.max_seq_length)
    logger.info("Exported the serving model (raw text in) to %s", path)
    if o.tflite_quantize:
      tflite = os.path.join(path, "classifier.tflite")
      size = export_classifier_tflite(self.model, tflite, o.max_seq_length, quantize=True)
      logger.info("Wrote %s (dynamic-range int8): %.1f MB", tflite, size / 1e6)
    return path

write_results = guards.write_results  # (run_squad imports it from here)


def reuse_or_build(path, key, build):
  """Cached features: `path` is reused when its sidecar `<path>.json` holds `key` (a hash of
  what it was built from), else `build()` writes it (returning the record count) and the
  sidecar is written after it. The file name alone (the original's cache key) would silently
  reuse features of other data or another vocabulary."""
  sidecar = path + ".json"
  if tf.io.gfile.exists(path) and tf.io.gfile.exists(sidecar):
    with tf.io.gfile.GFile(sidecar) as f:
      if json.load(f).get("key") == key:
        return
    logger.info("%s was built from other data, vocabulary or flags; rebuilding it", path)
  if tf.io.gfile.exists(sidecar):  # a rebuild stopped half-way must not pass for the old one
    tf.io.gfile.remove(sidecar)
  count = build()
  guards.write_text_atomically(sidecar, json.dumps({"key": key, "examples": count}))
  logger.info("Wrote %d examples' features to %s", count, path)


def run_phases(runner, options):
  """Resume or start, then train, evaluate, predict and export as the flags ask; returns the
  last dev results (or None). SIGTERM after training stops at once (`sigterm_raises`)."""
  runner.restore_or_initialize()
  results = None
  if options.do_train:
    runner.train()
  if options.do_eval:
    with sigterm_raises("the evaluation"):
      results = (runner.last_eval if options.do_train and runner.last_eval
                 else runner.evaluate())
  if options.do_predict:
    with sigterm_raises("the prediction"):
      runner.predict()
  if options.export_dir:
    with sigterm_raises(f"the export to {options.export_dir}"):
      runner.export()
  return results


def check_export_dir(export_dir):
  """Before training: an export is written beside `export_dir` (`<export_dir>.tmp`) and
  renamed into place, so the folder that holds it must be writable."""
  guards.check_writable(os.path.dirname(export_dir.rstrip("/")) or ".",
                        flag="--export_dir's folder")


def check_cache_writable(flag, path):
  """Before training: the folder of a feature cache that a late phase (evaluation, prediction)
  will build must be writable now, not hours later."""
  if path and not tf.io.gfile.exists(path):
    guards.check_writable(os.path.dirname(path) or ".", flag=f"{flag}'s folder")


def _read_result(path, key):
  """The value of `key` in a results file (`key = value` lines), or None."""
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    for line in f:
      name, _, value = line.partition(" = ")
      if name == key:
        return float(value)
  return None


def run_classifier(options, strategy=None):
  """What run_classifier.py does; returns the last eval results (or None)."""
  if not (options.do_train or options.do_eval or options.do_predict):
    raise ValueError("at least one of --do_train, --do_eval or --do_predict must be set")
  return run_phases(ClassifierRunner(options, strategy), options)
