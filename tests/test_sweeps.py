"""Several runs of one command (--seeds, a grid of --learning_rate / --train_batch_size), their
summary (median, spread, which run wins and why the others were passed over), resuming a stopped
sweep, and early stopping on the dev metric."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli import sweep
from albert_tf.cli.runs import run_classifier
from albert_tf.metrics import sweeps
from albert_tf.metrics.results import read_results
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.training.preemption import Preempted
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA

SST2 = SHARED_DATA / "glue" / "SST-2"


def record(name, accuracy, lr=1e-5, status=sweeps.FINISHED, majority=(0.5, 100), **extra):
  return dict(name=name, config={"learning_rate": lr, "train_batch_size": 32}, seed=1,
              status=status, metric="accuracy",
              results=None if accuracy is None else {"accuracy": accuracy, "loss": 0.5},
              majority=dict(share=majority[0], examples=majority[1]), **extra)


def test_the_summary_has_each_configurations_median_and_spread_and_the_best_run():
  records = [record("a", 0.80), record("b", 0.90), record("c", 0.70), record("d", 0.60),
             record("e", 0.95, lr=2e-5)]
  summary = sweeps.summarize(records)
  first, second = summary["configurations"]
  assert (first["median"], first["min"], first["max"], first["runs"]) == (0.75, 0.60, 0.90, 4)
  # The sample standard deviation of 0.8, 0.9, 0.7, 0.6 is sqrt(0.05 / 3): float64 rounding of
  # the mean's and the squares' 4-term sums, the division and the square root.
  stdev = np.sqrt(0.05 / 3)
  assert first["stdev"] == pytest.approx(stdev, abs=4 * np.spacing(stdev) * (4 + 4 + 2))
  assert (second["median"], second["stdev"]) == (0.95, None)  # one run: no spread
  assert summary["best"] == "e"
  assert summary["runs"][0]["passed_over"] == "lower accuracy than e (0.8000 <= 0.9500)"


def test_a_diverged_run_or_a_constant_classifier_never_wins_and_the_summary_says_why():
  records = [record("diverged", None, status=sweeps.DIVERGED, error="loss nan at step 4"),
             # 436 of 872 right: exactly the majority class's share, what a constant scores
             record("constant", 0.5, majority=(436 / 872, 872)),
             record("learned", 0.49, majority=(436 / 872, 872))]
  summary = sweeps.summarize(records)
  reasons = {run["name"]: run["passed_over"] for run in summary["runs"]}
  assert summary["best"] == "learned"
  assert reasons["diverged"] == "diverged: loss nan at step 4"
  assert reasons["constant"].startswith("a constant classifier: dev accuracy 0.5000")
  # The constant run's score is what that seed gave: it counts in the median.
  assert summary["configurations"][0]["scored"] == 2
  assert summary["configurations"][0]["diverged"] == 1
  page = sweeps.as_markdown(summary)
  assert "| learned | 0.4900 |" in page and "a constant classifier" in page
  only_bad = sweeps.summarize(records[:2])
  assert only_bad["best"] is None
  assert "\nBest run: none (every run was passed over)\n" in sweeps.as_markdown(only_bad)


def test_runs_without_a_score_or_majority_facts_and_empty_configurations():
  no_metric = record("no_eval", None)  # finished, but no dev results
  no_majority = dict(record("regression", 0.5), majority=None)
  no_accuracy = dict(record("stsb", None), metric="pearson", results={"pearson": 0.5})
  diverged = record("nan", None, lr=3e-5, status=sweeps.DIVERGED)
  summary = sweeps.summarize([no_metric, no_majority, no_accuracy, diverged])
  reasons = {run["name"]: run["passed_over"] for run in summary["runs"]}
  assert summary["metric"] == "accuracy"  # the first run that names one
  assert reasons["no_eval"] == "no dev accuracy (was --do_eval given?)"
  assert reasons["nan"] == "diverged: a non-finite loss"  # no error recorded
  # Without majority facts, or without an accuracy, no run is called a constant classifier.
  assert sweeps.constant_classifier(no_majority) is None
  with_majority = dict(no_accuracy, majority={"share": 0.5, "examples": 2})
  assert sweeps.constant_classifier(with_majority) is None
  assert summary["configurations"][-1] == dict(
      config={"learning_rate": 3e-5, "train_batch_size": 32}, runs=1, scored=0, diverged=1,
      median=None, min=None, max=None, stdev=None)
  assert sweeps.summarize([]) == dict(metric=None, runs=[], configurations=[], best=None)


def test_two_runs_have_a_sample_standard_deviation():
  summary = sweeps.summarize([record("a", 0.80), record("b", 0.90)])
  assert summary["configurations"][0]["stdev"] == pytest.approx(0.1 / 2 ** 0.5)


MARKDOWN_PAGE = """\
# Sweep summary (accuracy)

