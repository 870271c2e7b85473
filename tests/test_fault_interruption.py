"""The fault catalogue's interruption and start-up part: SIGTERM outside the training loop,
stopped and killed data jobs, checks that would only fail after training, and what a user of
the tools reads when they start."""

import glob
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

from albert_tf import files
from albert_tf.cli import quiet, runs
from albert_tf.cli.runs import run_classifier, run_race
from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.tasks.race import RaceOptions
from albert_tf.training.preemption import Preempted
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, as_from_a_terminal

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
GUTENBERG = SHARED_DATA / "corpus_en" / "nltk_gutenberg"
# TensorFlow's C++ log lines: "2026-01-01 12:00:00.123456: I tensorflow/...".
CPP_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ", re.MULTILINE)


@pytest.fixture(scope="module")
def csv_task(tmp_path_factory):
  """A 32-row user CSV (review, stars) with train, dev and test splits."""
  folder = tmp_path_factory.mktemp("csv")
  rows = ["review,stars"] + [f"{'great fun' if i % 2 else 'dull and slow'} take {i},{i % 2}"
                             for i in range(32)]
  for split in ("train", "dev", "test"):
    (folder / f"{split}.csv").write_text("\n".join(rows) + "\n")
  return folder


def flags(data, out, *extra):
  return ["--task_name=csv", f"--data_dir={data}", f"--output_dir={out}",
          f"--albert_config_file={ROOT / 'configs' / 'tiny.json'}", f"--spm_model_file={SPM}",
          "--text_a_column=review", "--label_column=stars", "--max_seq_length=16",
          "--train_batch_size=8", "--train_step=2", "--save_checkpoints_steps=2",
          "--iterations_per_loop=2", "--log_every_seconds=0", *extra]


def opts(data, out, **changes):
  """The options `flags(data, out)` give run_classifier.py (the same command, in-process)."""
  base = dict(task_name="csv", data_dir=str(data), output_dir=str(out),
              albert_config_file=str(ROOT / "configs" / "tiny.json"), spm_model_file=str(SPM),
              max_seq_length=16, train_batch_size=8, train_step=2, save_checkpoints_steps=2,
              iterations_per_loop=2, log_every_seconds=0,
              csv_options=dict(text_a_column="review", label_column="stars"))
  base.update(changes)
  return ClassifierOptions(**base)


def run_script_signalling_itself(patch, args, quiet_start=False, timeout=240):
  """run_classifier.py in a real process whose `patch` (Python source, after `import os,
  signal`) makes it send itself SIGTERM at the moment under test."""
  code = "\n".join(["import os, runpy, signal", "from albert_tf.cli import quiet",
                    "quiet.install()", patch,  # as the script's first lines: before TensorFlow
                    "runpy.run_path('run_classifier.py', run_name='__main__')"])
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  if quiet_start:  # as a user's shell has it (conftest sets it for the suite)
    env.pop("TF_CPP_MIN_LOG_LEVEL")
  return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=timeout)


def leftovers(*folders):
  return [p for f in folders for p in glob.glob(os.path.join(f, "*"))
          if re.search(r"\.tmp|\.write-test-", p)]


# --- SIGTERM outside the training loop ---------------------------------------------------------
def test_sigterm_during_the_last_evaluation_exits_0_and_the_rerun_evaluates_that_checkpoint(
    csv_task, tmp_path, caplog):
  out = tmp_path / "out"
  # After the dev predictions, before their metrics and eval_results.txt: mid-evaluation.
  patch = "\n".join([
      "import albert_tf.tasks.classification as classification", "real = classification.compute_metrics",
      "def metrics_then_sigterm(*args):", "  os.kill(os.getpid(), signal.SIGTERM)",
      "  return real(*args)", "classification.compute_metrics = metrics_then_sigterm"])
  run = run_script_signalling_itself(patch, flags(csv_task, out, "--do_train", "--do_eval"),
                                     quiet_start=True)
  assert run.returncode == 0, run.stderr[-3000:]
  assert "stopped by SIGTERM during the evaluation at step 2" in run.stderr
  assert (out / "ckpt-2.index").exists()  # the checkpoint is kept, its evaluation is not
  assert not (out / "eval_results.txt").exists() and not (out / "best").exists()
  assert leftovers(out) == []
  # What the user read: our lines, not TensorFlow's C++ start-up, XLA's absl notices, or
  # orbit's dict of each loop's outputs.
  printed = run.stdout + run.stderr
  assert not CPP_LINE.search(printed) and "cuInit" not in printed, printed[-3000:]
  assert "absl::InitializeLog" not in printed and "train | step" not in printed, printed

  caplog.set_level(logging.INFO)
  results = run_classifier(opts(csv_task, out, do_train=True, do_eval=True))
  assert "which the run that saved it did not finish evaluating" in caplog.text
  assert results["global_step"] == 2
  assert "global_step = 2" in (out / "eval_results.txt").read_text()
  assert "global_step = 2" in (out / "best" / "best_results.txt").read_text()


