"""Several fine-tunings of one command: `--seeds=1,2,3,4,5`, and a comma-separated
`--learning_rate` / `--train_batch_size` for a grid (every combination times every seed).

    output_dir/seed-1/ ... seed-5/           one run each (with a grid: lr-2e-05_batch-32/seed-1)
    output_dir/summary.json, summary.md      every run's dev metrics, median and spread
    output_dir/best/                         the winning run's kept checkpoint and its results
    --export_dir                             the winning run's export

The runs go one after another. Each run's folder is an ordinary output_dir, so a stopped sweep
resumes with the same command: a run that finished left `sweep_run.json` (its record: dev
results, or that it diverged) and is not run again; the run that was cut short resumes from its
own checkpoints; the ones after it start. Which run wins and why the others were passed over is
`metrics/sweeps.py`'s rule.

Only the same command may reuse a run: each run's folder keeps `sweep_settings.json` (every
setting that changes its result), and a sweep whose runs' folders hold other settings is refused
before any training, naming the keys (`check_sweep`; recovery.py's rule for a run's config).
"""

import dataclasses
import json
import logging
import os

import tensorflow as tf

from albert_tf import files
from albert_tf.jobs import versions
from albert_tf.metrics import sweeps
from albert_tf.metrics.results import write_results
from albert_tf.tasks.finetuning import check_export_dir
from albert_tf.training.recovery import differences

logger = logging.getLogger(__name__)

RECORD = "sweep_run.json"
SETTINGS = "sweep_settings.json"
SUMMARY_JSON, SUMMARY_MD = "summary.json", "summary.md"
BEST = "best"
EXPORT = "export"


def is_sweep(options):
  """Whether `options` ask for several runs (--seeds, or a comma-separated swept flag)."""
  return bool(options.seeds or options.grid)


def check_flags(options):
  """Sweep flags that would make the summary lie, refused before any work: an empty --seeds
  (it would run one unseeded run and write no summary) and a value given twice in a grid or
  --seeds (one run, counted twice in the median and spread)."""
  if "seeds" in options.given and not options.seeds:
    raise ValueError("--seeds is empty: give the seeds to run (--seeds=1,2,3), or leave the "
                     "flag out for one run")
  for field, values in sorted(options.grid.items()):
    if len(set(values)) != len(values):
      raise ValueError(f"--{field} repeats a value: {','.join(map(str, values))} (a sweep runs "
                       "each value once)")
  if is_sweep(options):
    plan(options)  # --seeds' values


def _seeds(options):
  if options.seeds and options.seed is not None:
    raise ValueError("give --seed (one run) or --seeds (a sweep), not both")
  seeds = []
  for seed in options.seeds or (options.seed,):
    try:
      seeds.append(None if seed is None else int(seed))
    except ValueError:
      raise ValueError(f"--seeds must be integers, got {seed!r}") from None
    if seeds[-1] is not None and seeds[-1] < 0:
      raise ValueError(f"--seeds must be >= 0, got {seed}")
  if len(set(seeds)) != len(seeds):
    raise ValueError(f"--seeds repeats a seed: {','.join(map(str, options.seeds))}")
  return seeds


def plan(options):
  """[(folder name, {swept field: value}, seed)] of every run, in the order they run."""
  lrs = options.grid.get("learning_rate", (options.learning_rate,))
  batches = options.grid.get("train_batch_size", (options.train_batch_size,))
  grid = len(lrs) > 1 or len(batches) > 1
  runs = []
  for lr in lrs:
    for batch in batches:
      for seed in _seeds(options):
        folder = f"lr-{lr:g}_batch-{batch}/" if grid else ""
        runs.append((f"{folder}seed-{'none' if seed is None else seed}",
                     dict(learning_rate=lr, train_batch_size=batch), seed))
  return runs


