"""Sentence (pair) classification and regression: the task of run_classifier.py.

GLUE, CLUE and users' CSV/TSV data (`data/classification/`) become cached feature TFRecords;
the model is the encoder with a pooled-output head, optionally distilled from a teacher
(`distillation.py`); the dev metric that picks the best checkpoint is the task's first (GLUE's:
accuracy, Matthews correlation for CoLA, F1 for MRPC/QQP, Pearson for STS-B). `--do_predict`
writes GLUE's `<TASK>.tsv` or CLUE's `<task>_predict.json`; `--export_dir` a raw-text
classifier SavedModel (and, with --tflite_quantize, its int8 TFLite file).
"""

import dataclasses
import logging
import math
import os

import numpy as np
import tensorflow as tf

from albert_tf.data.classification.features import (classification_dataset,
                                                    convert_examples_to_features,
                                                    write_features_tfrecord)
from albert_tf.data.classification.registry import get_processor
from albert_tf.data.classification.submissions import write_clue_predictions, write_glue_predictions
from albert_tf.data.feature_cache import cache_key, reuse_or_build
from albert_tf.jobs.option_fields import option, sequence_length, trim_batches
from albert_tf.metrics.glue import compute_metrics
from albert_tf.metrics.majority import majority_share
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.tasks import distillation
from albert_tf.tasks.distillation import DistillOptions
from albert_tf.tasks.finetuning import FineTuningOptions, FineTuningTask
from albert_tf.training import recovery
from albert_tf.training.options import check_options
from albert_tf.training.task import Serving

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ClassifierOptions(FineTuningOptions):
  """run_classifier.py's flags (the original's names and defaults)."""
  task_name: str = option(
      None, "GLUE task (cola, mnli, mnli-mm, mrpc, qnli, qqp, rte, sst-2, sts-b, wnli, ax), "
      "Chinese task (afqmc, tnews, iflytek, ocnli, cmnli, csl: CLUE's JSON lines; lcqmc: "
      "albert_zh's train/dev/test.txt; chnsenticorp: TSV with header label, text_a) or 'csv' "
      "for your own data.")
  data_dir: str = option(None, "Folder with the task's train/dev/test files.")
  max_seq_length: int = sequence_length(512, "Sequence length.", at_least=3)
  trim_batches: bool = trim_batches()
  bucket_by_length: bool = option(
      False, "Draw each training batch from examples of similar length (buckets of 16 "
      "pieces, with --trim_batches): less padding still, but other batches than the original "
      "run's, so other losses and results (the dev set is evaluated as without it).")
  do_eval: bool = option(False, "Evaluate on dev (and keep the best checkpoint).")
  do_predict: bool = option(
      False, "Write test-set predictions: GLUE's <TASK>.tsv, or for a Chinese task CLUE's "
      "<task>_predict.json (each test row's own id).")
  eval_batch_size: int = option(8, "Eval batch.", bound=">= 1")
  train_step: int = option(1000, "Training steps.", bound=">= 1")
  warmup_step: int = option(0, "Warm-up steps.", bound=">= 0")
  # BERT's / brightmart's way to say the length (their run_classifier_lcqmc.sh): when set,
  # train_step = int(train examples / train_batch_size * epochs) and warmup_step = that times
  # warmup_proportion.
  num_train_epochs: float = option(
      None, "Train this many epochs instead of --train_step (BERT's and brightmart's flag); "
      "warm-up is then --warmup_proportion of it.", bound="> 0")
  warmup_proportion: float = option(
      0.1, "With --num_train_epochs: the share of the steps spent warming up.",
      bound="in [0, 1)")
  cached_dir: str = option(None, "Where feature TFRecords are cached (default output).")
  export_dir: str = option(None, "Write a raw-text-in serving SavedModel here at the end.")
  tflite_quantize: bool = option(
      False, "With --export_dir, also write classifier.tflite (token ids in, logits out) with "
      "dynamic-range int8 weights.")
  layerwise_lr_decay: float = option(
      None, "Layer-wise learning-rate decay (adamw): the head and pooler get the full rate, "
      "each transformer group below it this factor more, embeddings last.", bound="> 0")
  # The csv task's CsvOptions (as a dict of CsvProcessor's arguments); {} for the others.
  csv_options: dict = dataclasses.field(default_factory=dict)
  distill: DistillOptions = None


@dataclasses.dataclass
class CsvOptions:
  """run_classifier.py's flags of the csv task (your own CSV/TSV): CsvProcessor's arguments,
  given to it as ClassifierOptions.csv_options."""
  text_a_column: str = option(None, "csv task: column of the first text.")
  text_b_column: str = option(None, "csv task: column of the second text, if any.")
  label_column: str = option("label", "csv task: column of the label.")
  labels: tuple = option(None, "csv task: the label set (default: inferred from train).")
  regression: bool = option(False, "csv task: float labels, MSE loss.")


