"""Fine-tuning batches computed at their longest real row (`--trim_batches`, the default): the
same examples in the same order, less padding, and the fixed-length run's losses and metrics to
float32 rounding."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.batch_length import trim_batch, trimmed_length
from albert_tf.data.classification.features import SEQUENCE_FEATURES, classification_dataset
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.tasks.race import RaceOptions, RaceTask
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, float32_atol

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
SST2 = SHARED_DATA / "glue" / "SST-2"


def test_a_batch_is_cut_to_its_longest_row_rounded_up_to_the_multiple():
  mask = tf.constant([[1] * 5 + [0] * 27, [1] * 18 + [0] * 14])
  batch = {"input_mask": mask, "input_word_ids": mask * 7, "label_ids": tf.constant([0, 1])}
  trimmed = trim_batch(batch, ("input_mask", "input_word_ids"), 32, multiple=8)
  assert trimmed["input_mask"].shape == [2, 24]  # 18 real pieces -> 24
  np.testing.assert_array_equal(trimmed["input_word_ids"], batch["input_word_ids"][:, :24])
  np.testing.assert_array_equal(trimmed["label_ids"], [0, 1])  # not a sequence: as it was
  # Never past max_seq_length, never empty; RACE's [batch, choices, seq] by its longest choice.
  assert int(trimmed_length(tf.ones([2, 30], tf.int32), 30, multiple=16)) == 30
  assert int(trimmed_length(tf.zeros([2, 30], tf.int32), 30, multiple=16)) == 16
  assert int(trimmed_length(tf.constant([[[1, 1, 0, 0], [1, 1, 1, 0]]]), 4, multiple=1)) == 3


def _options(out, cache, trim, config):
  return ClassifierOptions(
      task_name="sst-2", data_dir=str(SST2), output_dir=str(out), albert_config_file=str(config),
      spm_model_file=str(SPM), max_seq_length=64, do_train=True, do_eval=True,
      train_batch_size=8, eval_batch_size=64, train_step=6, save_checkpoints_steps=6,
      iterations_per_loop=1, learning_rate=1e-3, cached_dir=str(cache), seed=1,
      log_every_seconds=0, trim_batches=trim)


@pytest.fixture(scope="module")
def no_encoder_dropout(tmp_path_factory):
  """configs/tiny.json with the encoder's dropout at 0, as in the v2 configs: the classifier's
  own dropout (on the pooled output, whose shape trimming keeps) stays 0.1."""
  config = json.loads((ROOT / "configs" / "tiny.json").read_text())
  config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  path = tmp_path_factory.mktemp("config") / "tiny_no_dropout.json"
  path.write_text(json.dumps(config))
  return path


def test_trimmed_sst2_training_and_evaluation_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  cache = tmp_path / "features"
  results = {}
  for trim in (False, True):
    history = []
    task = ClassificationTask(_options(tmp_path / f"trim-{trim}", cache, trim,
                                       no_encoder_dropout))
    _, evaluated, _ = Run(task).run_phases(history)
    results[trim] = [h["loss"] for h in history], evaluated
  # The trimmed run really computed shorter batches.
  _, dev = task.records("dev")
  lengths = {int(b["input_mask"].shape[1])
             for b in classification_dataset(dev, 64, 64, False, False, trim=True)}
  assert min(lengths) < 64, lengths
  (fixed_losses, fixed_eval), (trimmed_losses, trimmed_eval) = results[False], results[True]
  assert len(fixed_losses) == 6
  # Each loss sums over up to 64 positions in attention, per layer and step.
  np.testing.assert_allclose(trimmed_losses, fixed_losses,
                             atol=float32_atol(fixed_losses, 64 * 2 * 6))
  assert trimmed_eval["accuracy"] == fixed_eval["accuracy"]
  np.testing.assert_allclose(trimmed_eval["loss"], fixed_eval["loss"],
                             atol=float32_atol(fixed_eval["loss"], 64 * 2 * 6))


def test_trimmed_multiple_choice_training_and_evaluation_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  colours = ["red", "blue", "green", "black"]
  rows = ["passage,question,a,b,c,d,answer"] + [
      f"The {'old ' * (i % 5)}car is {colours[i % 4]}.,What colour is the car?,"
      f"{','.join(colours)},{i % 4}" for i in range(16)]
  for split in ("train", "dev"):
    (tmp_path / f"{split}.csv").write_text("\n".join(rows) + "\n")
  results = {}
  for trim in (False, True):
    options = RaceOptions(
        task_name="csv", data_dir=str(tmp_path), output_dir=str(tmp_path / f"trim-{trim}"),
        context_column="passage", question_column="question", label_column="answer",
        option_columns=("a", "b", "c", "d"), albert_config_file=str(no_encoder_dropout),
        spm_model_file=str(SPM), max_seq_length=48, max_qa_length=16, train_batch_size=4,
        eval_batch_size=8, learning_rate=1e-3, train_step=4, warmup_step=0,
        save_checkpoints_steps=4, iterations_per_loop=1, seed=1, log_every_seconds=0,
        cached_dir=str(tmp_path / "features"), trim_batches=trim)
    history, task = [], RaceTask(options)
    _, evaluated, _ = Run(task).run_phases(history)
    results[trim] = [h["loss"] for h in history], evaluated
  _, dev = task.records("dev")
  lengths = {int(b["input_mask"].shape[-1]) for b in task._dataset(dev, 8, False)}
  assert max(lengths) < 48, lengths  # the trimmed run really computed shorter batches
  (fixed_losses, fixed_eval), (trimmed_losses, trimmed_eval) = results[False], results[True]
  assert len(fixed_losses) == 4
  # Each loss sums over up to 48 positions in attention, per layer and step.
  np.testing.assert_allclose(trimmed_losses, fixed_losses,
                             atol=float32_atol(fixed_losses, 48 * 2 * 4))
  assert trimmed_eval["accuracy"] == fixed_eval["accuracy"]
  np.testing.assert_allclose(trimmed_eval["loss"], fixed_eval["loss"],
                             atol=float32_atol(fixed_eval["loss"], 48 * 2 * 4))


def test_trimmed_batches_under_xla_accumulation_and_loops_of_steps_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  """XLA compiles one program per length (a multiple of 16: few), the loop of 3 steps traces
  once, and micro-batches are cut from the trimmed batch. The head's dropout is off: under XLA
  its draws differ between compiled programs, a different draw of the same dropout."""
  losses = {}
  for trim in (False, True):
    options = _options(tmp_path / f"trim-{trim}", tmp_path / "features", trim,
                       no_encoder_dropout)
    options.do_eval, options.jit_compile, options.gradient_accumulation_steps = False, True, 2
    options.iterations_per_loop = 3
    run, history = Run(ClassificationTask(options)), []
    run.loop.model.head.dropout.rate = 0.0
    run.run_phases(history)
    losses[trim] = [h["loss"] for h in history]
  assert len(losses[False]) == 2  # two loops of 3 steps: each loop's mean loss
  np.testing.assert_allclose(losses[True], losses[False],
                             atol=float32_atol(losses[False], 64 * 2 * 6))
