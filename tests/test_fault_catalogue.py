"""Fault catalogue: what each job does after a divergence, a changed config, a corrupt shard, a
folder it cannot write, a full disk. Real files and mounts; one real process where the
user-facing message is the point."""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from albert_tf.cli import convert
from albert_tf.cli.inspect import main as inspect_main
from albert_tf.cli.runs import run_classifier, run_pretraining, run_race, run_squad
from albert_tf.config import AlbertConfig
from albert_tf.data import squad as squad_data
from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data
from albert_tf.data.pretraining.statistics import record_statistics
from albert_tf.interop.checkpoints import load_checkpoint, native_checkpoint, save_tf1_checkpoint
from albert_tf.metrics import cmrc2018
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.tasks import pretraining
from albert_tf.tasks.classification import ClassifierOptions
from albert_tf.tasks.distillation import DistillOptions
from albert_tf.tasks.finetuning import FineTuningTask
from albert_tf.tasks.pretraining import PretrainingTask
from albert_tf.tasks.race import RaceOptions
from albert_tf.tasks.squad import SquadOptions
from albert_tf.training import recovery as guards
from albert_tf.training.run import Run
from albert_tf.training.task import Schedule
from conftest import ROOT, SHARED_DATA
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
  trainer = Run(PretrainingTask(opts(data, tmp_path, **settings)))
  real = pretraining.pretraining_losses

  def nan_from_state_12(*args):
    loss, mlm_ce, sop_ce = real(*args)
    return tf.where(trainer.loop.optimizer.iterations >= 12, float("nan"), loss), mlm_ce, sop_ce
  monkeypatch.setattr(pretraining, "pretraining_losses", nan_from_state_12)
  trainer.loop.restore_or_initialize()
  with pytest.raises(FloatingPointError) as error:
    trainer.train()
  message = str(error.value)
  assert "loss is nan at step 13" in message and "weights after step 12" in message
  assert "last good checkpoint (its own loss was finite) is " + str(tmp_path / "ckpt-10") in message
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-10")
  assert (tmp_path / "nonfinite" / "ckpt-12.index").exists()
  assert not (tmp_path / "ckpt-12.index").exists()

  monkeypatch.setattr(pretraining, "pretraining_losses", real)
  leftover = tmp_path / "eval_results.txt.tmp-0123abcd"  # of a run killed mid-write
  leftover.write_text("half")
  history = []
  run_pretraining(opts(data, tmp_path, **dict(settings, num_train_steps=14)), history=history)
  assert [h["step"] for h in history] == [12, 14]  # resumed at 10, not 12
  assert not leftover.exists()
  assert all(np.isfinite(h["loss"]) for h in history)


def test_eval_of_nonfinite_weights_fails_and_writes_no_results(data, tmp_path):  # noqa: F811
  trainer = Run(PretrainingTask(opts(data, tmp_path)))
  trainer.loop.restore_or_initialize()
  for variable in trainer.loop.model.trainable_variables:
    variable.assign(tf.fill(variable.shape, float("nan")))
  trainer.loop.manager.save(checkpoint_number=3)
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
                         do_eval=True, max_eval_steps=1000, allow_untrained=True))


def test_a_shard_of_another_sequence_length_is_named_before_training(data, tmp_path):  # noqa: F811
  odd = tmp_path / "train-9.tfrecord"
  with tf.io.TFRecordWriter(str(odd)) as writer:
    feature = lambda n: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * n))  # noqa: E731
    writer.write(tf.train.Example(features=tf.train.Features(feature={
        "input_ids": feature(64), "masked_lm_positions": feature(5)})).SerializeToString())
  files = f"{data / 'train-0.tfrecord'},{data / 'train-1.tfrecord'},{odd}"
  with pytest.raises(ValueError, match=r"train-9.tfrecord has input_ids of length 64 but "
                                       r"--max_seq_length=32"):
    Run(PretrainingTask(opts(data, tmp_path / "out", input_file=files)))


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
    resumed = Run(PretrainingTask(opts(data, out, train_batch_size=8)))
    assert resumed.loop.restore_or_initialize().endswith("ckpt-5")


# --- 7. silent wrong output ------------------------------------------------------------------
SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"


