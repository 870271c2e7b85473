"""Pretraining (MLM + SOP): the task of run_pretraining.py.

The loss is normalised over the whole global batch (MLM by the sum of its weights + 1e-5, SOP
by the number of examples), so any split across replicas and micro-batches computes exactly
the original's single-device loss.
"""

import dataclasses
import logging
import math

import tensorflow as tf
import tf_keras

from albert_tf import files
from albert_tf.config import AlbertConfig
from albert_tf.data.pretraining.dataset import (check_pretraining_files, count_instances,
                                                expand_file_patterns, masking_from_metadata,
                                                pretraining_dataset)
from albert_tf.data.pretraining.records import feature_spec
from albert_tf.interop.checkpoints import load_checkpoint
from albert_tf.jobs.option_fields import option, sequence_length
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.training import recovery
from albert_tf.training.options import TrainingOptions, check_options, check_sequence_length
from albert_tf.training.task import Schedule, Task

logger = logging.getLogger(__name__)

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
EVAL_KEYS = ("loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy",
             "sentence_order_loss")


@dataclasses.dataclass
class PretrainingOptions(TrainingOptions):
  """run_pretraining.py's flags, the original's names and defaults (the core's shared ones
  with pretraining's defaults)."""
  input_file: str = option(None, "Pretraining TFRecords: comma list and/or globs.")
  init_checkpoint: str = option(
      None, "Initial weights: an albert-tf checkpoint or an original TF1 one.")
  max_seq_length: int = sequence_length(512, "Sequence length of the data.", at_least=5)
  max_predictions_per_seq: int = option(
      20, "Masked LM predictions per sequence in the data.", bound=">= 1")
  do_train: bool = option(False, "Train.")
  do_eval: bool = option(False, "Evaluate (writes eval_results.txt).")
  train_batch_size: int = 4096
  eval_batch_size: int = option(64, "Global eval batch.", bound=">= 1")
  optimizer: str = "lamb"
  learning_rate: float = 0.00176
  poly_power: float = option(1.0, "Power of the polynomial decay.", bound="> 0")
  num_train_steps: int = option(125000, "Training steps.", bound=">= 1")
  num_warmup_steps: int = option(3125, "Warm-up steps.", bound=">= 0")
  start_warmup_step: int = option(0, "Step where warm-up starts.", bound=">= 0")
  save_checkpoints_steps: int = 5000
  max_eval_steps: int = option(100, "Eval batches.", bound=">= 1")
  init_from_group0: bool = option(False,
                                  "Initialise every group from group 0 of --init_checkpoint.")
  # Ours: RoBERTa-style masks drawn anew each epoch in tf.data, on --no_masking records
  # (SPEC's n-gram rules; create_pretraining_data's masking flags and defaults).
  dynamic_masking: bool = option(
      False, "Mask anew each time a record is read (RoBERTa-style), in tf.data, with SPEC's "
      "n-gram rules; needs data made with create_pretraining_data --no_masking.")
  masked_lm_prob: float = option(0.15, "With --dynamic_masking: masked LM probability.")
  ngram: int = option(3, "With --dynamic_masking: longest n-gram (in words).")
  favor_shorter_ngram: bool = option(
      True, "With --dynamic_masking: P(n) proportional to 1/n (else reversed).")
  do_whole_word_mask: bool = option(True, "With --dynamic_masking: mask whole words.")
  # Ours: the sentence loss's weight; 0 = MLM only (paper Table 5's "None").
  sentence_loss_weight: float = option(
      1.0, "Weight of the sentence loss (SOP, or NSP on --random_next_sentence data); 0 trains "
      "the masked LM alone.", bound=">= 0")


def pretraining_losses(outputs, batch, mlm_denominator, global_batch_size,
                       sentence_loss_weight=1.0):
  """(loss share of this micro-batch, per-prediction CE, per-example SOP CE). The sentence
  loss (SOP, or NSP on `--random_next_sentence` data) counts `sentence_loss_weight` times:
  0 trains MLM alone (the paper's "None" row of Table 5)."""
  mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
  sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
  mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(batch["masked_lm_ids"], tf.int32), logits=mlm_logits)
  sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(batch["next_sentence_labels"][:, 0], tf.int32), logits=sop_logits)
  weights = tf.cast(batch["masked_lm_weights"], tf.float32)
  loss = tf.reduce_sum(weights * mlm_ce) / mlm_denominator
  if sentence_loss_weight:
    loss += (sentence_loss_weight * tf.reduce_sum(sop_ce)
             / tf.cast(global_batch_size, tf.float32))
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


