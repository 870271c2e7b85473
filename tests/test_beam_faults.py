"""The Beam path of create_pretraining_data under faults, as the local path handles them: bad
--beam_pipeline_options and output folders that cannot be written are refused in one line
before any work, and SIGTERM / SIGINT to a real DirectRunner job with worker processes end it
with 143 / 130, one line naming the signal, its workers gone and nothing left behind."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from albert_tf.data.pretraining import beam_pipeline
from albert_tf.data.pretraining.create import CreationOptions
from albert_tf.jobs import signals
from conftest import ROOT, SHARED_DATA, as_from_a_terminal

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
GUTENBERG = SHARED_DATA / "corpus_en" / "nltk_gutenberg"
BOOK = GUTENBERG / "blake-poems.txt"
DIRECT = ("--runner=DirectRunner --direct_num_workers=2 "
          "--direct_running_mode=multi_processing")
OPTIONS = CreationOptions(spm_model_file=str(SPM), max_seq_length=64,
                          max_predictions_per_seq=10, dupe_factor=1)


@contextlib.contextmanager
def read_only_folder(path):
  """A read-only tmpfs at `path` (the tests run as root, as CI does: a mode would not stop
  root)."""
  path.mkdir()
  subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], check=True,
                 capture_output=True)
  try:
    yield path
  finally:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@pytest.fixture
def no_work(monkeypatch):
  """Fails the test if the job gets as far as building its pipeline."""
  def built(*args, **kwargs):
    raise AssertionError("the job started its pipeline")
  monkeypatch.setattr(beam_pipeline, "_build", built)


# --- refused before any work -----------------------------------------------------------------
@pytest.mark.parametrize("options, why", [
    ("--runner='DirectRunner", r"No closing quotation"),
    ("--runner=DirectRunner --direct_num_wrkers=2", r"--direct_num_wrkers=2 is no option of "
                                                    r"Apache Beam's DirectRunner"),
    ("--direct_num_workers=two", r"--direct_num_workers: invalid int value: 'two'"),
    ("--direct_running_mode=many", r"--direct_running_mode: invalid choice: 'many'"),
    ("--runner", r"--runner: expected one argument"),
    ("--runner=NoSuchRunner", r"Unexpected pipeline runner: NoSuchRunner"),
])
def test_bad_beam_pipeline_options_are_refused_naming_the_flag(tmp_path, no_work, options, why):
  with pytest.raises(ValueError, match=r"^--beam_pipeline_options=.*: .*" + why):
    beam_pipeline.create_pretraining_data([str(BOOK)], [str(tmp_path / "a.tfrecord")], OPTIONS,
                                          options)
  assert list(tmp_path.iterdir()) == []


def test_runner_options_beam_knows_are_accepted():
  """Flink's and Dataflow's own options are known once their runner is named (docs'
  commands); nothing runs."""
  for options in (DIRECT, "--runner=FlinkRunner --flink_master=host:8081 "
                  "--environment_type=LOOPBACK", "--runner=DataflowRunner --project=p "
                  "--region=r --temp_location=gs://b/t --max_num_workers=64"):
    beam_pipeline.pipeline_options(options)


def test_outputs_that_cannot_be_written_are_refused_before_any_work(tmp_path, no_work):
  a_file = tmp_path / "a_file"
  a_file.write_text("not a folder")
  (tmp_path / "a_folder.tfrecord").mkdir()
  cases = [
      ([tmp_path / "missing" / "a.tfrecord"], r"--output_file: output folder does not exist: "
                                              r".*/missing \(for .*/missing/a.tfrecord\)"),
      ([a_file / "a.tfrecord"], r"--output_file: output folder does not exist: .*/a_file"),
      ([tmp_path / "a_folder.tfrecord"], r"--output_file=.*/a_folder.tfrecord is a folder"),
  ]
  for outputs, message in cases:
    with pytest.raises(OSError, match=message):
      beam_pipeline.create_pretraining_data([str(BOOK)], [str(p) for p in outputs], OPTIONS,
                                            DIRECT)
  with read_only_folder(tmp_path / "ro") as read_only:
    with pytest.raises(OSError, match=r"--output_file's folder=.*/ro is not writable: "
                                      r"Read-only file system"):
      beam_pipeline.create_pretraining_data([str(BOOK)], [str(read_only / "a.tfrecord")],
                                            OPTIONS, DIRECT)
  with pytest.raises(FileNotFoundError, match=r"--input_file: no such file: .*/gone.txt"):
    beam_pipeline.create_pretraining_data([str(tmp_path / "gone.txt")],
                                          [str(tmp_path / "a.tfrecord")], OPTIONS, DIRECT)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "a_folder.tfrecord", "ro"]


@pytest.mark.parametrize("flag, message", [
    ("--beam_pipeline_options=--runner=DirectRunner --direct_num_workers=2 --no_such_option",
     "--beam_pipeline_options='--runner=DirectRunner --direct_num_workers=2 --no_such_option': "
     "--no_such_option is no option of Apache Beam's DirectRunner (a typo?)"),
    (f"--beam_pipeline_options={DIRECT}", "--output_file: output folder does not exist: "),
])
def test_the_script_refuses_in_one_line_naming_the_flag(tmp_path, flag, message):
  output = tmp_path / "missing" / "a.tfrecord"
  run = subprocess.run([sys.executable, str(ROOT / "create_pretraining_data.py"),
                        f"--input_file={BOOK}", f"--output_file={output}",
                        f"--spm_model_file={SPM}", flag],
                       capture_output=True, text=True, timeout=120)
  assert run.returncode == 1, run.stderr[-2000:]
  lines = [line for line in run.stderr.splitlines() if message in line]
  assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
  if "output folder" in message:
    assert f"{output.parent} (for {output})" in lines[0]
  assert list(tmp_path.iterdir()) == []


# --- SIGTERM and SIGINT ----------------------------------------------------------------------
def _start(out):
  """The script on one book with two DirectRunner worker processes; returns the process, the
  lines of its stderr as they come, and the thread reading them, which ends when the pipe does:
  once the job and every worker holding it have exited."""
  command = [sys.executable, str(ROOT / "create_pretraining_data.py"), f"--input_file={BOOK}",
             f"--output_file={out / 'a-0.tfrecord'},{out / 'a-1.tfrecord'}",
             f"--spm_model_file={SPM}", "--max_seq_length=64", "--dupe_factor=3",
             "--block_bytes=4000", f"--beam_pipeline_options={DIRECT}"]
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, preexec_fn=as_from_a_terminal)
  lines = []
  reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
  reader.start()
  return process, lines, reader


def _wait_for(process, lines, ready, timeout=120):
  deadline = time.time() + timeout
  while not ready():
    assert process.poll() is None, "".join(lines)[-3000:]
    assert time.time() < deadline, "".join(lines)[-3000:]
    time.sleep(0.002)


def _temporary_shards(out):
  return [n for n in os.listdir(out) if ".tfrecord.tmp-" in n]


@pytest.mark.parametrize("stop, code, moment", [
    (signal.SIGTERM, 143, "writing"),  # a temporary shard is there to remove
    (signal.SIGINT, 130, "working"),   # Ctrl-C while the workers make instances
])
def test_a_stopped_beam_job_ends_its_workers_and_leaves_nothing(tmp_path, stop, code, moment):
  out = tmp_path / "out"
  out.mkdir()
  process, lines, reader = _start(out)
  workers = []
  try:
    if moment == "writing":
      _wait_for(process, lines, lambda: _temporary_shards(out))
      workers = signals.descendants(process.pid)
      # Frozen, so the signal surely comes before the commit; the job must still end them.
      for pid in workers:
        os.kill(pid, signal.SIGSTOP)
      assert _temporary_shards(out)
    else:
      _wait_for(process, lines, lambda: any("block (" in line for line in lines))
      workers = signals.descendants(process.pid)
    assert len(workers) >= 2
    process.send_signal(stop)
    process.wait(timeout=60)
  finally:
    for pid in [process.pid] + workers:  # whatever the job failed to end
      if signals.alive(pid):
        os.kill(pid, signal.SIGKILL)
    process.wait(timeout=60)
  reader.join(timeout=60)  # the last lines, up to the pipe's end
  stderr = "".join(lines)
  assert not reader.is_alive(), f"a process outlived the job, holding its stderr: {stderr[-3000:]}"
  process.stderr.close()
  assert process.returncode == code, stderr[-3000:]
  said = [line for line in stderr.splitlines() if stop.name in line]
  assert len(said) == 1 and f"stopped by {stop.name}: the workers are stopped and the " \
      "temporary shards removed" in said[0], stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  assert os.listdir(out) == []  # no shard, temporary or final, and no metadata
  assert not any(signals.alive(pid) for pid in workers)