@pytest.fixture(scope="module")
def tiny_sources(tmp_path_factory):
  """One tiny classifier in each source format: TF1 names, our checkpoint, a Hugging Face
  directory (with the tokenizer), all with albert_config.json / config.json beside them."""
  folder = tmp_path_factory.mktemp("sources")
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  model = AlbertClassifier(config, num_labels=3)
  save_tf1_checkpoint(model, str(folder / "tf1" / "model.ckpt"))
  tf.train.CheckpointManager(native_checkpoint(model), str(folder / "native"), 1).save()
  for name in ("tf1", "native"):
    config.to_json_file(folder / name / "albert_config.json")
  assert convert.main(["--from=tf1", "--to=huggingface", f"--checkpoint={folder / 'tf1'}",
                       f"--spm_model_file={SPM}", f"--output_dir={folder / 'hf'}"]) == 0
  return folder


def test_convert_told_the_wrong_source_format_refuses_naming_the_one_its_names_say(
    tiny_sources, tmp_path, capsys):
  """Read as the wrong format, a classifier used to lose its head and convert with exit 0."""
  src = tiny_sources
  brightmart = ROOT / "tests" / "fixtures" / "brightmart_zh" / "postln"
  for told, source, found in (("tf1", src / "native", "native"),
                              ("native", src / "tf1", "tf1"),
                              ("native", brightmart, "tf1"),
                              ("tf1", src / "hf", "huggingface"),
                              ("huggingface", src / "tf1", "tf1")):
    out = tmp_path / f"{told}-{source.name}"
    flag = "--input_dir" if told == "huggingface" else "--checkpoint"
    assert convert.main([f"--from={told}", "--to=native", f"{flag}={source}",
                         f"--output_dir={out}"]) == 1
    error = capsys.readouterr().err
    assert f"--from={told}, but {source}" in error and f"pass --from={found}" in error, error
    assert not out.exists()
  # The right format converts the head too.
  assert convert.main(["--from=native", "--to=tf1", f"--checkpoint={src / 'native'}",
                       f"--output_dir={tmp_path / 'right'}"]) == 0
  assert "output_weights" in tf.train.load_checkpoint(
      str(tmp_path / "right" / "model.ckpt")).get_variable_to_shape_map()


def test_convert_refuses_to_drop_weights_it_has_no_place_for(tiny_sources, tmp_path, capsys):
  reader = tf.train.load_checkpoint(str(tiny_sources / "tf1" / "model.ckpt"))
  arrays = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  arrays["cls/ner/output_weights"] = np.zeros([7, 32], np.float32)  # a head nobody maps
  (tmp_path / "extra").mkdir()
  with tf.device("CPU:0"):
    tf.raw_ops.SaveV2(prefix=str(tmp_path / "extra" / "model.ckpt"),
                      tensor_names=sorted(arrays), shape_and_slices=[""] * len(arrays),
                      tensors=[arrays[n] for n in sorted(arrays)])
  (tmp_path / "extra" / "albert_config.json").write_text(
      (tiny_sources / "tf1" / "albert_config.json").read_text())
  command = ["--from=tf1", "--to=native", f"--checkpoint={tmp_path / 'extra' / 'model.ckpt'}"]
  assert convert.main(command + [f"--output_dir={tmp_path / 'out'}"]) == 1
  assert ("1 weight(s) have no place in a classification model and would be dropped: "
          "cls/ner/output_weights; --head=encoder") in capsys.readouterr().err
  assert convert.main(command + ["--head=encoder", f"--output_dir={tmp_path / 'enc'}"]) == 0
  # A head class albert-tf has no model of (a custom CRF tagger here) may have a `classifier`
  # too: it is not read as a sentence classifier.
  hf = tmp_path / "custom_hf"
  shutil.copytree(tiny_sources / "hf", hf)
  values = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(
      values, architectures=["AlbertCrfForTokenClassification"])))
  assert convert.main(["--from=huggingface", "--to=tf1", f"--input_dir={hf}",
                       f"--output_dir={tmp_path / 'custom'}"]) == 1
  assert "architectures is AlbertCrfForTokenClassification" in capsys.readouterr().err
  # As a starting point (--init_checkpoint) its encoder is taken, its head is not.
  classifier = AlbertClassifier(AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json"), 3)
  report = load_checkpoint(classifier, str(hf))
  assert "output_weights" in report.missing and "classifier.weight" in report.unused
  assert not report.restored(classifier.head.trainable_variables)


def _squad_file(path, ids):
  path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": "Paris is in France.", "qas": [
          {"id": i, "question": f"Where is Paris? ({n})",
           "answers": [{"text": "France", "answer_start": 12}]}
          for n, i in enumerate(ids)]}]}]}))
  return path


