"""Writes BENCHMARKS.md, the current headline figures, from benchmarks/results/summary.json.

    .venv/bin/python -m benchmarks.render_summary           # rewrites BENCHMARKS.md
    .venv/bin/python -m benchmarks.render_summary --check   # exit 1 if BENCHMARKS.md differs

The figures are entered in summary.json by hand from a benchmark's output, as they are quoted in
docs/benchmarks-history.md (every measurement, in the order it was made); this page only lays
them out, so the summary and its data cannot drift apart (tests/test_repository.py renders it).
"""

import argparse
import json
import pathlib
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUMMARY = ROOT / "benchmarks" / "results" / "summary.json"
PAGE = ROOT / "BENCHMARKS.md"

INTRO = """\
# Benchmarks

The current headline figures, one table per CPU kind measured, each against its peer measured in
the same run: Model Garden (tf-models-official 2.20.0) for training steps and exports, our own
SavedModel for ONNX Runtime, the same signature in-process for `serve.py` over HTTP. Absolute
figures depend on the machine and on what else it runs; the ratios are the figures to quote.
Every measurement, with its machine, method, profile and what was tried and dropped, is in
[docs/benchmarks-history.md](docs/benchmarks-history.md), oldest first.

This page is rendered from [benchmarks/results/summary.json](benchmarks/results/summary.json)
by `.venv/bin/python -m benchmarks.render_summary`; edit the data, not the page.

## How to reproduce
On an otherwise idle machine, run the row's command (the keys are listed at the end) from the
repository root; each prints Markdown tables with the peer beside ours, and `benchmarks.run`
writes JSON with `--out`. What each harness measures and how:
[benchmarks/README.md](benchmarks/README.md). Enter the new figures in `summary.json` and render
this page.

Columns: ratios are the peer's time over ours for steps (above 1: we are faster) and ours over
the peer's for latency and size (below 1: we are faster or smaller); MFU is model FLOP/s over
the same run's matmul probe in the same precision, ours / the peer's. A commit marked `rec.` is
the one that recorded the figure, where the history names no commit for the code measured.
"""

def _prose(text):
  return textwrap.fill(text, width=96, break_on_hyphens=False, break_long_words=False)


HEADER = ("| figure | ours | peer | ratio | MFU | date | commit | command |\n"
          "|---|---|---|---|---|---|---|---|")


def _row(cells):
  return "| " + " | ".join(cells) + " |"


def _command(keys):
  return ", ".join(f"`{key.strip()}`" for key in keys.split(","))


def render(summary):
  """The page's text for `summary` (summary.json's dict)."""
  out = [INTRO]
  for kind in summary["kinds"]:
    out += [f"## {kind['name']}", _prose(kind["machine"]), "", HEADER]
    out += [_row(row[:7] + [_command(row[7])]) for row in kind["rows"]]
    out.append("")
  targets = summary["targets"]
  out += ["## Where the performance targets stand", f"From {targets['source']}.", "",
          _row(targets["columns"]), _row(["---"] * len(targets["columns"]))]
  out += [_row(row) for row in targets["rows"]]
  out += ["", _prose(targets["why"]), "", "## Earlier figures still current",
          "| figure | ours | peer | ratio | MFU | date | commit | command | machine |",
          "|---|---|---|---|---|---|---|---|---|"]
  out += [_row(row[:7] + [_command(row[7]), row[8]]) for row in summary["other"]]
  out += ["", "## Commands", ""]
  for key, command in summary["commands"].items():
    command, remark = command if isinstance(command, list) else (command, "")
    out.append(f"- `{key}`: `{command}`" + (f" ({remark})" if remark else ""))
  return "\n".join(out) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
  args = parser.parse_args(argv)
  page = render(json.loads(SUMMARY.read_text()))
  if args.check:
    if PAGE.read_text() != page:
      print(f"{PAGE.name} differs from the render of {SUMMARY.relative_to(ROOT)}: run python -m "
            "benchmarks.render_summary", file=sys.stderr)
      return 1
    return 0
  PAGE.write_text(page)
  return 0


if __name__ == "__main__":
  sys.exit(main())