def run_options(options, name, config, seed):
  """The options of one run: its own output_dir (and export folder), its seed and settings;
  feature caches shared in the sweep's output_dir (a run's settings do not change them)."""
  top = options.output_dir
  folder = os.path.join(top, name)
  changes = dict(config, output_dir=folder, seed=seed, seeds=(), grid={},
                 export_dir=os.path.join(folder, EXPORT) if options.export_dir else None,
                 export_version=None)
  for field, default in (("cached_dir", top),
                         ("train_feature_file", os.path.join(top, "train_features.tf_record")),
                         ("predict_feature_file",
                          os.path.join(top, "predict_features.tf_record"))):
    if hasattr(options, field) and getattr(options, field) is None:
      changes[field] = default
  return dataclasses.replace(options, **changes)


# Options that say where a run's outputs go and how it logs, not what it computes: a rerun may
# change them. Every other field (a new one too) counts as a setting of the run.
_NOT_SETTINGS = ("output_dir", "export_dir", "export_version", "cached_dir", "train_feature_file",
                 "predict_feature_file", "log_every_seconds", "given", "seeds", "grid", "recipe",
                 "keep_checkpoint_max", "allow_untrained")


def settings(options):
  """{setting: value} of one run's options (`run_options`'): every flag that changes its
  results, its checkpoint or its export (the seed, the swept values, the data and the starting
  checkpoint's paths), whether it exports, and the contents of --albert_config_file (a file
  edited in place is another model). JSON values, as the record keeps them."""
  values = dataclasses.asdict(options)
  for field in _NOT_SETTINGS:
    values.pop(field, None)
  values["export"] = bool(options.export_dir)
  values["albert_config"] = None
  if options.albert_config_file:
    try:
      with files.open_file(options.albert_config_file) as f:
        values["albert_config"] = json.load(f)
    except (OSError, ValueError):  # the run itself reports an unreadable config
      pass
  return json.loads(json.dumps(values, sort_keys=True, default=str))


def check_sweep(options):
  """What would make the sweep's result wrong or its export fail, refused before any run: a
  run folder (finished or cut short) of other settings than this command's, a finished run
  that records none (an older albert-tf's), and an --export_dir that cannot be written or
  whose --export_version exists (unless this sweep exported it: a rerun of a finished sweep)."""
  top = options.output_dir
  problems = []
  for name, config, seed in plan(options):
    folder = os.path.join(top, name)
    path = os.path.join(folder, SETTINGS)
    if not files.exists(path):
      if files.exists(os.path.join(folder, RECORD)):
        problems.append(f"{name} finished without recording its settings (an older albert-tf), "
                        "so it cannot be checked")
      continue
    with files.open_file(path) as f:
      changed = differences(json.load(f), settings(run_options(options, name, config, seed)))
    if changed:
      problems.append(f"{path} differs from this command in " + "; ".join(changed))
  if problems:
    more = f" (and {len(problems) - 1} more runs)" if len(problems) > 1 else ""
    raise ValueError(
        f"{top} holds sweep runs of other settings: {problems[0]}{more}. Rerun with their "
        "settings, remove those run folders, or give a new --output_dir")
  if options.export_dir:
    try:
      check_export_dir(options.export_dir, options.export_version)
    except FileExistsError:
      if not _is_export_target(_summary_before(top).get("exported") or "", options):
        raise