Best run: b

| configuration | runs | scored | diverged | median accuracy | min | max | stdev |
|---|---|---|---|---|---|---|---|
| learning_rate=1e-05, train_batch_size=32 | 2 | 2 | 0 | 0.8500 | 0.8000 | 0.9000 | 0.0707 |
| learning_rate=2e-05, train_batch_size=32 | 1 | 0 | 1 |  |  |  |  |

| run | accuracy | dev metrics | status | passed over because |
|---|---|---|---|---|
| a | 0.8000 | f1=0.7500, loss=0.5000 | finished (stopped early at step 300) | lower accuracy than b \
(0.8000 <= 0.9000) |
| b | 0.9000 | loss=0.5000 | finished | (best) |
| c |  |  | diverged | diverged: loss nan at step 4 |
"""


def test_the_markdown_page_lists_configurations_then_runs_with_their_other_float_metrics():
  a = record("a", 0.80, stopped_early_at=300)
  a["results"].update(f1=0.75, global_step=300)  # global_step is no float: not listed
  records = [a, record("b", 0.90),
             record("c", None, lr=2e-5, status=sweeps.DIVERGED, error="loss nan at step 4")]
  assert sweeps.as_markdown(sweeps.summarize(records)) == MARKDOWN_PAGE
  # A record without a status (a run that never finished) shows an empty one.
  unfinished = {key: value for key, value in record("d", None).items() if key != "status"}
  assert "| d |  |  |  | no dev accuracy" in sweeps.as_markdown(sweeps.summarize([unfinished]))


def test_the_json_summary_is_sorted_two_space_indented_and_ends_its_line():
  summary = sweeps.summarize([record("a", 0.80)])
  text = sweeps.as_json(summary)
  assert json.loads(text) == summary
  lines = text.splitlines()
  assert lines[:2] == ["{", '  "best": "a",'] and text.endswith("}\n")
  top_keys = [line.split('"')[1] for line in lines if line.startswith('  "')]
  assert top_keys == sorted(top_keys) == ["best", "configurations", "metric", "runs"]


@pytest.fixture(scope="module")
def features(tmp_path_factory):
  """A small SST-2 (its first 64 train and 200 dev rows) and its features, built once for the
  module's runs."""
  folder = tmp_path_factory.mktemp("sst2")
  for split, rows in (("train", 64), ("dev", 200)):
    head = (SST2 / f"{split}.tsv").read_text().splitlines(keepends=True)[:1 + rows]
    (folder / f"{split}.tsv").write_text("".join(head))
  return folder


def options(out, cache=None, **changes):
  base = dict(task_name="sst-2", data_dir=str(cache or SST2), output_dir=str(out),
              albert_config_file=str(ROOT / "configs" / "tiny.json"),
              spm_model_file=str(SHARED_DATA / "sentencepiece" / "spiece.model"),
              max_seq_length=16, do_train=True, do_eval=True, train_batch_size=8,
              eval_batch_size=256, train_step=2, save_checkpoints_steps=2,
              iterations_per_loop=2, learning_rate=1e-3, log_every_seconds=0,
              cached_dir=str(cache or out.parent))
  base.update(changes)
  return ClassifierOptions(**base)


def test_a_grid_runs_every_learning_rate_and_batch_size_at_every_seed(tmp_path):
  plan = sweep.plan(options(tmp_path / "out", seeds=("1", "2"),
                            grid={"learning_rate": (1e-5, 2e-5), "train_batch_size": (8, 16)}))
  assert [name for name, _, _ in plan] == [
      f"lr-{lr}_batch-{batch}/seed-{seed}" for lr in ("1e-05", "2e-05") for batch in (8, 16)
      for seed in (1, 2)]
  assert plan[-1][1:] == ({"learning_rate": 2e-5, "train_batch_size": 16}, 2)
  with pytest.raises(ValueError, match="--seed .* or --seeds"):
    sweep.plan(options(tmp_path, seeds=("1",), seed=3))