def test_duplicate_question_ids_of_a_predict_file_are_refused_before_any_model_work(tmp_path):
  predict = _squad_file(tmp_path / "dev.json", ["q1", "q2", "q1", "q3", "q3"])
  out = tmp_path / "out"
  options = SquadOptions(predict_file=str(predict), output_dir=str(out), do_predict=True,
                         do_train=True, train_file=str(_squad_file(tmp_path / "train.json",
                                                                   ["t1", "t1"])),
                         albert_config_file=str(ROOT / "configs" / "tiny.json"),
                         spm_model_file=str(SPM), max_seq_length=32)
  with pytest.raises(ValueError, match=r"dev.json: 2 question id\(s\) are used more than once: "
                                       r"'q1' at data\[0\].paragraphs\[0\].qas\[0\], "
                                       r"data\[0\].paragraphs\[0\].qas\[2\]; 'q3' at"):
    run_squad(options)
  assert not out.exists()  # no features, no checkpoint: refused before the model
  # Training data may repeat an id (nothing is keyed by it there); CMRC 2018's scorer may not.
  assert len(squad_data.read_squad_examples(str(tmp_path / "train.json"), True)) == 2
  dataset = json.loads(predict.read_text())["data"]
  with pytest.raises(ValueError, match="question id.* used more than once: q1, q3"):
    cmrc2018.evaluate(dataset, {"q1": "France", "q2": "France", "q3": "France"})


@pytest.mark.parametrize("options, message", [
    (dict(distill=DistillOptions(teacher_checkpoint="t", student_num_hidden_layers=0)),
     "--student_num_hidden_layers must be >= 1, got 0"),
    (dict(distill=DistillOptions(teacher_checkpoint="t", temperature=0.0)),
     "--distill_temperature must be > 0, got 0.0"),
    (dict(train_batch_size=0), "--train_batch_size must be >= 1, got 0"),
    (dict(train_step=-5), "--train_step must be >= 1, got -5"),
    (dict(num_train_epochs=0.0), "--num_train_epochs must be > 0, got 0.0"),
    (dict(warmup_proportion=1.5), r"--warmup_proportion must be in \[0, 1\), got 1.5"),
    (dict(save_checkpoints_steps=0), "--save_checkpoints_steps must be >= 1, got 0"),
    (dict(max_seq_length=-1), "--max_seq_length must be >= 3, got -1"),
    (dict(optimizer="sgd"), "--optimizer=sgd is not one of lamb, adamw"),
    (dict(mixed_precision="fp16"), "--mixed_precision=fp16 is not one of .*"),
])
def test_a_classifier_flag_value_that_cannot_mean_anything_is_refused_naming_it(
    tmp_path, options, message):
  """Before any data is read (there is none) and before the config is read (a student of 0
  layers used to become the teacher's depth)."""
  base = dict(task_name="sst-2", data_dir=str(tmp_path / "no_data"), output_dir=str(tmp_path),
              albert_config_file=str(tmp_path / "no_config.json"), spm_model_file=str(SPM),
              do_train=True, max_seq_length=32)
  with pytest.raises(ValueError, match=f"^{message}$"):
    run_classifier(ClassifierOptions(**dict(base, **options)))


