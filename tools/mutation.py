"""Mutation testing: mutmut 3.8.1 over what setup.cfg's [mutmut] section names, then the score
of each module.

    .venv/bin/pip install mutmut==3.8.1     # not in requirements.txt: a developer's tool
    .venv/bin/python -m tools.mutation      # over an hour on two cores, one worker (below)
    .venv/bin/python -m tools.mutation 'albert_tf.tokenization.tokenizer*'  # one module's
    .venv/bin/python -m tools.mutation --incremental  # reuse mutmut's results where it may
    .venv/bin/python -m tools.mutation --report   # the last run's scores, nothing rerun

Measured on two EPYC cores beside other work: the metrics, masking and pairs about ten minutes,
the tokenizer's 469 mutants about half an hour, the TF1 name map's about an hour (each of its
mutants builds tiny models and loads checkpoints).

Not in CI: it is slow, and its answer (which mutants survive) is for a person to read. A
survivor is either a test to write or an equivalent mutant, marked `# pragma: no mutate` with
the reason on the same line. mutmut writes its copy of the project to `mutants/` (ignored by
git); `mutmut show <name>` prints one mutant's diff, `mutmut results` the survivors.
docs/testing.md keeps the scores.
"""

import argparse
import collections
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _mutmut(*args, capture=False):
  command = [os.path.join(os.path.dirname(sys.executable), "mutmut"), *args]
  # The tests run in mutmut's copy (mutants/), one folder below ../shared/data's usual place.
  env = dict(os.environ)
  env.setdefault("ALBERT_TF_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
  try:
    return subprocess.run(command, cwd=ROOT, check=True, text=True, env=env,
                          stdout=subprocess.PIPE if capture else None).stdout
  except FileNotFoundError:
    sys.exit(f"mutmut is not installed beside {sys.executable}: pip install mutmut==3.8.1")


def scores(results_text):
  """{module: Counter(status)} from `mutmut results --all true` lines
  ("    albert_tf.metrics.ner.x_get_entities__mutmut_3: survived")."""
  by_module = collections.defaultdict(collections.Counter)
  for line in results_text.splitlines():
    name, _, status = line.strip().rpartition(": ")
    if "__mutmut_" in name:
      by_module[name.rpartition(".x")[0]][status] += 1
  return by_module


def table(by_module):
  """A Markdown table: each module's killed / total and the share killed."""
  lines = ["| module | killed / total | killed | survived | no tests |", "|---|---|---|---|---|"]
  for module in sorted(by_module):
    counts = by_module[module]
    total = sum(counts.values())
    killed = counts["killed"] + counts["timeout"]  # mutmut counts a timeout as killed
    lines.append(f"| {module} | {killed} / {total} | "
                 f"{100 * killed / total:.1f}% | {counts['survived']} | "
                 f"{counts['no tests']} |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--report", action="store_true", help="the last run's scores only")
  parser.add_argument("--incremental", action="store_true",
                      help="keep mutants/ and mutmut's results of functions that did not change "
                           "(a changed test alone does not rerun a survivor: the scores to "
                           "report come from a fresh run)")
  parser.add_argument("names", nargs="*",
                      help="mutant names to run (mutmut's globs, e.g. 'albert_tf.metrics.ner*'); "
                           "all by default")
  args = parser.parse_args()
  if not args.report and not args.incremental and not args.names:
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
  if not args.report:
    # One worker: the machines this runs on are shared.
    _mutmut("run", "--max-children", "1", *args.names)
  print(table(scores(_mutmut("results", "--all", "true", capture=True))))


if __name__ == "__main__":
  main()
