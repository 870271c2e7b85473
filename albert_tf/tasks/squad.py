"""Fine-tuning and prediction on SQuAD v1.1 / v2.0: the task of run_squad.py.

Features are cached as TFRecords beside the outputs (rebuilt when the data, tokenizer or
window flags change); the training loop trains with the original's losses; prediction writes
`predictions.json`, `nbest_predictions.json` (and `null_odds.json` for v2) and, when the
predict file has answers, the official EM / F1 in `eval_results.txt` over the questions that have them, plus v2's unanswerable ones (v2: after
the original's search for the best null-score threshold, which then decides the written
predictions). Chinese data (CMRC 2018, DRCD) runs with a WordPiece `vocab_file` (albert_zh)
and is scored by the CMRC 2018 metric (`EM`, `F1`, `AVERAGE`; `eval_metric`).
"""

import dataclasses
import logging
import os
import time

import tensorflow as tf

from albert_tf.data import squad as squad_data
from albert_tf.data import squad_predictions
from albert_tf.data.feature_cache import cache_key, reuse_or_build
from albert_tf.jobs.option_fields import option, sequence_length, trim_batches
from albert_tf.metrics import cmrc2018
from albert_tf.metrics import squad as squad_metrics
from albert_tf.metrics.results import write_results, write_summaries
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.tasks.finetuning import FineTuningOptions, FineTuningTask, check_cache_writable
from albert_tf.training.options import check_options
from albert_tf.training.task import Serving

logger = logging.getLogger(__name__)


EVAL_METRICS = ("squad", "cmrc2018", "auto")


@dataclasses.dataclass
class SquadOptions(FineTuningOptions):
  """run_squad.py's flags (the original's names and defaults)."""
  train_file: str = option(None, "SQuAD JSON for training, e.g. train-v1.1.json.")
  predict_file: str = option(None, "SQuAD JSON to predict, e.g. dev-v1.1.json.")
  max_seq_length: int = sequence_length(384, "Pieces per window, all included.", at_least=5)
  doc_stride: int = option(128, "Pieces between window starts.", bound=">= 1")
  max_query_length: int = option(64, "Questions are cut to this.", bound=">= 1")
  do_train: bool = option(False, "Train on --train_file.")
  do_predict: bool = option(False, "Predict --predict_file (and score it if it has answers).")
  num_train_epochs: float = option(
      3.0, "Epochs; steps = questions / train_batch_size * epochs, as the original.",
      bound="> 0")
  warmup_proportion: float = option(0.1, "Share of steps warming up.", bound="in [0, 1)")
  n_best_size: int = option(20, "Answers kept per question (n-best list).", bound=">= 1")
  max_answer_length: int = option(30, "Longest answer, in pieces.", bound=">= 1")
  version_2_with_negative: bool = option(False, "SQuAD v2.0: unanswerable questions.")
  start_n_top: int = option(5, "v2: beam of starts.", bound=">= 1")
  end_n_top: int = option(5, "v2: ends kept per start.", bound=">= 1")
  dropout_prob: float = option(0.1, "v2: dropout of the answer-class layer.",
                               bound="in [0, 1)")
  null_score_diff_threshold: float = option(
      None, "v2: empty answer when the null score is at least this (default: the best "
      "threshold on --predict_file's answers, as the original).")
  train_feature_file: str = option(
      None, "Cache of training features (default output_dir/train_features.tf_record).")
  predict_feature_file: str = option(
      None, "Cache of predict features (default output_dir/predict_features.tf_record).")
  export_dir: str = option(
      None, "Write a (question, context) -> answer serving SavedModel here at the end.")
  layerwise_lr_decay: float = option(None, "Layer-wise learning-rate decay (adamw).",
                                     bound="> 0")
  eval_metric: str = option(
      "auto", "Metric of --do_predict: the official SQuAD EM/F1, or CMRC 2018's EM/F1/AVERAGE "
      "over mixed Chinese/English segments; auto: cmrc2018 with --vocab_file on mostly "
      "Chinese contexts (v1), else squad.", choices=EVAL_METRICS)
  trim_batches: bool = trim_batches(
      " SQuAD v2.0 only: v1.1 stays at max_seq_length, since the original's v1.1 loss and "
      "n-best candidates range over every position, padding included.")