def test_flag_values_of_the_other_jobs_are_checked_by_the_same_rules(data, tmp_path):  # noqa: F811
  with pytest.raises(ValueError, match="^--num_train_steps must be >= 1, got -3$"):
    run_pretraining(opts(data, tmp_path, num_train_steps=-3))
  with pytest.raises(ValueError, match="^--doc_stride must be >= 1, got 0$"):  # looped forever
    run_squad(SquadOptions(do_predict=True, predict_file="p.json", output_dir=str(tmp_path),
                           spm_model_file=str(SPM), doc_stride=0))
  with pytest.raises(ValueError, match="^--max_qa_length must be >= 1, got 0$"):  # kept all
    run_race(RaceOptions(data_dir=str(tmp_path), output_dir=str(tmp_path), max_qa_length=0))
  with pytest.raises(ValueError, match="^--max_qa_length=128 does not fit --max_seq_length=64: "
                                       "it must be at most max_seq_length - 3 = 61$"):
    run_race(RaceOptions(data_dir=str(tmp_path), output_dir=str(tmp_path), max_seq_length=64))
  # Distillation flags without a teacher were ignored.
  with pytest.raises(ValueError, match="--student_num_hidden_layers: distillation flags need "
                                       "a teacher"):
    run_classifier(ClassifierOptions(
        task_name="sst-2", data_dir=str(tmp_path), output_dir=str(tmp_path), do_train=True,
        albert_config_file=str(ROOT / "configs" / "tiny.json"), spm_model_file=str(SPM),
        max_seq_length=32, distill=DistillOptions(student_num_hidden_layers=1)))


def _wordpiece_records(folder):
  text = (SHARED_DATA / "chinese" / "uer_clue_corpus_small" /
          "CLUECorpusSmall_bert_sampled.txt").read_text(encoding="utf-8")
  corpus = folder / "zh.txt"
  corpus.write_text(text[:20000], encoding="utf-8")
  shards = [str(folder / f"zh-{i}.tfrecord") for i in range(2)]
  create_pretraining_data([str(corpus)], shards, CreationOptions(
      vocab_file=str(ZH_VOCAB), max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
      num_workers=1))
  return shards


def test_inspect_takes_the_mask_id_of_the_records_vocabulary_and_never_guesses(
    tmp_path, capsys):
  shards = _wordpiece_records(tmp_path)
  # create_pretraining_data's JSON beside the shards names the vocabulary: [MASK] is 103.
  assert abs(record_statistics(shards)["replacement"]["mask"] - 0.8) < 0.05
  alone = tmp_path / "alone"
  alone.mkdir()
  shutil.copy(shards[0], alone / "part.tfrecord")
  assert inspect_main([str(alone / "part.tfrecord")]) == 2
  assert "[MASK] id of the records' vocabulary is needed" in capsys.readouterr().err
  assert inspect_main([str(alone / "part.tfrecord"), f"--vocab_file={ZH_VOCAB}", "--json"]) == 0
  assert abs(json.loads(capsys.readouterr().out)["replacement"]["mask"] - 0.8) < 0.05
  # SentencePiece's [MASK] (4) on these records would report no [MASK] at all: refused.
  assert inspect_main([str(alone / "part.tfrecord"), f"--spm_model_file={SPM}"]) == 2
  assert "holds [MASK] id 4: these records were made with another vocabulary" in (
      capsys.readouterr().err)


def test_a_step_budget_below_the_resumed_checkpoint_is_refused_naming_both(data, tmp_path):  # noqa: F811
  trainer = Run(PretrainingTask(opts(data, tmp_path, num_train_steps=4)))
  trainer.loop.restore_or_initialize()
  trainer.loop.optimizer.iterations.assign(4)  # the state after 4 steps, without training them
  trainer.loop.manager.save(checkpoint_number=4)
  with pytest.raises(ValueError, match=r"--num_train_steps=2 is below step 4 of .*ckpt-4, "
                                       r"which this run resumes from: nothing would be "
                                       r"trained"):
    run_pretraining(opts(data, tmp_path, num_train_steps=2, save_checkpoints_steps=4))
  history = []  # the budget reached already: nothing to train, no error
  run_pretraining(opts(data, tmp_path, num_train_steps=4, save_checkpoints_steps=4),
                  history=history)
  assert history == []
  # Fine-tuning names its own flag: --train_step, or the steps --num_train_epochs made.
  runner = types.SimpleNamespace(options=ClassifierOptions(train_step=300),
                                 schedule=lambda: Schedule(train_steps=300))
  assert FineTuningTask.train_steps_flag(runner) == "--train_step=300"
  runner.options.num_train_epochs = 2.0
  assert FineTuningTask.train_steps_flag(runner) == "--num_train_epochs=2 (300 steps)"


