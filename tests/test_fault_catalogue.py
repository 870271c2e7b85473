"""Fault catalogue: what each job does after a divergence, a changed config, a corrupt shard, a
folder it cannot write, a full disk. Real files and mounts; one real process where the
user-facing message is the point."""

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import guards
from albert_tf import training
from albert_tf.config import AlbertConfig
from albert_tf.training import Pretrainer, run_pretraining
from conftest import ROOT
from test_pretraining import data, opts  # noqa: F401  (the module's real-data fixture)


@contextlib.contextmanager
def tmpfs(path, size):
  """A small tmpfs at `path` (the tests run as root, as CI does): a disk that can fill up."""
  path.mkdir(parents=True, exist_ok=True)
  subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                 check=True, capture_output=True)
  try:
    yield path
  finally:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def _fill(folder, leave_bytes):
  """Fills the filesystem of `folder` until `leave_bytes` are free."""
  stat = os.statvfs(folder)
  free = stat.f_bavail * stat.f_frsize
  with open(folder / "filler", "wb") as f:
    f.write(b"\0" * max(free - leave_bytes, 0))


# --- 1. divergence ---------------------------------------------------------------------------
def test_checkpoint_of_a_state_with_nonfinite_loss_is_moved_aside_and_not_resumed(
    data, tmp_path, monkeypatch):  # noqa: F811
  """Checkpoint 12 is saved after steps 11-12 trained finitely, but its own weights give a NaN
  loss (step 13): it is not "last good"; ckpt-10 is, and a sane rerun resumes from it."""
  settings = dict(num_train_steps=20, save_checkpoints_steps=2, iterations_per_loop=2)
  trainer = Pretrainer(opts(data, tmp_path, **settings))
  real = training.pretraining_losses

  def nan_from_state_12(*args):
    loss, mlm_ce, sop_ce = real(*args)
    return tf.where(trainer.optimizer.iterations >= 12, float("nan"), loss), mlm_ce, sop_ce
  monkeypatch.setattr(training, "pretraining_losses", nan_from_state_12)
  trainer.restore_or_initialize()
  with pytest.raises(FloatingPointError) as error:
    trainer.train()
  message = str(error.value)
  assert "loss is nan at step 13" in message and "weights after step 12" in message
  assert "last good checkpoint (its own loss was finite) is " + str(tmp_path / "ckpt-10") in message
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-10")
  assert (tmp_path / "nonfinite" / "ckpt-12.index").exists()
  assert not (tmp_path / "ckpt-12.index").exists()

  monkeypatch.setattr(training, "pretraining_losses", real)
  history = []
  run_pretraining(opts(data, tmp_path, **dict(settings, num_train_steps=14)), history=history)
  assert [h["step"] for h in history] == [12, 14]  # resumed at 10, not 12
  assert all(np.isfinite(h["loss"]) for h in history)


def test_eval_of_nonfinite_weights_fails_and_writes_no_results(data, tmp_path):  # noqa: F811
  trainer = Pretrainer(opts(data, tmp_path))
  trainer.restore_or_initialize()
  for variable in trainer.model.trainable_variables:
    variable.assign(tf.fill(variable.shape, float("nan")))
  trainer.manager.save(checkpoint_number=3)
  with pytest.raises(FloatingPointError, match=r"eval loss is nan at step 0 .*ckpt-3.*not "
                                               "written"):
    run_pretraining(opts(data, tmp_path, do_train=False, do_eval=True))
  assert not (tmp_path / "eval_results.txt").exists()


# --- 2. config change on resume --------------------------------------------------------------
def test_resuming_with_another_config_is_refused_naming_the_keys(data, tmp_path):  # noqa: F811
  run_pretraining(opts(data, tmp_path, num_train_steps=5, save_checkpoints_steps=5))
  saved = AlbertConfig.from_json_file(tmp_path / "albert_config.json")
  assert saved.to_dict() == AlbertConfig.from_json_file(data / "tiny.json").to_dict()
  deeper = tmp_path / "deeper.json"
  saved.replace(num_hidden_layers=6).to_json_file(deeper)  # same variables: would restore
  with pytest.raises(ValueError, match=r"albert_config.json differs from --albert_config_file="
                                       r".*deeper.json in num_hidden_layers: 2 there vs 6 now"):
    run_pretraining(opts(data, tmp_path, albert_config_file=str(deeper), num_train_steps=10))
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-5")  # nothing trained


def test_model_flags_that_shape_a_finetuned_model_are_checked_too(tmp_path):
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  guards.check_run_config(str(tmp_path), config, "tiny.json", resuming=False,
                          model_flags={"task_name": "sst-2", "num_labels": 2})
  assert json.loads((tmp_path / "model_flags.json").read_text())["num_labels"] == 2
  guards.check_run_config(str(tmp_path), config, "tiny.json", resuming=True,
                          model_flags={"task_name": "sst-2", "num_labels": 2})
  with pytest.raises(ValueError, match=r"model_flags.json differs from this run's flags in "
                                       r"num_labels: 2 there vs 3 now; task_name: 'sst-2' "
                                       r"there vs 'mnli' now"):
    guards.check_run_config(str(tmp_path), config, "tiny.json", resuming=True,
                            model_flags={"task_name": "mnli", "num_labels": 3})


