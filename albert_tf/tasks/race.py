"""RACE (or users' multiple choice), as the original: the task of run_race.py.

After every checkpoint (--do_eval) the dev split is scored and the best checkpoint by accuracy
kept in `output_dir/best`. `eval_results.txt` has accuracy overall and per level (`accuracy_middle`,
`accuracy_high`); `--do_predict` writes `test_predictions.jsonl` (and `test_results.txt` when
the test files carry answers); `--export_dir` a SavedModel answering raw text.
"""

import dataclasses
import json
import logging
import os

import numpy as np
import tensorflow as tf

from albert_tf import files
from albert_tf.data import race as race_data
from albert_tf.data.feature_cache import cache_key, reuse_or_build
from albert_tf.jobs.option_fields import option, sequence_length, trim_batches
from albert_tf.metrics.results import write_results
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks.finetuning import FineTuningOptions, FineTuningTask, check_cache_writable
from albert_tf.training import recovery
from albert_tf.training.options import check_options
from albert_tf.training.task import Serving

logger = logging.getLogger(__name__)

ANSWER_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclasses.dataclass
class RaceOptions(FineTuningOptions):
  """run_race.py's flags: the original's names and defaults (and the core's)."""
  task_name: str = option("race", "race, or csv for your own multiple choice.")
  data_dir: str = option(None, "Folder with RACE/{train,dev,test}/{middle,high} (or the csv "
                         "task's train/dev/test files).")
  dropout_prob: float = option(0.1, "Dropout on the pooled output.", bound="in [0, 1)")
  max_seq_length: int = sequence_length(512, "Pieces per choice, all included.", at_least=4)
  trim_batches: bool = trim_batches()
  max_qa_length: int = option(128, "Question + option pieces kept (their last ones).",
                              bound=">= 1")
  high_only: bool = option(False, "Only the high-school questions.")
  middle_only: bool = option(False, "Only the middle-school questions.")
  do_train: bool = True
  do_eval: bool = option(True, "Evaluate on dev after each checkpoint; keep the best.")
  do_predict: bool = option(False, "Write test_predictions.jsonl (and test_results.txt when "
                            "the test files have answers).")
  train_batch_size: int = 32
  eval_batch_size: int = option(8, "Eval batch.", bound=">= 1")
  learning_rate: float = 1e-5
  train_step: int = option(12000, "Training steps.", bound=">= 1")
  warmup_step: int = option(1000, "Warm-up steps.", bound=">= 0")
  save_checkpoints_steps: int = 100
  train_file: str = option(None, "Cache of the training features (TFRecord; built if missing "
                           "or stale; default output_dir/<task>_train_<seq>.tf_record).")
  eval_file: str = option(None, "Cache of the dev features.")
  predict_file: str = option(None, "Cache of the test features.")
  cached_dir: str = option(None, "Where feature caches go by default (else output_dir).")
  export_dir: str = option(None, "Write an (article, question, options) -> answer serving "
                           "SavedModel here at the end.")
  # task_name=csv: users' own multiple choice
  context_column: str = option(None, "csv task: column of the passage.")
  question_column: str = option(None, "csv task: column of the question.")
  option_columns: tuple = option((), "csv task: the option columns, in choice order.")
  label_column: str = option(
      "label", "csv task: the answer, an option's index (0-based) or its text.")