# SIGTERM (a) once the SavedModel's first folder is written beside export_dir, (b) while the
# signatures are traced, inside TensorFlow's tracing and autograph: in a process of its own,
# as an exception unwinding through TensorFlow's internals may leave their state unusable for
# the rest of the process (the job exits; a test process would go on with it).
SAVE_UNDER_WAY = [
    "import tensorflow as tf", "def save_under_way(obj, export_dir, *args, **kwargs):",
    "  tf.io.gfile.makedirs(os.path.join(export_dir, 'variables'))",
    "  os.kill(os.getpid(), signal.SIGTERM)", "tf.saved_model.save = save_under_way"]
WHILE_TRACING = [
    "import tensorflow as tf", "from albert_tf.cli import runs", "real_identity = tf.identity",
    "real_export, calls = runs.export_task, []", "def identity_once(*args, **kwargs):",
    "  calls.append(1)", "  if len(calls) == 1:", "    os.kill(os.getpid(), signal.SIGTERM)",
    "  return real_identity(*args, **kwargs)", "def tracing(*args, **kwargs):",
    "  tf.identity = identity_once", "  return real_export(*args, **kwargs)",
    "runs.export_task = tracing"]


@pytest.mark.parametrize("patch", [SAVE_UNDER_WAY, WHILE_TRACING], ids=["saving", "tracing"])
def test_sigterm_during_the_export_exits_0_without_an_export_and_the_next_run_cleans_up(
    csv_task, tmp_path, patch):
  out, export = tmp_path / "out", tmp_path / "serving"
  patch = "\n".join(patch)
  run = run_script_signalling_itself(
      patch, flags(csv_task, out, "--do_predict", f"--export_dir={export}", "--allow_untrained"))
  assert run.returncode == 0, run.stderr[-3000:]
  assert f"stopped by SIGTERM during the export to {export}" in run.stderr
  assert not export.exists()  # no half-written export under the served name
  assert len((out / "CSV.tsv").read_text().splitlines()) == 33  # the predictions are whole
  # The stop removed the export's temporary folder at once; what a kill (SIGKILL) leaves, the
  # next run removes before anything else.
  assert leftovers(tmp_path) == []
  killed = tmp_path / "serving.tmp-0123abcd" / "variables"
  killed.mkdir(parents=True)
  Run(ClassificationTask(opts(csv_task, out, do_predict=True, export_dir=str(export),
                              allow_untrained=True)))
  assert leftovers(tmp_path) == []


def _sigterm():
  os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at the next Python instruction


def _at_entry(function):
  def signalled(*args, **kwargs):
    _sigterm()
    return function(*args, **kwargs)
  return signalled


def _in_a_finalizer(function):
  """SIGTERM inside a `__del__` (garbage collection is everywhere in an export), which drops
  the error the handler raises there."""
  class Finalized:
    def __del__(self):
      _sigterm()
      sum(range(10))  # the handler runs here

  def signalled(*args, **kwargs):
    Finalized()  # collected at once
    return function(*args, **kwargs)
  return signalled