def test_a_stopped_sweep_resumes_at_its_run_and_never_redoes_a_finished_one(tmp_path):
  """A stub stands for the fine-tuning: the second run is stopped (SIGTERM's Preempted) the first
  time; the same command then runs the second and third runs only. The third diverges; the best
  run's checkpoint and export are kept."""
  out = tmp_path / "out"
  calls, stop = [], ["seed-2"]
  scores = {"seed-1": 0.6, "seed-2": 0.8}

  def run_one(o):
    name = os.path.basename(o.output_dir)
    calls.append(name)
    if name in stop:
      stop.remove(name)
      raise Preempted(None, 1)
    if name == "seed-3":
      raise FloatingPointError("the loss was nan at step 1")
    os.makedirs(os.path.join(o.output_dir, "best"))
    open(os.path.join(o.output_dir, "best", "ckpt-2.index"), "w").write(name)
    os.makedirs(os.path.join(o.export_dir))
    open(os.path.join(o.export_dir, "saved_model.pb"), "w").write(name)
    return dict(metric="accuracy", results={"accuracy": scores[name]}, majority=None)

  o = options(out, seeds=("1", "2", "3"), export_dir=str(tmp_path / "models" / "sst2"),
              export_version="auto")
  with pytest.raises(Preempted):
    sweep.run_sweep(o, run_one)
  assert calls == ["seed-1", "seed-2"] and not (out / "summary.json").exists()
  summary = sweep.run_sweep(o, run_one)
  assert calls == ["seed-1", "seed-2", "seed-2", "seed-3"]
  assert summary["best"] == "seed-2"
  assert [run["passed_over"] for run in summary["runs"]] == [
      "lower accuracy than seed-2 (0.6000 <= 0.8000)", None,
      "diverged: the loss was nan at step 1"]
  assert (out / "best" / "ckpt-2.index").read_text() == "seed-2"
  assert (tmp_path / "models" / "sst2" / "1" / "saved_model.pb").read_text() == "seed-2"
  assert json.loads((out / "summary.json").read_text())["best"] == "seed-2"
  assert "| seed-3 |  |" in (out / "summary.md").read_text()
  # Once more: nothing is run again, nothing kept again (no second export version).
  sweep.run_sweep(o, run_one)
  assert len(calls) == 4 and os.listdir(tmp_path / "models" / "sst2") == ["1"]


def test_seeds_run_the_fine_tuning_once_each_and_keep_the_best_run(tmp_path, features):
  summary = run_classifier(options(tmp_path / "out", features, seeds=("1", "2")))
  out = tmp_path / "out"
  runs = {run["name"]: run for run in summary["runs"]}
  assert sorted(runs) == ["seed-1", "seed-2"] and summary["metric"] == "accuracy"
  for name, run in runs.items():  # each run's kept checkpoint and its results, in its folder
    assert run["results"] == read_results(out / name / "best" / "best_results.txt")
    assert run["majority"]["examples"] == 200
  best = read_results(out / "best" / "best_results.txt")
  assert best == runs[summary["best"]]["results"]
  assert os.path.exists(out / "best" / "ckpt-2.index")


def test_early_stopping_stops_after_patience_evaluations_without_a_better_best(tmp_path,
                                                                             features):
  # A learning rate too small to move a prediction: the first evaluation stays the best.
  o = options(tmp_path / "out", features, train_step=20, save_checkpoints_steps=1, iterations_per_loop=1,
              learning_rate=1e-12, early_stopping_patience=2, seed=1)
  results = run_classifier(o)
  assert results["global_step"] == 3  # evaluations at 1 (the best), 2, 3: two without
  assert read_results(tmp_path / "out" / "best" / "best_results.txt")["global_step"] == 1
  assert sorted(os.listdir(tmp_path / "out"))[:3] == ["albert_config.json", "best", "checkpoint"]
  # The same command again: the run stopped early and stays stopped.
  assert run_classifier(o)["global_step"] == 3
  assert not os.path.exists(tmp_path / "out" / "ckpt-4.index")