class RaceTask(FineTuningTask):
  """Multiple choice: RACE's folders, or users' CSV/TSV with a column per option."""

  best_metric = "accuracy"

  def __init__(self, options):
    o = options
    check_options(o)
    if o.max_qa_length > o.max_seq_length - 3:
      # [CLS] article [SEP] qa [SEP]: a longer question and option would overflow the record.
      raise ValueError(f"--max_qa_length={o.max_qa_length} does not fit --max_seq_length="
                       f"{o.max_seq_length}: it must be at most max_seq_length - 3 = "
                       f"{o.max_seq_length - 3}")
    self.task_name = o.task_name.lower()
    if self.task_name not in ("race", "csv"):
      raise ValueError(f"--task_name={o.task_name}: run_race.py knows race and csv")
    if self.task_name == "csv" and not (o.context_column and o.question_column and
                                   len(o.option_columns) >= 2):
      raise ValueError("--task_name=csv needs --context_column, --question_column and two or "
                       "more --option_columns")
    self.num_choices = (len(o.option_columns) if self.task_name == "csv"
                        else race_data.RACE_CHOICES)
    if o.do_eval:
      check_cache_writable("--eval_file", o.eval_file)
    if o.do_predict:
      check_cache_writable("--predict_file", o.predict_file)
    super().__init__(options, o.train_step, o.warmup_step)

  def build_model(self):
    return AlbertMultipleChoice(self.config, self.options.dropout_prob).build_for(
        self.num_choices)

  def model_flags(self):
    return {"task_name": self.task_name, "num_choices": self.num_choices}

  def per_example_loss(self, model, batch):
    logits = model({n: batch[n] for n in INPUT_NAMES}, training=True)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["label_ids"],
                                                          logits=logits)

  # --- data ---------------------------------------------------------------------------------
  def read_examples(self, split):
    o = self.options
    if self.task_name == "race":
      examples = race_data.read_race_examples(o.data_dir, split, self.tokenizer, o.high_only,
                                              o.middle_only)
    else:
      path = _csv_file(o.data_dir, split)
      examples = race_data.read_csv_examples(path, o.context_column, o.question_column,
                                             o.option_columns, o.label_column, self.tokenizer)
    if not examples:
      raise ValueError(f"the {split} split in {o.data_dir} has no questions")
    unlabelled = [e for e in examples if e.label is None]
    if split == "train" and unlabelled:
      raise ValueError(f"{len(unlabelled)} training question(s) in {o.data_dir} have no answer "
                       f"(first: {unlabelled[0].example_id}, question "
                       f"{unlabelled[0].question_index}): every training question needs one")
    return examples

  def records(self, split):
    """The split's examples and their cached TFRecord (rebuilt when data or flags change)."""
    o = self.options
    examples = self.examples(split)
    folder = o.cached_dir or o.output_dir
    path = {"train": o.train_file, "dev": o.eval_file, "test": o.predict_file}[split] or \
        os.path.join(folder, f"{self.task_name}_{split}_{o.max_seq_length}.tf_record")
    tf.io.gfile.makedirs(os.path.dirname(path) or ".")
    key = cache_key([o.spm_model_file or o.vocab_file],
                    [o.do_lower_case, o.max_seq_length, o.max_qa_length],
                    (dataclasses.astuple(e) for e in examples))
    reuse_or_build(path, key, lambda: race_data.write_tfrecord(
        examples, self.tokenizer, o.max_seq_length, o.max_qa_length, path))
    return examples, path

  def _dataset(self, path, batch_size, is_training):
    o = self.options
    return race_data.multiple_choice_dataset(path, self.num_choices, o.max_seq_length,
                                             batch_size, is_training, seed=o.seed,
                                             trim=o.trim_batches)

  # --- train, eval, predict -----------------------------------------------------------------
  def train_dataset(self):
    o = self.options
    examples, path = self.records("train")
    logger.info("Training: %d questions, %d steps of %d", len(examples),
                self.schedule().train_steps, o.train_batch_size)
    return self._dataset(path, o.train_batch_size, True)

  def probabilities(self, model, path, batch_size):
    """Softmax over the choices of every record of `path`, [questions, choices], in order."""

    dataset = self._dataset(path, batch_size, False)

    # One trace for every batch length (the sequence axis is None in the spec when trimmed).
    @tf.function(input_signature=[dataset.element_spec])
    def step(batch):
      return tf.nn.softmax(model({n: batch[n] for n in INPUT_NAMES}, training=False))

    rows = [step(batch).numpy() for batch in dataset]
    return np.concatenate(rows)

  def score(self, examples, probabilities):
    """accuracy overall and per level (RACE's middle and high); loss on the labelled ones."""
    labels = np.array([-1 if e.label is None else e.label for e in examples])
    known = labels >= 0
    if not known.any():
      return None
    correct = probabilities.argmax(-1) == labels
    chosen = probabilities[np.arange(len(labels)), np.maximum(labels, 0)]
    results = {"accuracy": float(correct[known].mean()),
               "loss": float(-np.log(np.maximum(chosen[known], 1e-30)).mean()),
               "questions": int(known.sum())}
    levels = np.array([e.level for e in examples])
    for level in race_data.LEVELS:
      mask = known & (levels == level)
      if mask.any():
        results[f"accuracy_{level}"] = float(correct[mask].mean())
    return results

  def evaluate(self, model, strategy):
    del strategy  # the dev set is scored on the host
    o = self.options
    examples, path = self.records("dev")
    probabilities = self.probabilities(model, path, o.eval_batch_size)
    results = self.score(examples, probabilities)
    if results is None:
      raise ValueError(f"the dev split in {o.data_dir} has no answers to score")
    if not (np.isfinite(results["loss"]) and np.isfinite(probabilities).all()):
      raise recovery.NonfiniteOutputs(results["loss"])
    return results

  def predict(self, model, step):
    """test_predictions.jsonl (id, question_index, answer, probabilities) and, when the test
    files carry answers, test_results.txt."""
    o = self.options
    examples, path = self.records("test")
    probabilities = self.probabilities(model, path, o.predict_batch_size)
    lines = [json.dumps({"id": e.example_id, "question_index": e.question_index,
                         "answer": ANSWER_LETTERS[int(p.argmax())],
                         "probabilities": [round(float(x), 6) for x in p]})
             for e, p in zip(examples, probabilities)]
    target = os.path.join(o.output_dir, "test_predictions.jsonl")
    files.write_text(target, "\n".join(lines) + "\n")
    logger.info("Wrote %d test predictions to %s", len(lines), target)
    results = self.score(examples, probabilities)
    if results is not None:
      write_results(os.path.join(o.output_dir, "test_results.txt"),
                    dict(results, global_step=step))
      logger.info("Test accuracy %.4f over %d answered questions", results["accuracy"],
                  results["questions"])
    return probabilities

  def serving(self):
    """A SavedModel answering raw text: (article, question, options) -> the answer."""
    o = self.options
    return Serving("multiple_choice", dict(
        self.vocabulary(), num_choices=self.num_choices, max_seq_length=o.max_seq_length,
        max_qa_length=o.max_qa_length))


def _csv_file(data_dir, split):
  for extension in ("csv", "tsv"):
    path = os.path.join(data_dir, f"{split}.{extension}")
    if os.path.exists(path):
      return path
  raise FileNotFoundError(f"no {split}.csv or {split}.tsv in {data_dir}")