# --- 4. corrupt and mismatched shards ------------------------------------------------------
def _corrupt_copy(source, target, truncate=False):
  raw = bytearray(source.read_bytes())
  if truncate:
    raw = raw[:len(raw) * 2 // 3]
  else:
    middle = len(raw) // 2
    raw[middle:middle + 16] = bytes(16)
  target.write_bytes(bytes(raw))
  return target


def test_corrupt_shard_in_training_and_truncated_shard_in_eval_are_named(data, tmp_path):  # noqa: F811
  corrupt = _corrupt_copy(data / "train-1.tfrecord", tmp_path / "corrupt.tfrecord")
  files = f"{data / 'train-0.tfrecord'},{corrupt}"
  with pytest.raises(ValueError, match=r"corrupt.tfrecord is corrupt .* after record \d+ "
                                       r"\(TensorFlow: .*corrupted record at \d+"):
    run_pretraining(opts(data, tmp_path / "train", input_file=files, num_train_steps=5))
  truncated = _corrupt_copy(data / "train-1.tfrecord", tmp_path / "truncated.tfrecord",
                            truncate=True)
  with pytest.raises(ValueError, match=r"truncated.tfrecord is corrupt .* after record \d+"):
    run_pretraining(opts(data, tmp_path / "eval", input_file=str(truncated), do_train=False,
                         do_eval=True, max_eval_steps=1000))


def test_a_shard_of_another_sequence_length_is_named_before_training(data, tmp_path):  # noqa: F811
  odd = tmp_path / "train-9.tfrecord"
  with tf.io.TFRecordWriter(str(odd)) as writer:
    feature = lambda n: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * n))  # noqa: E731
    writer.write(tf.train.Example(features=tf.train.Features(feature={
        "input_ids": feature(64), "masked_lm_positions": feature(5)})).SerializeToString())
  files = f"{data / 'train-0.tfrecord'},{data / 'train-1.tfrecord'},{odd}"
  with pytest.raises(ValueError, match=r"train-9.tfrecord has input_ids of length 64 but "
                                       r"--max_seq_length=32"):
    Pretrainer(opts(data, tmp_path / "out", input_file=files))


# --- 5. folders that cannot be written -------------------------------------------------------
def test_read_only_output_dir_is_one_clear_error(data, tmp_path):  # noqa: F811
  with tmpfs(tmp_path / "ro", "1m") as mount:
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    with pytest.raises(OSError, match=r"--output_dir=.*ro/run is not writable: .*"
                                      r"[Rr]ead-only file system"):
      run_pretraining(opts(data, mount / "run"))
  under_a_file = tmp_path / "a_file"
  under_a_file.write_text("not a folder")
  with pytest.raises(OSError, match=r"--output_dir=.*a_file/run is not writable"):
    run_pretraining(opts(data, under_a_file / "run"))


def test_real_process_disk_full_keeps_earlier_checkpoints_and_no_temp_folder(data, tmp_path):  # noqa: F811
  command = [sys.executable, str(ROOT / "run_pretraining.py"),
             f"--albert_config_file={data / 'tiny.json'}",
             f"--input_file={data / 'train-*.tfrecord'}", "--do_train", "--train_batch_size=8",
             "--max_seq_length=32", "--max_predictions_per_seq=5", "--num_warmup_steps=0",
             "--save_checkpoints_steps=5", "--iterations_per_loop=5"]
  with tmpfs(tmp_path / "disk", "48m") as disk:
    out = disk / "run"
    run_pretraining(opts(data, out, train_batch_size=8, num_train_steps=5, num_warmup_steps=0,
                         save_checkpoints_steps=5, iterations_per_loop=5, seed=None))
    _fill(disk, 256 * 1024)
    full = subprocess.run(command + [f"--output_dir={out}", "--num_train_steps=10"],
                          capture_output=True, text=True, timeout=300)
    (disk / "filler").unlink()
    assert full.returncode == 1, full.stderr[-3000:]
    assert "Traceback" not in full.stderr, full.stderr[-3000:]
    assert "No space left on device" in full.stderr, full.stderr[-3000:]
    assert f"could not write checkpoint {out / 'ckpt-10'}" in full.stderr, full.stderr[-3000:]
    assert not list(out.glob("*_temp*")) and not list(out.glob("ckpt-10*"))
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-5")
    resumed = Pretrainer(opts(data, out, train_batch_size=8))
    assert resumed.restore_or_initialize().endswith("ckpt-5")