def _turned_into_another_error(function):
  """SIGTERM inside code that turns any error into one of its own, as a library may."""
  def signalled(*args, **kwargs):
    try:
      _sigterm()
      sum(range(10))
    except BaseException:  # pylint: disable=broad-except
      raise RuntimeError("a library's own error") from None
    return function(*args, **kwargs)
  return signalled


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped one
@pytest.mark.parametrize("where, target, name, how", [
    ("describing the export", ClassificationTask, "serving", _at_entry),
    ("in a finalizer, which drops the error", tf.saved_model, "save", _in_a_finalizer),
    ("in code that turns it into its own error", files, "commit", _turned_into_another_error),
    ("before the rename into place", files, "commit", _at_entry),
])
def test_sigterm_at_any_moment_of_the_export_stops_it_naming_the_signal(
    csv_task, tmp_path, monkeypatch, where, target, name, how):
  """In-process, at several points of `--export_dir`'s export outside TensorFlow's own code (the
  points inside it run in a process of their own, above): the job stops with the message the
  scripts exit 0 on, and the export is there whole or not at all, nothing temporary left. (A
  random model: what is exported does not matter here.)"""
  del where
  export = tmp_path / "serving"
  task = ClassificationTask(opts(csv_task, tmp_path / "out", export_dir=str(export)))
  model = task.build_model()
  monkeypatch.setattr(target, name, how(getattr(target, name)))
  with pytest.raises(Preempted, match=f"stopped by SIGTERM during the export to {export}"):
    runs.export(task, model)
  monkeypatch.undo()
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
  assert leftovers(tmp_path) == []
  if export.exists():  # the work had finished when the dropped stop was raised
    assert (export / "saved_model.pb").is_file() and (export / "variables").is_dir()


# --- checks that would only fail after training --------------------------------------------
def test_a_missing_test_split_or_an_unwritable_export_dir_fails_before_training(csv_task,
                                                                                tmp_path):
  race = tmp_path / "race"
  for split in ("train", "dev"):  # no test/ folder
    (race / split / "middle").mkdir(parents=True)
    (race / split / "middle" / "1.txt").write_text(json.dumps(
        {"id": "1.txt", "article": "The cat sat on the mat.", "questions": ["Where is it?"],
         "options": [["on the mat", "in a box", "at sea", "up a tree"]], "answers": ["A"]}))
  with pytest.raises(FileNotFoundError, match=r"--do_predict: no RACE test split"):
    run_race(RaceOptions(data_dir=str(race), output_dir=str(tmp_path / "race_out"),
                         albert_config_file=str(ROOT / "configs" / "tiny.json"),
                         spm_model_file=str(SPM), max_seq_length=32, max_qa_length=8,
                         train_batch_size=2, do_predict=True))
  assert not glob.glob(str(tmp_path / "race_out" / "ckpt-*"))  # nothing was trained
  no_dev = tmp_path / "no_dev"
  no_dev.mkdir()
  (no_dev / "train.csv").write_bytes((csv_task / "train.csv").read_bytes())
  with pytest.raises(FileNotFoundError, match=r"--do_eval: .*dev"):
    run_classifier(opts(no_dev, tmp_path / "out", do_train=True, do_eval=True))
  (tmp_path / "a_file").write_text("")
  with pytest.raises(OSError, match=r"--export_dir's folder=.*a_file is not writable"):
    run_classifier(opts(csv_task, tmp_path / "out", do_train=True,
                        export_dir=str(tmp_path / "a_file" / "serving")))
  assert not glob.glob(str(tmp_path / "out" / "ckpt-*"))


# --- create_pretraining_data ------------------------------------------------------------------
def _children(pid):
  """Live (not zombie) processes whose parent is `pid`."""
  found = []
  for stat in glob.glob("/proc/[0-9]*/stat"):
    try:
      with open(stat) as f:
        state, parent = f.read().rsplit(")", 1)[1].split()[:2]
    except (OSError, ValueError):
      continue
    if int(parent) == pid and state != "Z":
      found.append(int(stat.split("/")[2]))
  return found


def _alive(pid):
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def _start_creating(out):
  """create_pretraining_data.py with 2 workers, on a corpus that takes it minutes; returns
  (the process once its workers run and its temporary shards exist, stderr(): all it wrote
  there once it has ended). A thread reads stderr as it comes, so the pipe never fills."""
  command = [sys.executable, str(ROOT / "create_pretraining_data.py"),
             f"--input_file={GUTENBERG / 'austen-emma.txt'}",
             f"--output_file={out}-0.tfrecord,{out}-1.tfrecord", f"--spm_model_file={SPM}",
             "--max_seq_length=64", "--dupe_factor=40", "--num_workers=2",
             "--block_bytes=20000"]
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, preexec_fn=as_from_a_terminal)
  lines = []
  reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
  reader.start()

  def stderr():
    reader.join(60)
    return "".join(lines)
  deadline = time.time() + 60
  while len(_children(process.pid)) < 2 or not glob.glob(f"{out}-*.tmp-*"):
    if process.poll() is not None or time.time() > deadline:
      process.kill()
      pytest.fail(f"create_pretraining_data.py did not start its workers:\n{stderr()}")
    time.sleep(0.05)
  return process, stderr