def test_predictions_and_the_export_use_the_best_checkpoint_not_the_last_weights(tmp_path):
  """As the original's run_classifier predicts and exports model.ckpt-best: after early stopping
  or a late dip, the last weights are not the model the dev metric chose."""
  data = tmp_path / "sst2"
  data.mkdir()
  for split, rows in (("train", 16), ("dev", 16), ("test", 8)):
    head = (SST2 / f"{split}.tsv").read_text().splitlines(keepends=True)[:1 + rows]
    (data / f"{split}.tsv").write_text("".join(head))
  out = tmp_path / "out"
  o = options(out, data, train_step=3, save_checkpoints_steps=1, iterations_per_loop=1, seed=1,
              cached_dir=str(tmp_path))
  trained = Run(ClassificationTask(o))
  trained.run_phases()
  # Whatever the dev metric said, make step 1 the kept best: the last weights (step 3) differ.
  trained.best.keep_if_best(str(out / "ckpt-1"), {"accuracy": 2.0, "global_step": 1}, None)
  run = Run(ClassificationTask(options(out, data, do_train=False, do_eval=False, do_predict=True,
                                       train_step=3, cached_dir=str(tmp_path))))
  _, _, predicted = run.run_phases()
  assert predicted is not None

  def embeddings(prefix):
    reader = tf.train.load_checkpoint(prefix)
    [key] = [k for k in reader.get_variable_to_shape_map()
             if "word_embeddings" in k and "OPTIMIZER" not in k]
    return reader.get_tensor(key)

  [weight] = [w for w in run.loop.model.weights if "word_embeddings" in w.name]
  np.testing.assert_array_equal(weight.numpy(), embeddings(str(out / "best" / "ckpt-1")))
  assert not np.array_equal(weight.numpy(), embeddings(str(out / "ckpt-3")))


# --- nothing silently wrong: what a sweep refuses before any run -------------------------------
def scoring(calls, scores=None, export=False):
  """A stub fine-tuning: records the run, scores it (None: it diverges), with export=True writes
  its export as the real run would."""
  def run_one(o):
    name = os.path.basename(o.output_dir)
    calls.append(name)
    score = (scores or {}).get(name, 0.7)
    if score is None:
      raise FloatingPointError("the loss was nan at step 1")
    if export:
      os.makedirs(o.export_dir)
      open(os.path.join(o.export_dir, "saved_model.pb"), "w").write(name)
    return dict(metric="accuracy", results={"accuracy": score}, majority=None)
  return run_one


def test_a_finished_run_of_other_settings_is_refused_naming_the_keys(tmp_path):
  """The runs' folders are named by seed (and swept values) only: a rerun with another learning
  rate, step count or sequence length finds seed-1/ finished. Its result is not this command's."""
  out = tmp_path / "out"
  calls = []
  sweep.run_sweep(options(out, seeds=("1", "2")), scoring(calls))
  summary = (out / "summary.json").read_text()
  for change, named in ((dict(learning_rate=2e-5), "learning_rate: 0.001 there vs 2e-05 now"),
                        (dict(train_step=3), "train_step: 2 there vs 3 now"),
                        (dict(max_seq_length=32), "max_seq_length: 16 there vs 32 now")):
    with pytest.raises(ValueError, match=rf"{out} holds sweep runs of other settings: "
                       rf".*seed-1/sweep_settings.json differs from this command in {named}"
                       r" \(and 1 more runs\)"):
      sweep.run_sweep(options(out, seeds=("1", "2"), **change), scoring(calls))
  assert calls == ["seed-1", "seed-2"] and (out / "summary.json").read_text() == summary
  sweep.run_sweep(options(out, seeds=("1", "2")), scoring(calls))  # the same command: reused
  assert calls == ["seed-1", "seed-2"]


def test_a_run_cut_short_or_recorded_by_an_older_version_is_checked_too(tmp_path):
  out = tmp_path / "out"
  calls = []

  def stopped(o):
    calls.append(os.path.basename(o.output_dir))
    raise Preempted(None, 1)
  with pytest.raises(Preempted):
    sweep.run_sweep(options(out, seeds=("1",)), stopped)
  with pytest.raises(ValueError, match=r"seed-1/sweep_settings.json differs from this command "
                     r"in learning_rate"):  # its checkpoints would resume at another rate
    sweep.run_sweep(options(out, seeds=("1",), learning_rate=0.5), scoring(calls))
  (out / "seed-1" / "sweep_settings.json").unlink()  # a finished record of an older albert-tf
  (out / "seed-1" / "sweep_run.json").write_text(json.dumps(record("seed-1", 0.9)))
  with pytest.raises(ValueError, match="seed-1 finished without recording its settings"):
    sweep.run_sweep(options(out, seeds=("1",)), scoring(calls))
  assert calls == ["seed-1"]