class ClassificationTask(FineTuningTask):
  """A GLUE / CLUE / CSV classification (or regression) task, optionally distilled."""

  def __init__(self, options):
    o = self.options = options
    check_options(o)  # before the epochs below turn into steps
    if o.bucket_by_length and not o.trim_batches:
      raise ValueError("--bucket_by_length needs --trim_batches: buckets save padding only in "
                       "batches cut to their longest row")
    self.processor = get_processor(o.task_name, **o.csv_options)
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
    super().__init__(options, train_steps, warmup_steps)
    self.distiller = None

  def build_model(self):
    num_labels = 1 if self.regression else len(self.labels)
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

  def records(self, split):
    """The split's examples and their cached TFRecord (built once per task, split and length)."""
    o = self.options
    examples = self.examples(split)
    folder = o.cached_dir or o.output_dir
    tf.io.gfile.makedirs(folder)
    path = os.path.join(folder, f"{self.processor.name}_{split}_{o.max_seq_length}.tf_record")

    def build():
      features = convert_examples_to_features(examples, self.labels, o.max_seq_length,
                                              self.tokenizer)
      return write_features_tfrecord(features, path)
    key = cache_key([o.spm_model_file or o.vocab_file],
                    [o.do_lower_case, o.max_seq_length, self.labels],
                    ([e.guid, e.text_a, e.text_b, e.label] for e in examples))
    reuse_or_build(path, key, build)
    return examples, path

  def train_dataset(self):
    o = self.options
    _, path = self.records("train")
    return classification_dataset(path, o.max_seq_length, o.train_batch_size, True,
                                  self.regression, seed=o.seed, trim=o.trim_batches,
                                  bucket=o.bucket_by_length and o.trim_batches)

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

  # --- eval and predict ---------------------------------------------------------------------
  def outputs(self, model, path, batch_size):
    """The model's outputs (logits, or predictions for regression) and the labels of every
    record of `path`, in order."""
    dataset = classification_dataset(path, self.options.max_seq_length, batch_size, False,
                                     self.regression, trim=self.options.trim_batches)

    # One trace for every batch length (the sequence axis is None in the spec when trimmed).
    @tf.function(input_signature=[dataset.element_spec])
    def step(batch):
      return model({n: batch[n] for n in INPUT_NAMES}, training=False)

    outputs, labels = [], []
    for batch in dataset:
      outputs.append(step(batch).numpy())
      labels.append(batch["label_ids"].numpy())
    return np.concatenate(outputs), np.concatenate(labels)

  def evaluate(self, model, strategy):
    del strategy  # the dev set is scored on the host
    _, path = self.records("dev")
    outputs, labels = self.outputs(model, path, self.options.eval_batch_size)
    loss = float(np.mean(self._loss(tf.constant(outputs), tf.constant(labels)).numpy()))
    if not (math.isfinite(loss) and np.isfinite(outputs).all()):
      raise recovery.NonfiniteOutputs(loss)
    results = {"loss": loss}
    results.update(compute_metrics(self.processor, outputs, labels))
    return results

  def majority_baseline(self):
    if self.regression or not getattr(self.options, "do_eval", False):
      return None
    labels = [e.label for e in self.examples("dev")]
    return majority_share(labels), len(labels)

  def predict(self, model, step):
    """GLUE's `<TASK>.tsv` or, for a Chinese task, CLUE's `<task>_predict.json`: one line per
    test row, in order."""
    del step
    o = self.options
    examples, path = self.records("test")
    outputs, _ = self.outputs(model, path, o.predict_batch_size)
    guids = [e.guid for e in examples]
    if self.processor.submission == "clue":  # Chinese tasks: CLUE's JSON-lines submission
      target = os.path.join(o.output_dir, f"{self.processor.name}_predict.json")
      write_clue_predictions(self.processor, outputs, target, ids=guids)
    else:
      target = os.path.join(o.output_dir, f"{self.processor.name.upper()}.tsv")
      write_glue_predictions(self.processor, outputs, target, guids=guids)
    logger.info("Wrote %d test predictions to %s", len(examples), target)
    return target

  def serving(self):
    """A raw-text serving SavedModel of the classifier; with --tflite_quantize also
    `classifier.tflite` in it (token ids -> logits, dynamic-range int8 weights)."""
    o = self.options
    return Serving("classifier", dict(self.vocabulary(), labels=self.labels,
                                      max_seq_length=o.max_seq_length,
                                      tflite_quantize=o.tflite_quantize))
