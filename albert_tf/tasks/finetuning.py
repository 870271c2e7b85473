"""What every fine-tuning job shares (classification, SQuAD, RACE): the options of a starting
point and vocabulary, `FineTuner` (config, tokenizer, starting weights, the best checkpoint by
dev metric in `output_dir/best`, resuming a stopped evaluation), cached features, and the
train / evaluate / predict / export phases. Training itself runs on the training core
(`core.py`), optionally distilling a teacher (`distillation.py`).
"""

import dataclasses
import json
import logging
import os

import tensorflow as tf

from albert_tf import guards
from albert_tf import tokenization
from albert_tf.checkpoints import load_checkpoint, tf1_variable_map
from albert_tf.config import AlbertConfig
from albert_tf.core import CoreOptions, Task, TrainingCore, check_options, sigterm_raises
from albert_tf.optimization import layerwise_lr_multipliers
from albert_tf.tasks import distillation

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
