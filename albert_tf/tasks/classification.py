"""Fine-tuning for sentence (pair) classification and regression: the run_classifier job.

Features are cached as TFRecords; training runs on the training core (`core.py`: strategies,
accumulation, precision, guards), optionally distilling a teacher (`distillation.py`); after
each checkpoint the dev set is evaluated and the best checkpoint by the task's first metric is
kept in `output_dir/best` (`finetuning.FineTuner`).
"""

import dataclasses
import hashlib
import json
import logging
import math
import os

import numpy as np
import tensorflow as tf

from albert_tf import guards
from albert_tf.core import check_options
from albert_tf.data import classification
from albert_tf.metrics import compute_metrics
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.tasks import distillation
from albert_tf.tasks.distillation import DistillOptions
from albert_tf.tasks.finetuning import FineTuner, FineTuningOptions, reuse_or_build, run_phases

logger = logging.getLogger(__name__)


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
    guards.write_results(os.path.join(o.output_dir, "eval_results.txt"), results)
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



def run_classifier(options, strategy=None):
  """What run_classifier.py does; returns the last eval results (or None)."""
  if not (options.do_train or options.do_eval or options.do_predict):
    raise ValueError("at least one of --do_train, --do_eval or --do_predict must be set")
  return run_phases(ClassifierRunner(options, strategy), options)