def test_a_write_stopped_half_way_leaves_neither_its_temporary_nor_a_partial_file(
    tmp_path, monkeypatch):
  """SIGTERM's Preempted (or Ctrl-C) during an atomic write: the old file stays whole and the
  temporary is removed at once (not only by the next run)."""
  from albert_tf.metrics.results import write_results  # pylint: disable=g-import-not-at-top
  path = tmp_path / "eval_results.txt"
  write_results(str(path), {"accuracy": 0.5})

  def stopped(*args, **kwargs):
    raise KeyboardInterrupt
  monkeypatch.setattr(os, "replace", stopped)  # the rename that commits the file
  with pytest.raises(KeyboardInterrupt):
    write_results(str(path), {"accuracy": 0.9})
  assert sorted(p.name for p in tmp_path.iterdir()) == ["eval_results.txt"]
  assert path.read_text() == "accuracy = 0.5\n"


@pytest.mark.parametrize("stop, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_create_pretraining_data_stops_its_workers_and_removes_its_shards(
    tmp_path, stop, code):
  process, read_stderr = _start_creating(tmp_path / "out")
  try:
    workers = _children(process.pid)
    process.send_signal(stop)
    process.wait(timeout=60)
  finally:
    if process.poll() is None:
      process.kill()
  stderr = read_stderr()
  assert process.returncode == code, stderr[-2000:]
  assert "the workers are stopped and the temporary shards removed" in stderr
  assert os.listdir(tmp_path) == []  # no shard, temporary or final, and no metadata
  deadline = time.time() + 10  # the pool's processes end with it, not minutes later
  while any(_alive(pid) for pid in workers) and time.time() < deadline:
    time.sleep(0.05)
  assert not any(_alive(pid) for pid in workers)


def test_a_rerun_removes_the_temporary_shards_of_a_killed_create_pretraining_data(tmp_path):
  out = tmp_path / "out"
  process, read_stderr = _start_creating(out)
  try:
    process.kill()  # SIGKILL: no chance to clean up
    process.wait(timeout=60)
  finally:
    if process.poll() is None:
      process.kill()
  read_stderr()  # the reader ends with the pipe
  left = glob.glob(f"{out}-*.tmp-*")
  assert len(left) == 2
  create_pretraining_data(
      [str(GUTENBERG / "blake-poems.txt")], [f"{out}-0.tfrecord", f"{out}-1.tfrecord"],
      CreationOptions(spm_model_file=str(SPM), max_seq_length=64, dupe_factor=1,
                      num_workers=1))
  assert sorted(os.listdir(tmp_path)) == ["out-0.tfrecord", "out-1.tfrecord", "out.json"]


# --- what a user reads ---------------------------------------------------------------------
def test_asking_for_tensorflows_logs():
  assert not quiet.asked_for_tensorflow_logs(["--do_train", "--verbosity=0"], {})
  assert quiet.asked_for_tensorflow_logs(["--verbosity=1"], {})
  assert quiet.asked_for_tensorflow_logs(["-v", "2", "--do_train"], {})
  assert quiet.asked_for_tensorflow_logs([], {"TF_CPP_MIN_LOG_LEVEL": "0"})
  assert not quiet.asked_for_tensorflow_logs(["--", "-v", "1"], {})  # not a flag any more


def test_tools_start_without_tensorflows_cpp_lines_unless_asked():
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  env.pop("TF_CPP_MIN_LOG_LEVEL")

  def printed(*command):
    run = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    return run.stdout + run.stderr

  # (A script's real job starts quiet: the SIGTERM test above checks its whole output.)
  module_help = printed("-m", "albert_tf.cli.convert", "--help")  # loads TensorFlow, quietly
  assert "--from" in module_help, module_help[:2000]
  assert not CPP_LINE.search(module_help) and "cuInit" not in module_help, module_help[:2000]
  assert CPP_LINE.search(printed("run_classifier.py", "--help", "--verbosity=1"))