# --- 8. damaged files ------------------------------------------------------------------------
def test_a_damaged_checkpoint_to_resume_from_is_named_moved_aside_and_the_rerun_resumes(
    data, tmp_path):  # noqa: F811
  """A truncated .data file of the latest checkpoint (a disk error, a copy cut short): one error
  naming it, the checkpoint moved into damaged/, and the same command resumes from the one
  before (as a checkpoint of non-finite weights is set aside)."""
  trainer = Run(PretrainingTask(opts(data, tmp_path, num_train_steps=6)))
  trainer.loop.restore_or_initialize()
  for step in (2, 4):
    trainer.loop.optimizer.iterations.assign(step)
    trainer.loop.manager.save(checkpoint_number=step)
  (shard,) = tmp_path.glob("ckpt-4.data-*")
  shard.write_bytes(shard.read_bytes()[:shard.stat().st_size // 2])
  with pytest.raises(OSError, match=r"cannot resume from .*ckpt-4: .*damaged or truncated.*"
                                    r"moved it aside to .*damaged/ckpt-4\. A rerun resumes "
                                    r"from .*ckpt-2"):
    run_pretraining(opts(data, tmp_path, num_train_steps=6))
  assert (tmp_path / "damaged" / "ckpt-4.index").exists()
  history = []
  run_pretraining(opts(data, tmp_path, num_train_steps=6, save_checkpoints_steps=2,
                       iterations_per_loop=2), history=history)
  assert [h["step"] for h in history] == [4, 6]


def _shard(d):
  """model.safetensors of directory `d` as two shards and their index, as transformers writes
  big models; returns {shard: its tensor names}."""
  arrays = load_file(str(d / "model.safetensors"))
  (d / "model.safetensors").unlink()
  names = sorted(arrays)
  parts = {"model-00001-of-00002.safetensors": names[::2],
           "model-00002-of-00002.safetensors": names[1::2]}
  for shard, part in parts.items():
    save_file({n: arrays[n] for n in part}, str(d / shard), metadata={"format": "pt"})
  (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
      n: shard for shard, part in parts.items() for n in part}}))
  return parts