def run_sweep(options, run_one):
  """Runs every run of `options`' sweep not finished yet: `run_one(run options)` returns its
  record ({metric, results, majority, stopped_early_at}); a run that diverges (FloatingPointError
  from the NaN guard) is recorded as such and the sweep goes on. Then writes the summary and
  keeps the best run. Returns the summary. Refuses before any run what `check_sweep` refuses,
  and after the summary a sweep asked to export that exported nothing."""
  top = options.output_dir
  check_sweep(options)
  records = []
  runs = plan(options)
  for number, (name, config, seed) in enumerate(runs, 1):
    folder = os.path.join(top, name)
    record_path = os.path.join(folder, RECORD)
    if files.exists(record_path):
      with files.open_file(record_path) as f:
        records.append(json.load(f))
      logger.info("Sweep run %d of %d (%s): finished already", number, len(runs), name)
      continue
    logger.info("Sweep run %d of %d: %s", number, len(runs), name)
    record = dict(name=name, config=config, seed=seed)
    one = run_options(options, name, config, seed)
    files.write_json(os.path.join(folder, SETTINGS), settings(one), sort_keys=True)
    try:
      record.update(run_one(one), status=sweeps.FINISHED)
    except FloatingPointError as e:  # the NaN guard: this run's checkpoints of bad weights
      logger.warning("Sweep run %s diverged: %s", name, e)  # are set aside; the sweep goes on
      record.update(status=sweeps.DIVERGED, error=str(e))
    files.write_json(record_path, record, sort_keys=True)
    records.append(record)
  summary = sweeps.summarize(records)
  _keep_best(options, summary)
  files.write_text(os.path.join(top, SUMMARY_MD), sweeps.as_markdown(summary))
  files.write_text(os.path.join(top, SUMMARY_JSON), sweeps.as_json(summary))
  logger.info("Sweep summary in %s:\n%s", top, sweeps.as_markdown(summary))
  if options.export_dir and not summary["exported"]:
    raise ValueError(
        f"--export_dir={options.export_dir}: nothing was exported, as " + (
            "every run was passed over (summary.md says why)" if summary["best"] is None
            else f"the best run, {summary['best']}, left no export"))
  return summary


def _summary_before(top):
  """The last summary.json written in `top` ({} if none)."""
  path = os.path.join(top, SUMMARY_JSON)
  if not files.exists(path):
    return {}
  with files.open_file(path) as f:
    return json.load(f)


def _keep_best(options, summary):
  """output_dir/best := the winner's kept checkpoint (its `best` folder, or its last checkpoint
  where the task keeps none) with its results; --export_dir := the winner's export. Done once
  per winner and export target: a rerun of a finished sweep keeps what it kept
  (`summary["kept"]`, and `summary["exported"]`: where the export went, or None)."""
  top, name = options.output_dir, summary["best"]
  before = _summary_before(top)
  same_winner = name is not None and before.get("kept") == name
  summary["kept"], summary["exported"] = name, None
  if name is None:
    return
  run = os.path.join(top, name)
  if not same_winner:
    record = next(r for r in summary["runs"] if r["name"] == name)
    with files.atomic_path(os.path.join(top, BEST)) as tmp:
      if files.isdir(os.path.join(run, BEST)):
        _copy_tree(os.path.join(run, BEST), tmp)
      else:
        files.makedirs(tmp)
        latest = tf.train.latest_checkpoint(run)
        for source in files.glob(latest + ".*") if latest else ():
          tf.io.gfile.copy(source, os.path.join(tmp, os.path.basename(source)))
        write_results(os.path.join(tmp, "best_results.txt"), record.get("results") or {})
    logger.info("Kept %s's checkpoint (the best run) as %s", name, os.path.join(top, BEST))
  if not options.export_dir:
    return
  # A summary of an older albert-tf does not say where it exported: --export_dir, as it was.
  previous = before.get("exported", options.export_dir) if same_winner else None
  if previous and _is_export_target(previous, options):
    summary["exported"] = previous
  elif files.isdir(os.path.join(run, EXPORT)):
    target = versions.version_path(options.export_dir, options.export_version)
    with files.atomic_path(target) as tmp:
      _copy_tree(os.path.join(run, EXPORT), tmp)
    summary["exported"] = target
    logger.info("Kept %s's export as %s", name, target)


def _is_export_target(path, options):
  """Whether the export at `path` is where this command's --export_dir / --export_version put
  it (a rerun with another --export_dir exports there too)."""
  base = options.export_dir.rstrip("/")
  version = versions.parse_version(options.export_version)
  if version is None:
    return path.rstrip("/") == base
  if version == "auto":
    return os.path.dirname(path.rstrip("/")) == base
  return path == os.path.join(base, str(version))


def _copy_tree(source, target):
  """Copies the folder `source` to `target` (local or remote paths)."""
  for folder, _, names in tf.io.gfile.walk(source):
    here = os.path.join(target, os.path.relpath(folder, source))
    tf.io.gfile.makedirs(here)
    for name in names:
      tf.io.gfile.copy(os.path.join(folder, name), os.path.join(here, name), overwrite=True)