class PretrainingTask(Task):
  """Masked LM + sentence order (or NSP) on the pretraining TFRecords; train and evaluate."""

  def __init__(self, options, strategy=None):
    check_options(options)
    self.options = o = options
    files.check_writable(o.output_dir)
    self.config_file = o.albert_config_file
    self.config = AlbertConfig.from_json_file(o.albert_config_file)
    check_sequence_length(o.max_seq_length, self.config)
    replicas = (strategy or tf.distribute.get_strategy()).num_replicas_in_sync
    if o.do_eval and o.eval_batch_size % replicas:
      raise ValueError(f"--eval_batch_size={o.eval_batch_size} is not divisible by "
                       f"{replicas} replicas")
    self.files = expand_file_patterns(o.input_file)
    check_pretraining_files(self.files, o.max_seq_length, o.max_predictions_per_seq,
                            self.config.vocab_size, dynamic_masking=o.dynamic_masking)
    self.masking = None
    if o.dynamic_masking:
      self.masking = masking_from_metadata(
          self.files, self.config.vocab_size, max_predictions_per_seq=o.max_predictions_per_seq,
          masked_lm_prob=o.masked_lm_prob, ngram=o.ngram,
          favor_shorter_ngram=o.favor_shorter_ngram, do_whole_word_mask=o.do_whole_word_mask)

  # --- the model ----------------------------------------------------------------------------
  def model_config(self):
    return self.config, self.config_file

  def build_model(self):
    return AlbertPretrainer(self.config)

  def initialize(self, model):
    if not self.options.init_checkpoint:
      return None
    report = load_checkpoint(model, self.options.init_checkpoint,
                             init_from_group0=self.options.init_from_group0)
    logger.info(report.summary())
    return report

  # --- training -----------------------------------------------------------------------------
  def schedule(self):
    o = self.options
    return Schedule(o.num_train_steps, o.num_warmup_steps, o.start_warmup_step, o.poly_power)

  def train_dataset(self):
    o = self.options
    instances = count_instances(self.files)
    if instances:
      logger.info("Training data: %d instances; %d steps of %d = %.2f epochs", instances,
                  o.num_train_steps, o.train_batch_size,
                  o.num_train_steps * o.train_batch_size / instances)
    return self._dataset(o.train_batch_size, True)

  def normalizers(self, batch):
    # The original's MLM loss is normalised by the global batch's prediction weights.
    return {"mlm": tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
            "examples": tf.cast(tf.shape(batch["input_word_ids"])[0], tf.float32)}

  def train_loss(self, model, batch, normalizers):
    outputs = model({n: batch[n] for n in MODEL_INPUTS}, training=True)
    loss, mlm_ce, sop_ce = pretraining_losses(outputs, batch, normalizers["mlm"] + 1e-5,
                                              normalizers["examples"],
                                              self.options.sentence_loss_weight)
    return loss, (outputs, mlm_ce, sop_ce)

  def build_metrics(self):
    return _TrainMetrics(PretrainingMetrics())

  def progress(self, results):
    return (f"mlm_acc {results['masked_lm_accuracy']:.3f}  "
            f"sop_acc {results['sentence_order_accuracy']:.3f}")

  def locate_bad_record(self, error):
    spec = feature_spec(self.options.max_seq_length, self.options.max_predictions_per_seq)
    return recovery.locate_bad_record(self.files,
                                      lambda batch: tf.io.parse_example(batch, spec), error)

  def _dataset(self, batch_size, is_training):
    """Global batches; a strategy splits them across replicas in order (replica r gets rows
    [r*b, (r+1)*b)), so any number of replicas sees the same global batch as one device."""
    o = self.options
    return pretraining_dataset(self.files, o.max_seq_length, o.max_predictions_per_seq,
                               batch_size, is_training, seed=o.seed, masking=self.masking)

  # --- evaluation ---------------------------------------------------------------------------
  def evaluate(self, model, strategy):
    """The original's metrics over max_eval_steps batches (or the whole eval data)."""
    o = self.options
    with strategy.scope():
      metrics = PretrainingMetrics()

    def replica_step(batch):
      ctx = tf.distribute.get_replica_context()
      weights = tf.cast(batch["masked_lm_weights"], tf.float32)
      denominator = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.reduce_sum(weights)) + 1e-5
      outputs = model({n: batch[n] for n in MODEL_INPUTS}, training=False)
      loss, mlm_ce, sop_ce = pretraining_losses(outputs, batch, denominator, o.eval_batch_size,
                                                o.sentence_loss_weight)
      metrics.update(outputs, batch, mlm_ce, sop_ce)
      metrics.loss.update_state(ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss))

    @tf.function
    def eval_step(iterator):
      strategy.run(replica_step, args=(next(iterator),))

    iterator = iter(strategy.experimental_distribute_dataset(
        self._dataset(o.eval_batch_size, False)))
    steps = 0
    while steps < o.max_eval_steps:
      try:
        eval_step(iterator)
      except (StopIteration, tf.errors.OutOfRangeError):
        break
      steps += 1
    if steps == 0:
      raise ValueError(f"no eval batch of {o.eval_batch_size}: the input has fewer records")
    results = metrics.result()
    if not all(math.isfinite(results[key]) for key in EVAL_KEYS):
      raise recovery.NonfiniteOutputs(results["loss"])
    logger.info("Evaluated %d batches of %d", steps, o.eval_batch_size)
    return results


class _TrainMetrics:
  """PretrainingMetrics fed by the loop's micro-batches (the loss is the loop's own)."""

  def __init__(self, metrics):
    self.metrics = metrics

  def update(self, batch, aux):
    outputs, mlm_ce, sop_ce = aux
    self.metrics.update(outputs, batch, mlm_ce, sop_ce)

  def result(self):
    results = self.metrics.result()
    del results["loss"]
    return results

  def reset(self):
    self.metrics.reset()