def _safetensors_cases():
  """{case: (damage done to a copy of the directory `hf`, what the error must say)}."""
  def truncate(d):
    raw = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(raw[:len(raw) * 2 // 3])

  def header_size(d):
    raw = bytearray((d / "model.safetensors").read_bytes())
    raw[:8] = (len(raw) * 4).to_bytes(8, "little")
    (d / "model.safetensors").write_bytes(bytes(raw))

  def offsets(d):  # the same length, one tensor's span shrunk
    raw = (d / "model.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = raw[8:8 + size].replace(b'"data_offsets":[0,', b'"data_offsets":[4,', 1)
    assert header != raw[8:8 + size]
    (d / "model.safetensors").write_bytes(raw[:8] + header + raw[8 + size:])

  def missing_shard(d):
    _shard(d)
    (d / "model-00002-of-00002.safetensors").unlink()

  def truncated_shard(d):
    _shard(d)
    shard = d / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])

  def wrong_shard(d):  # the index maps a tensor to a shard that does not hold it
    parts = _shard(d)
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["weight_map"][parts["model-00002-of-00002.safetensors"][0]] = (
        "model-00001-of-00002.safetensors")
    (d / "model.safetensors.index.json").write_text(json.dumps(index))

  def broken_index(d):
    _shard(d)
    (d / "model.safetensors.index.json").write_text('{"weight_map": {')

  return {
      "truncated": (truncate, r"model.safetensors is truncated: its header describes \d+ "
                              r"bytes of tensor data, the file holds \d+"),
      "header_size": (header_size, r"model.safetensors: truncated or not a safetensors file "
                                   r"\(its header size says \d+ bytes"),
      "offsets": (offsets, r"model.safetensors: damaged header: tensor '.*' \(F32 \[.*\]\) "
                           r"needs \d+ bytes but its data_offsets span \[4, \d+\)"),
      "missing_shard": (missing_shard, r"model.safetensors.index.json names 1 shard\(s\) that "
                                       r".* does not have: model-00002-of-00002.safetensors"),
      "truncated_shard": (truncated_shard, r"model-00002-of-00002.safetensors is truncated"),
      "wrong_shard": (wrong_shard, r"model-00001-of-00002.safetensors lacks 1 tensor\(s\) "
                                   r"that model.safetensors.index.json maps to it"),
      "broken_index": (broken_index, r"model.safetensors.index.json: not valid JSON"),
  }


def test_damaged_safetensors_are_one_error_naming_the_file_and_what_is_wrong(
    tiny_sources, tmp_path, capsys):
  model = AlbertClassifier(AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json"), 3)
  before = [v.numpy() for v in model.variables]
  for case, (damage, message) in _safetensors_cases().items():
    hf = tmp_path / case
    shutil.copytree(tiny_sources / "hf", hf)
    damage(hf)
    with pytest.raises((OSError, ValueError), match=message):  # what run_job reports as a line
      load_checkpoint(model, str(hf))
    assert convert.main(["--from=huggingface", "--to=tf1", f"--input_dir={hf}",
                         f"--output_dir={tmp_path / (case + '_out')}"]) == 1, case
    error = capsys.readouterr().err
    assert re.search(message, error) and error.count("\n") == 1, error
  assert all((v.numpy() == b).all() for v, b in zip(model.variables, before))  # untouched
  # Intact shards load like the single file.
  load_checkpoint(model, str(tiny_sources / "hf"))
  single = [v.numpy() for v in model.variables]
  hf = tmp_path / "sharded"
  shutil.copytree(tiny_sources / "hf", hf)
  _shard(hf)
  for variable in model.variables:
    variable.assign(tf.zeros_like(variable))
  assert not load_checkpoint(model, str(hf)).unused
  assert all((v.numpy() == s).all() for v, s in zip(model.variables, single))


def test_damaged_tf1_checkpoint_files_are_named_not_a_traceback(tmp_path, capsys):
  source = ROOT / "tests" / "fixtures" / "brightmart_zh" / "postln"
  model_config = AlbertConfig.from_json_file(source / "albert_config.json")
  for damaged in ("albert_model.ckpt.index", "albert_model.ckpt.data-00000-of-00001"):
    copy = tmp_path / damaged.split(".")[-1].split("-")[0]
    shutil.copytree(source, copy)
    raw = (copy / damaged).read_bytes()
    (copy / damaged).write_bytes(raw[:len(raw) // 2])
    message = (r"cannot read checkpoint .*albert_model.ckpt: .*index damaged or truncated"
               if damaged.endswith("index") else
               r"cannot read variable '.*' of checkpoint .*albert_model.ckpt: .*damaged or "
               r"truncated")
    with pytest.raises(ValueError, match=message):
      load_checkpoint(AlbertPretrainer(model_config), str(copy / "albert_model.ckpt"))
    assert convert.main(["--from=tf1", "--to=native", f"--checkpoint={copy}/albert_model.ckpt",
                         f"--output_dir={tmp_path / 'out'}"]) == 1
    assert re.search(message, capsys.readouterr().err)


def test_real_process_with_a_truncated_init_checkpoint_exits_1_with_one_line(
    tiny_sources, tmp_path):
  hf = tmp_path / "hf"
  shutil.copytree(tiny_sources / "hf", hf)
  _safetensors_cases()["truncated"][0](hf)
  (tmp_path / "sst2").mkdir()
  (tmp_path / "sst2" / "train.tsv").write_text("sentence\tlabel\na moving film\t1\n")
  done = subprocess.run(
      [sys.executable, str(ROOT / "run_classifier.py"), "--task_name=sst-2",
       f"--data_dir={tmp_path / 'sst2'}", f"--output_dir={tmp_path / 'out'}",
       f"--init_checkpoint={hf}", "--do_train", "--max_seq_length=32"],
      capture_output=True, text=True, timeout=240)
  assert done.returncode == 1, done.stderr[-3000:]
  assert "Traceback" not in done.stderr, done.stderr[-3000:]
  errors = [line for line in done.stderr.splitlines() if "model.safetensors" in line]
  assert len(errors) == 1 and "model.safetensors is truncated" in errors[0], done.stderr[-3000:]
