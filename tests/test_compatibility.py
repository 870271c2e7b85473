"""What albert-tf wrote before the house was re-foldered (commit e45fe7a) still loads and serves:
a pretraining checkpoint resumes and evaluates as it did, a fine-tuning run's checkpoint
evaluates and predicts as it did, its serving export answers as it did, and a new export of
that checkpoint answers the same. tests/fixtures/e45fe7a/make_fixtures.py made the files with
the old code, and expected.json holds what the old code computed from them."""

import json
import shutil
import tarfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import  (the export's ops)

from albert_tf.export.tasks import export_task
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
from albert_tf.training.run import Run
from conftest import ROOT, float32_atol

FIXTURE = ROOT / "tests" / "fixtures" / "e45fe7a"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
CONFIG, VOCAB = str(FIXTURE / "albert_config.json"), str(FIXTURE / "vocab.txt")


def _copy(name, tmp_path):
  return str(shutil.copytree(FIXTURE / name, tmp_path / name))


def _classifier_options(output_dir, **changes):
  """The old run's flags (make_fixtures.py), without training."""
  return ClassifierOptions(
      task_name="csv", data_dir=str(FIXTURE / "csv"), output_dir=output_dir,
      albert_config_file=CONFIG, vocab_file=VOCAB, max_seq_length=32, train_batch_size=8,
      train_step=2, save_checkpoints_steps=2, iterations_per_loop=2, seed=1,
      log_every_seconds=0, csv_options=dict(text_a_column="text", label_column="label"),
      **changes)


def _served(export_dir):
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  return {k: v.numpy() for k, v in serve(text_a=tf.constant(EXPECTED["texts"])).items()}


def _assert_served_as_before(served):
  before = EXPECTED["served"]
  assert served["label_ids"].tolist() == before["label_ids"]
  assert [n.decode() for n in served["label_names"]] == before["label_names"]
  probabilities = np.array(before["probabilities"])
  # Each probability: a softmax of logits summed over the tiny model's 64-wide layers.
  np.testing.assert_allclose(served["probabilities"], probabilities,
                             atol=float32_atol(probabilities, terms=64), rtol=0)


def test_a_pretraining_checkpoint_of_e45fe7a_evaluates_as_it_did(tmp_path):
  output_dir = _copy("pretraining", tmp_path)
  run = Run(PretrainingTask(PretrainingOptions(
      albert_config_file=CONFIG, input_file=str(FIXTURE / "data" / "train-0.tfrecord"),
      output_dir=output_dir, do_eval=True, max_seq_length=32, max_predictions_per_seq=5,
      eval_batch_size=8, num_train_steps=2, max_eval_steps=4, log_every_seconds=0)))
  _, results, _ = run.run_phases()
  assert run.loop.restore_or_initialize().endswith("ckpt-2")
  before = EXPECTED["pretraining_eval"]
  assert results["global_step"] == before["global_step"] == 2
  for key in ("masked_lm_accuracy", "sentence_order_accuracy"):
    assert results[key] == before[key], key
  for key in ("loss", "masked_lm_loss", "sentence_order_loss"):
    # Means of cross-entropies over a 300-entry vocabulary's softmax.
    assert results[key] == pytest.approx(before[key], abs=float32_atol([before[key]], 300))


def test_a_fine_tuning_run_of_e45fe7a_evaluates_predicts_and_exports_as_it_did(tmp_path):
  output_dir = _copy("classifier", tmp_path)
  old_predictions = (FIXTURE / "classifier" / "CSV.tsv").read_text()
  (tmp_path / "classifier" / "CSV.tsv").unlink()
  export_dir = str(tmp_path / "new_export")
  task = ClassificationTask(_classifier_options(output_dir, do_eval=True, do_predict=True,
                                                export_dir=export_dir))
  run = Run(task)
  _, results, _ = run.run_phases()
  before = EXPECTED["classifier_eval"]
  assert results["global_step"] == 2 and results["accuracy"] == before["accuracy"]
  assert results["loss"] == pytest.approx(before["loss"], abs=float32_atol([before["loss"]], 64))
  assert (tmp_path / "classifier" / "CSV.tsv").read_text() == old_predictions
  _assert_served_as_before(_served(export_task(task, run.loop.model)))


def test_the_serving_export_of_e45fe7a_still_loads_and_answers_as_it_did(tmp_path):
  with tarfile.open(FIXTURE / "classifier_export.tar.xz") as tar:
    tar.extractall(tmp_path, filter="data")
  _assert_served_as_before(_served(str(tmp_path / "classifier_export")))