class SquadTask(FineTuningTask):
  """Extractive question answering on SQuAD (or CMRC 2018 / DRCD) JSON."""

  def __init__(self, options):
    o = options
    check_options(o)
    if not (o.spm_model_file or o.vocab_file):
      raise ValueError("run_squad needs --spm_model_file (SentencePiece, ALBERT's English "
                       "models) or --vocab_file (WordPiece, e.g. albert_zh)")
    if o.eval_metric not in EVAL_METRICS:
      raise ValueError(f"--eval_metric={o.eval_metric} is not one of {', '.join(EVAL_METRICS)}")
    if o.eval_metric == "cmrc2018" and o.version_2_with_negative:
      raise ValueError("--eval_metric=cmrc2018 scores answerable questions only; it does not "
                       "go with --version_2_with_negative")
    if o.do_train and not o.train_file:
      raise ValueError("--do_train needs --train_file")
    if o.do_predict and not o.predict_file:
      raise ValueError("--do_predict needs --predict_file")
    # Read first, so a predict file that cannot be predicted (duplicate ids, bad answers) is
    # refused before any training.
    self.predict_examples = (squad_data.read_squad_examples(
        o.predict_file, False, o.version_2_with_negative) if o.do_predict else None)
    self.train_examples = None
    train_steps = warmup_steps = 0
    if o.do_train:
      self.train_examples = squad_data.read_squad_examples(o.train_file, True,
                                                           o.version_2_with_negative)
      train_steps = int(len(self.train_examples) / o.train_batch_size * o.num_train_epochs)
      if train_steps < 1:
        raise ValueError(f"{len(self.train_examples)} training questions at "
                         f"--train_batch_size={o.train_batch_size} and --num_train_epochs="
                         f"{o.num_train_epochs} make no training step")
      warmup_steps = int(train_steps * o.warmup_proportion)
    if o.do_predict:
      check_cache_writable("--predict_feature_file", o.predict_feature_file)
    if o.trim_batches and not o.version_2_with_negative and (o.do_train or o.do_predict):
      logger.info("SQuAD v1.1 is computed at --max_seq_length=%d: the original's v1.1 loss and "
                  "n-best candidates range over padding too, so trimming would change them",
                  o.max_seq_length)
    super().__init__(options, train_steps, warmup_steps)

  @property
  def trim(self):
    """Whether batches are cut to their longest window: v2.0 only, where padding is masked
    (p_mask) out of every softmax and candidate, so the results are the fixed-length run's."""
    return bool(self.options.trim_batches and self.options.version_2_with_negative)

  def read_examples(self, split):  # both read above, before the tokenizer exists
    return {"train": self.train_examples, "test": self.predict_examples}[split]

  def build_model(self):
    o = self.options
    return AlbertSquad(self.config, version_2=o.version_2_with_negative,
                       start_n_top=o.start_n_top, end_n_top=o.end_n_top,
                       dropout_rate=o.dropout_prob)

  def model_flags(self):
    return {"version_2_with_negative": bool(self.options.version_2_with_negative)}

  # --- features -----------------------------------------------------------------------------
  def _feature_file(self, examples, input_file, is_training):
    """The cached TFRecord of `examples`' features, built when missing or stale."""
    o = self.options
    path = (o.train_feature_file if is_training else o.predict_feature_file) or os.path.join(
        o.output_dir, "train_features.tf_record" if is_training
        else "predict_features.tf_record")
    key = cache_key([input_file, o.spm_model_file or o.vocab_file],
                    [o.do_lower_case, o.max_seq_length, o.doc_stride, o.max_query_length,
                     is_training])

    def build():
      start = time.time()
      features = squad_data.convert_examples_to_features(
          examples, self.tokenizer, o.max_seq_length, o.doc_stride, o.max_query_length,
          is_training)
      if not features:
        raise ValueError(f"{input_file} gives no features (every context is empty)")
      count = squad_data.write_squad_tfrecord(features, path)
      logger.info("%d features of %d questions in %.1fs", count, len(examples),
                  time.time() - start)
      return {"num_features": count, "num_examples": len(examples), "source": input_file}
    return path, reuse_or_build(path, key, build)["num_features"]

  # --- train --------------------------------------------------------------------------------
  def per_example_loss(self, model, batch):
    inputs = {n: batch[n] for n in INPUT_NAMES}
    if not self.options.version_2_with_negative:
      out = model(inputs, training=True)

      def cross_entropy(logits, positions):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=positions, logits=logits)
      return (cross_entropy(out["start_logits"], batch["start_positions"])
              + cross_entropy(out["end_logits"], batch["end_positions"])) / 2.0
    inputs.update(p_mask=batch["p_mask"], start_positions=batch["start_positions"])
    out = model(inputs, training=True)

    def nll(log_probs, positions):  # log_probs [batch, seq]; seq trimmed or max_seq_length
      return -tf.reduce_sum(tf.one_hot(positions, tf.shape(log_probs)[-1]) * log_probs, -1)
    span = (nll(out["start_log_probs"], batch["start_positions"])
            + nll(out["end_log_probs"], batch["end_positions"])) * 0.5
    answer_class = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(batch["is_impossible"], tf.float32), logits=out["cls_logits"])
    return span + 0.5 * answer_class  # the original weighs the answer-class loss by 0.5

  def train_dataset(self):
    o = self.options
    path, count = self._feature_file(self.train_examples, o.train_file, True)
    logger.info("Training: %d questions, %d features, %d steps of %d", len(self.train_examples),
                count, self.schedule().train_steps, o.train_batch_size)
    return squad_data.squad_dataset(path, o.max_seq_length, o.train_batch_size, True,
                                    seed=o.seed, trim=self.trim)

  # --- predict ------------------------------------------------------------------------------
  def _raw_results(self, model, path, num_features):
    """unique_id -> the model's outputs (NumPy) for every feature of `path`."""
    o = self.options
    dataset = squad_data.squad_dataset(path, o.max_seq_length, o.predict_batch_size, False,
                                       trim=self.trim)

    # One trace for every batch length (the sequence axis is None in the spec when trimmed).
    @tf.function(input_signature=[dataset.element_spec])
    def step(batch):
      inputs = {n: batch[n] for n in INPUT_NAMES}
      if o.version_2_with_negative:
        inputs["p_mask"] = batch["p_mask"]
      return model(inputs, training=False)

    results, done, start, last_log = {}, 0, time.time(), time.time()
    for batch in dataset:
      outputs = {k: v.numpy() for k, v in step(batch).items()}
      for i, unique_id in enumerate(batch["unique_ids"].numpy()):
        row = {k: v[i] for k, v in outputs.items()}
        results[int(unique_id)] = (row if o.version_2_with_negative
                                   else (row["start_logits"], row["end_logits"]))
      done += len(batch["unique_ids"])
      if time.time() - last_log >= o.log_every_seconds:
        last_log = time.time()
        rate = done / (last_log - start)
        logger.info("predicted %d/%d features  %.1f features/s  ETA %.0fs", done, num_features,
                    rate, (num_features - done) / max(rate, 1e-9))
    return results

  def eval_metric(self, examples):
    """`--eval_metric`, with `auto` resolved: cmrc2018 for a WordPiece tokenizer over mostly
    Chinese contexts (v1 only), else squad."""
    o = self.options
    if o.eval_metric != "auto":
      return o.eval_metric
    if (not self.tokenizer.is_spm and not o.version_2_with_negative
        and cmrc2018.is_mostly_cjk({e.paragraph_text for e in examples})):
      return "cmrc2018"
    return "squad"

  def predict(self, model, step):
    """Writes the prediction files, then, when questions have answers, scores those in
    eval_results.txt (and the eval summaries); returns the metrics or None."""
    o = self.options
    examples = self.predict_examples or squad_data.read_squad_examples(
        o.predict_file, False, o.version_2_with_negative)
    path, count = self._feature_file(examples, o.predict_file, False)
    features = squad_data.read_squad_features(path)
    results = self._raw_results(model, path, count)
    scored, unanswered = squad_metrics.scored_questions(
        squad_data.load_squad_json(o.predict_file), o.version_2_with_negative)
    written = {"predictions": os.path.join(o.output_dir, "predictions.json"),
             "nbest": os.path.join(o.output_dir, "nbest_predictions.json")}
    null_odds = None
    if not o.version_2_with_negative:
      predictions, nbest = squad_predictions.postprocess_v1(examples, features, results,
                                                            o.n_best_size, o.max_answer_length)
    else:
      threshold = o.null_score_diff_threshold
      if threshold is None and scored:
        # The original's two passes: find the best threshold on these answers, then use it.
        raw, _, raw_null_odds = squad_predictions.postprocess_v2(
            examples, features, results, o.n_best_size, o.max_answer_length)
        threshold = squad_metrics.evaluate(scored, raw, raw_null_odds)["best_f1_thresh"]
      predictions, nbest, null_odds = squad_predictions.postprocess_v2(
          examples, features, results, o.n_best_size, o.max_answer_length, threshold)
      written["null_odds"] = os.path.join(o.output_dir, "null_odds.json")
      squad_predictions.write_json(written["null_odds"], null_odds)
      self.null_score_diff_threshold = threshold
    # Written before scoring, so a scoring failure cannot lose a long prediction run.
    squad_predictions.write_json(written["predictions"], predictions)
    squad_predictions.write_json(written["nbest"], nbest)
    logger.info("Wrote %s", ", ".join(written.values()))
    if not scored:
      logger.info("%s has no answers to score: wrote the predictions, no eval_results.txt",
                  o.predict_file)
      return None
    if unanswered:
      logger.warning("%s: %d of %d questions have no answers%s; scoring the others: %s",
                     o.predict_file, len(unanswered), len(examples),
                     " and are not is_impossible" if o.version_2_with_negative else "",
                     squad_data.listed_ids(unanswered))
    metric = self.eval_metric(examples)
    if metric == "cmrc2018":
      metrics = cmrc2018.evaluate(scored, predictions)
      main = ("EM", "F1", "AVERAGE")
    else:
      metrics = squad_metrics.evaluate(scored, predictions, null_odds)
      main = ("exact_match", "f1") if "exact_match" in metrics else ("exact", "f1")
    if o.version_2_with_negative:
      metrics["null_score_diff_threshold"] = threshold
    if unanswered:
      metrics["skipped_unanswered"] = len(unanswered)
    metrics = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    metrics["global_step"] = step
    write_results(os.path.join(o.output_dir, "eval_results.txt"), metrics)
    write_summaries(os.path.join(o.output_dir, "eval"), metrics, step)
    logger.info("Eval (%s metric) at step %d: %s", metric, step,
                ", ".join(f"{k} = {metrics[k]:.2f}" for k in main))
    return metrics

  null_score_diff_threshold = None  # v2: the threshold of the last prediction

  def serving(self):
    """A (question, context) -> answer serving SavedModel; v2's null-score threshold is
    --null_score_diff_threshold, else the one the last prediction found."""
    o = self.options
    threshold = o.null_score_diff_threshold
    if threshold is None:
      threshold = self.null_score_diff_threshold
    return Serving("squad", dict(
        self.vocabulary(), max_seq_length=o.max_seq_length, doc_stride=o.doc_stride,
        max_query_length=o.max_query_length, n_best_size=o.n_best_size,
        max_answer_length=o.max_answer_length, null_score_diff_threshold=threshold))
