"""What each training script does, as one function: its task, the run built around it (train,
evaluate, predict as the flags ask) and, for the fine-tuning scripts, the export.

    from albert_tf.cli.runs import run_classifier
    run_classifier(ClassifierOptions(task_name="sst-2", data_dir=..., do_train=True, ...))

The fine-tuning scripts first fill what `--recipe` sets (`tasks/recipes.py`); with `--seeds`
or a comma-separated `--learning_rate` / `--train_batch_size` they run a sweep of runs
(`cli/sweep.py`) and return its summary instead of one run's results.

SIGTERM outside the training loop stops the phase at once (`preemption.sigterm_raises`): every
output appears only whole, and the same command does that work again.
"""

from albert_tf.cli import sweep
from albert_tf.export.onnx import check_onnx_options
from albert_tf.export.tasks import export_task
from albert_tf.tasks.classification import ClassificationTask
from albert_tf.tasks.ner import NerTask
from albert_tf.tasks.pretraining import PretrainingTask
from albert_tf.tasks.race import RaceTask
from albert_tf.tasks.recipes import apply_recipe
from albert_tf.tasks.squad import SquadTask
from albert_tf.training.preemption import sigterm_raises
from albert_tf.training.run import Run


def _require_one_of(options, flags):
  if not any(getattr(options, flag, None) for flag in flags):
    names = [f"--{flag}" for flag in flags]
    raise ValueError(f"at least one of {', '.join(names[:-1])} or {names[-1]} must be set")


def check_export_flags(options):
  """A fine-tuning run's export flags that cannot work, refused before any work: --onnx
  (and --onnx_quantize) writes beside --export_dir's SavedModel, of a float32 model;
  --export_version names a folder under --export_dir. (The folders themselves are checked by
  the task, `check_export_dir`, and a sweep's by `sweep.check_sweep`.)"""
  if getattr(options, "export_version", None) and not options.export_dir:
    raise ValueError(f"--export_version={options.export_version} names a version folder under "
                     "--export_dir: give --export_dir")
  if options.onnx or options.onnx_quantize:
    if not options.export_dir:
      raise ValueError("--onnx writes the ONNX file beside the serving SavedModel: give "
                       "--export_dir")
    check_onnx_options(options.mixed_precision, flag="--mixed_precision")


def run_task(task, strategy=None, history=None, run=None):
  """Resumes or starts `task`'s run, trains, evaluates and predicts as its flags ask, then
  exports (--export_dir); returns (train results, dev results, predictions)."""
  run = run or Run(task, strategy)
  outcome = run.run_phases(history)
  if getattr(task.options, "export_dir", None):
    export(task, run.loop.model)
  return outcome


def run_fine_tuning(task_class, script, options, strategy, phase):
  """A fine-tuning script's job: `--recipe` applied, then one run, returning its `phase`'s
  results (1: dev, 2: predictions), or a sweep, returning its summary."""
  options = apply_recipe(options, script)
  check_export_flags(options)
  sweep.check_flags(options)
  if not sweep.is_sweep(options):
    return run_task(task_class(options), strategy)[phase]

  def run_one(run_options):
    task = task_class(run_options)
    run = Run(task, strategy)
    trained, evaluated, predicted = run_task(task, strategy, run=run)
    kept = run.best.results() if run.best is not None else {}
    # The kept model's results: the best checkpoint's, else what the run reports (SQuAD's
    # prediction metrics).
    results = kept or (evaluated if task.best_metric else predicted) or {}
    baseline = task.majority_baseline()
    return dict(metric=task.best_metric or _SCORED_BY.get(script),
                results={k: float(v) for k, v in results.items()
                         if isinstance(v, (int, float))},
                majority=baseline and dict(share=baseline[0], examples=baseline[1]),
                stopped_early_at=trained["global_step"] if (trained or {}).get("early_stopped")
                else None)
  return sweep.run_sweep(options, run_one)


# The metric a sweep ranks a task's runs by where the task keeps no best checkpoint.
_SCORED_BY = {"squad": "f1"}


def export(task, model):
  """--export_dir: the task's serving model of `model`. SIGTERM stops it at any moment with
  `Preempted` naming the export (the scripts exit 0), and the export appears only whole."""
  export_dir = task.options.export_dir
  with sigterm_raises(f"the export to {export_dir}"):
    return export_task(task, model)


def run_pretraining(options, strategy=None, history=None):
  """What run_pretraining.py does: train and/or evaluate; returns (train, eval) results.
  `history` (a list) receives every training loop's metrics."""
  _require_one_of(options, ("do_train", "do_eval"))
  trained, evaluated, _ = run_task(PretrainingTask(options, strategy), strategy, history)
  return trained, evaluated


def run_classifier(options, strategy=None):
  """What run_classifier.py does; returns the last dev results (or None), or a sweep's
  summary."""
  _require_one_of(options, ("do_train", "do_eval", "do_predict"))
  return run_fine_tuning(ClassificationTask, "classifier", options, strategy, 1)


def run_squad(options, strategy=None):
  """What run_squad.py does; returns the prediction metrics (or None)."""
  _require_one_of(options, ("do_train", "do_predict", "export_dir"))
  return run_fine_tuning(SquadTask, "squad", options, strategy, 2)


def run_race(options, strategy=None):
  """What run_race.py does; returns the last dev results (or None)."""
  _require_one_of(options, ("do_train", "do_eval", "do_predict", "export_dir"))
  return run_fine_tuning(RaceTask, "race", options, strategy, 1)


def run_ner(options, strategy=None):
  """What run_ner.py does; returns the last dev results (or None)."""
  _require_one_of(options, ("do_train", "do_eval", "do_predict", "export_dir"))
  return run_fine_tuning(NerTask, "ner", options, strategy, 1)
