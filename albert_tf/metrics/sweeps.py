"""The summary of a fine-tuning sweep: every run's dev metrics, each configuration's median and
spread (the paper reports the median over runs), which run wins and why each other run was
passed over.

A run is a record (what `albert_tf.cli.sweep` writes to each run's folder):

    {"name": "seed-3", "config": {"learning_rate": 2e-05, "train_batch_size": 32}, "seed": 3,
     "status": "finished" | "diverged", "error": "...", "metric": "accuracy",
     "results": {"accuracy": 0.91, ...}, "majority": {"share": 0.51, "examples": 872}}

Rules (the original's users meet both: a seed that sticks at the majority class, a seed that
diverges, while another seed of the same command works):
- a run that diverged (the NaN guard stopped it) has no score and does not win;
- a classifier whose kept checkpoint scores the dev set's majority share (`metrics.majority`) is
  a constant classifier and does not win; its score still counts in the median, as it is what
  that seed gave;
- of the others, the highest metric wins (the first run on a tie).
"""

import json
import statistics

from albert_tf.metrics.majority import at_majority_share

FINISHED, DIVERGED = "finished", "diverged"


def constant_classifier(record):
  """Why the run's kept model is a constant classifier (its accuracy is the dev majority
  share), or None."""
  majority, results = record.get("majority"), record.get("results") or {}
  if not majority or "accuracy" not in results:
    return None
  if not at_majority_share(results["accuracy"], majority["share"], majority["examples"]):
    return None
  return (f"a constant classifier: dev accuracy {results['accuracy']:.4f} is the majority "
          f"class's share of the {majority['examples']} dev examples")


def score(record):
  """The run's value of its metric, or None (diverged, or no dev results)."""
  if record.get("status") != FINISHED:
    return None
  value = (record.get("results") or {}).get(record.get("metric"))
  return None if value is None else float(value)


def _spread(values):
  """Median, min, max and sample standard deviation of `values` (None where undefined)."""
  if not values:
    return dict(median=None, min=None, max=None, stdev=None)
  return dict(median=statistics.median(values), min=min(values), max=max(values),
              stdev=statistics.stdev(values) if len(values) > 1 else None)


def _config_name(config):
  return ", ".join(f"{name}={value:g}" for name, value in config.items())


def summarize(records):
  """{metric, runs: [record + passed_over], configurations: [{config, runs, diverged,
  median, min, max, stdev}], best: the winning run's name or None}."""
  metric = next((r["metric"] for r in records if r.get("metric")), None)
  eligible = []
  runs = []
  for record in records:
    if record.get("status") == DIVERGED:
      reason = f"diverged: {record.get('error', 'a non-finite loss')}"
    elif score(record) is None:
      reason = f"no dev {metric} (was --do_eval given?)"
    else:
      reason = constant_classifier(record)
    if reason is None:
      eligible.append(record)
    runs.append(dict(record, passed_over=reason))
  best = max(eligible, key=score, default=None)  # max keeps the first of equal scores
  for run in runs:
    if best is not None and run["passed_over"] is None and run["name"] != best["name"]:
      run["passed_over"] = (f"lower {metric} than {best['name']} "
                            f"({score(run):.4f} <= {score(best):.4f})")
  configurations = []
  for config in _unique(r["config"] for r in records):
    mine = [r for r in records if r["config"] == config]
    values = [s for s in map(score, mine) if s is not None]
    configurations.append(dict(config=config, runs=len(mine), scored=len(values),
                               diverged=sum(r.get("status") == DIVERGED for r in mine),
                               **_spread(values)))
  return dict(metric=metric, runs=runs, configurations=configurations,
              best=best["name"] if best else None)


def _unique(configs):
  seen = []
  for config in configs:
    if config not in seen:
      seen.append(config)
  return seen


def _number(value):
  return "" if value is None else f"{value:.4f}"


def as_markdown(summary):
  """The summary as a readable Markdown page: configurations, then every run."""
  metric = summary["metric"]
  lines = [f"# Sweep summary ({metric})", "",
           f"Best run: {summary['best'] or 'none (every run was passed over)'}", "",
           f"| configuration | runs | scored | diverged | median {metric} | min | max | stdev |",
           "|---|---|---|---|---|---|---|---|"]
  for c in summary["configurations"]:
    lines.append(f"| {_config_name(c['config'])} | {c['runs']} | {c['scored']} | "
                 f"{c['diverged']} | {_number(c['median'])} | {_number(c['min'])} | "
                 f"{_number(c['max'])} | {_number(c['stdev'])} |")
  lines += ["", f"| run | {metric} | dev metrics | status | passed over because |",
            "|---|---|---|---|---|"]
  for run in summary["runs"]:
    others = ", ".join(f"{k}={v:.4f}" for k, v in sorted((run.get("results") or {}).items())
                       if k != metric and isinstance(v, float))
    status = run.get("status", "")
    if run.get("stopped_early_at"):
      status += f" (stopped early at step {run['stopped_early_at']})"
    lines.append(f"| {run['name']} | {_number(score(run))} | {others} | {status} | "
                 f"{'(best)' if run['name'] == summary['best'] else run['passed_over']} |")
  return "\n".join(lines) + "\n"


def as_json(summary):
  return json.dumps(summary, indent=2, sort_keys=True) + "\n"