def test_a_value_given_twice_or_an_empty_seeds_is_refused_naming_the_flag(tmp_path):
  """`--learning_rate=1e-5,1e-5` would train once and count that run twice in the median;
  `--seeds=` would run one unseeded run and write no summary. Both stop before any work (the
  data folder is missing: anything that got further would fail otherwise)."""
  missing = tmp_path / "no-data"
  cases = ((dict(grid={"learning_rate": (1e-5, 1e-5)}), "--learning_rate repeats a value"),
           (dict(seeds=("1",), grid={"train_batch_size": (8, 16, 8)}),
            "--train_batch_size repeats a value: 8,16,8"),
           (dict(seeds=(), given=("seeds",)), "--seeds is empty"))
  for changes, message in cases:
    with pytest.raises(ValueError, match=message):
      run_classifier(options(tmp_path / "out", missing, **changes))
  assert not (tmp_path / "out").exists()


def test_a_sweep_checks_its_export_before_any_run(tmp_path):
  out, base = tmp_path / "out", tmp_path / "models" / "sst2"
  (base / "1").mkdir(parents=True)
  (base / "1" / "saved_model.pb").write_text("served")
  calls = []
  with pytest.raises(FileExistsError, match=r"--export_version=1: .*sst2/1 exists"):
    sweep.run_sweep(options(out, seeds=("1",), export_dir=str(base), export_version="1"),
                    scoring(calls, export=True))
  (tmp_path / "a_file").write_text("not a folder")
  with pytest.raises(OSError, match="--export_dir's folder=.*a_file is not writable"):
    sweep.run_sweep(options(out, seeds=("1",), export_dir=str(tmp_path / "a_file" / "sst2")),
                    scoring(calls, export=True))
  assert calls == []
  # The version this sweep exported is no clash: rerunning the finished sweep is a no-op.
  o = options(out, seeds=("1",), export_dir=str(base), export_version="2")
  sweep.run_sweep(o, scoring(calls, export=True))
  assert json.loads((out / "summary.json").read_text())["exported"] == str(base / "2")
  sweep.run_sweep(o, scoring(calls, export=True))
  assert calls == ["seed-1"] and (base / "2" / "saved_model.pb").read_text() == "seed-1"
  assert sorted(os.listdir(base)) == ["1", "2"]
  # Another --export_dir is another place to export to, not a reason to export nothing.
  sweep.run_sweep(dataclasses.replace(o, export_dir=str(tmp_path / "other"), export_version=None),
                  scoring(calls, export=True))
  assert (tmp_path / "other" / "saved_model.pb").read_text() == "seed-1" and len(calls) == 1


def test_a_sweep_asked_to_export_that_exports_nothing_fails_saying_why(tmp_path):
  out = tmp_path / "out"
  o = options(out, seeds=("1", "2"), export_dir=str(tmp_path / "models" / "sst2"))
  with pytest.raises(ValueError, match=r"--export_dir=.*sst2: nothing was exported, as every "
                     r"run was passed over \(summary.md says why\)"):
    sweep.run_sweep(o, scoring([], {"seed-1": None, "seed-2": None}, export=True))
  assert json.loads((out / "summary.json").read_text())["best"] is None
  assert not (tmp_path / "models" / "sst2").exists()


def test_an_export_version_without_an_export_dir_is_refused_not_ignored(tmp_path):
  with pytest.raises(ValueError, match="--export_version=1 names a version folder under "
                     "--export_dir: give --export_dir"):
    run_classifier(options(tmp_path / "out", tmp_path / "no-data", export_version="1"))
  with pytest.raises(ValueError, match="--export_version=auto names a version folder"):
    run_classifier(options(tmp_path / "out", tmp_path / "no-data", seeds=("1", "2"),
                           export_version="auto"))


def test_a_single_run_refuses_an_existing_export_version_before_training(tmp_path, features):
  """docs/reliability.md: what can only fail at the end is checked before training starts."""
  out, base = tmp_path / "out", tmp_path / "models" / "sst2"
  (base / "1").mkdir(parents=True)
  (base / "1" / "saved_model.pb").write_text("served")
  with pytest.raises(FileExistsError, match=r"--export_version=1: .*sst2/1 exists"):
    run_classifier(options(out, features, export_dir=str(base), export_version="1"))
  assert not [name for name in os.listdir(out) if name.startswith("ckpt-")]  # nothing trained
