"""The paper's ablations at small scale: sentence task (Table 5), sharing (Table 4), E (Table 3).

    .venv/bin/python -m benchmarks.ablations --study sentence_task [--toy] [--seeds 2]
        [--work_dir /tmp/albert_ablations] [--report_dir benchmarks/ablations]
        [--hidden 256 --layers 4 --steps 2000 --batch 64 ...]

For every variant of the study and every seed, in this process and through the product's own
code paths:
1. pretraining data, once per work dir and corpus: `create_pretraining_data` on real English
   text, `--corpus=gutenberg` (NLTK's Gutenberg books, the default) or `--corpus=docstrings`
   (the standard library's docstrings, the quickstart's corpus), with ALBERT's 30k-piece
   SentencePiece model from ../shared/data (`--vocab=0`) or one of `--vocab` pieces trained on
   the training split. The books are cut into documents of consecutive paragraphs (at least
   2,000 characters each; the books' lines are the sentences; a docstring is a document of its
   sentences); one document in 8, drawn at random from all books (or modules), is held out
   for the intrinsic evaluation, and the rest are dealt into 4 files at random, so in both splits a block's random-document partners come from many books, as the
   original's corpus-wide pool gives them, and few chunks are a lone sentence. Each set is
   made twice: SOP-style (the default) and NSP-style (`--random_next_sentence`). The SOP-style
   eval set is made with `--pure_sop`: the original's rule pairs a lone-sentence chunk with a
   random document even in SOP data (10% of the training set here), and an NSP model would
   score on those;
2. `run_pretraining` (LAMB, warm-up, checkpoints) with the variant's config and data. The
   "none" variant trains MLM alone (`--sentence_loss_weight=0`);
3. the intrinsic evaluation of the final checkpoint, by `run_pretraining --do_eval` on the
   held-out documents: masked-LM accuracy and SOP accuracy on the SOP-style set, NSP accuracy
   on the NSP-style set (the same sentence head, read as a next-sentence classifier);
4. `run_classifier` from that checkpoint on SST-2 (accuracy on the full dev set, trained on a
   fixed subset of train) and STS-B (Pearson on dev, trained on all of train).

Every stage writes its result as JSON under the work dir when it finishes, and is skipped when
that file exists; an interrupted pretraining resumes from its latest checkpoint. A variant
with the same config, data, flags and seed in two studies is one run. The report
(`REPORT.md`, `results.json` and PNGs in --report_dir) is rewritten from all finished runs
after each one; a finished run recorded in results.json whose folder is not in the work dir
(a study carried on in a fresh work dir) is taken from there, not rerun.

Verdicts: for each claim of the paper (variant a against b on one metric) the difference of
the seed means is compared with a noise level. The noise level is the larger of two
quantities: twice the standard error of that difference across seeds, and twice the
evaluation's own sampling error. For an accuracy the sampling error is binomial, at p = 0.5,
over the examples evaluated; for a Pearson r it is (1 - r^2) / sqrt(n - 1). A claim "a > b"
agrees when the difference exceeds the noise level, disagrees when it is below minus the
noise level, and is "within noise" otherwise. A claim "a ~ b" agrees when the difference is
within the noise level.
"""

import argparse
import dataclasses
import datetime
import logging
import os
import sys

from benchmarks.ablations.claims import claims, judge
from benchmarks.ablations.data import (REPO, data_summary, evaluation_counts, prepare_data,
                                       prepare_glue)
from benchmarks.ablations.report import (load_results, machine_info, plots, rebuild_report,
                                         save_results, study_section, write_report)
from benchmarks.ablations.runs import run_variant
from benchmarks.ablations.variants import STUDIES, TOY, Scale, run_key, variants

logger = logging.getLogger("ablations")


def shared_runs(all_results, study, scale, data):
  """{run: (study, metrics)} of the other studies' finished runs at this scale and on this data:
  a variant two studies share (all-shared at the scale's E is in all three) is run once."""
  shared = {}
  for other, entry in all_results.items():
    if other == study or entry.get("scale") != scale or entry.get("data") != data:
      continue
    for runs in entry["variants"].values():
      for run in runs:
        if "reused_from" not in run:
          shared[run["run"]] = (other, run)
  return shared


def recorded_runs(all_results, study, scale, data, work):
  """{run: metrics} of this study's own runs in results.json whose folders are not in `work`
  (a study carried on in a fresh work dir, e.g. on another machine): taken, not rerun. A run
  whose folder is there resumes from its stage files instead."""
  entry = all_results.get(study, {})
  if entry.get("scale") != scale or entry.get("data") != data:
    return {}
  return {run["run"]: run for runs in entry["variants"].values() for run in runs
          if "reused_from" not in run and not os.path.exists(os.path.join(work, run["run"]))}


def run_study(study, scale, seeds, work, report_dir, command):
  os.makedirs(report_dir, exist_ok=True)
  sets = prepare_data(work, scale)
  glue = prepare_glue(work, scale)
  counts = evaluation_counts(sets, glue, scale)
  all_results = load_results(report_dir)
  data = data_summary(sets)
  shared = shared_runs(all_results, study, dataclasses.asdict(scale), data)
  recorded = recorded_runs(all_results, study, dataclasses.asdict(scale), data, work)
  results = {}
  entry = None
  for seed in seeds:
    for variant in variants(study, scale):
      key = os.path.join("runs", run_key(variant, scale, seed))
      if key in shared:
        run = dict(shared[key][1], reused_from=shared[key][0])
        logger.info("%s: %s, seed %d: the run of %s", study, variant.name, seed,
                    run["reused_from"])
      elif key in recorded:
        run = recorded[key]
        logger.info("%s: %s, seed %d: recorded in results.json", study, variant.name, seed)
      else:
        logger.info("%s: %s, seed %d", study, variant.name, seed)
        run = run_variant(variant, seed, scale, work, sets, glue)
      results.setdefault(variant.name, []).append(run)
      entry = {"command": command, "scale": dataclasses.asdict(scale), "seeds": list(seeds),
               "counts": counts, "data": data, "variants": results,
               "machine": machine_info(),
               "date": datetime.date.today().isoformat(),
               "seconds": sum(r["seconds"] for rs in results.values() for r in rs
                              if "reused_from" not in r),
               "claims": [dict(dataclasses.asdict(c), **judge(c, results, counts))
                          for c in claims(study)]}
      entry["plots"] = plots(study, results, report_dir)
      all_results[study] = entry
      save_results(report_dir, all_results)
      write_report(report_dir, all_results)
  return entry


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--study", choices=STUDIES, help="required unless --report_only")
  parser.add_argument("--report_only", action="store_true",
                      help="rewrite REPORT.md and the PNGs from --report_dir's results.json")
  parser.add_argument("--toy", action="store_true",
                      help="a tiny model and a few steps: the same outputs in minutes")
  parser.add_argument("--seeds", type=int, default=2, help="seeds per variant")
  parser.add_argument("--work_dir", default=None,
                      help="data, checkpoints and per-stage results (resumable); default "
                           "/tmp/albert_ablations[_toy]")
  parser.add_argument("--report_dir", default=None,
                      help="REPORT.md, results.json, PNGs; default benchmarks/ablations "
                           "(a toy run: <work_dir>/report)")
  for field in dataclasses.fields(Scale):
    parser.add_argument(f"--{field.name}", type=type(field.default), default=None,
                        help=f"scale (default {field.default}; --toy: {TOY.get(field.name)})")
  args = parser.parse_args(argv)
  values = dict(TOY) if args.toy else {}
  values.update({f.name: getattr(args, f.name) for f in dataclasses.fields(Scale)
                 if getattr(args, f.name) is not None})
  scale = Scale(**values)
  wrong = scale.problems() + ([f"--seeds={args.seeds}: must be >= 1"] if args.seeds < 1 else [])
  if wrong:
    parser.error("; ".join(wrong))
  work = args.work_dir or ("/tmp/albert_ablations_toy" if args.toy else "/tmp/albert_ablations")
  report_dir = args.report_dir or (os.path.join(work, "report") if args.toy
                                   else os.path.join(REPO, "benchmarks", "ablations"))
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
  if args.report_only:
    rebuild_report(report_dir)
    return 0
  if not args.study:
    parser.error("--study is required (one of " + ", ".join(STUDIES) + ")")
  os.makedirs(work, exist_ok=True)
  command = "python -m benchmarks.ablations " + " ".join(argv if argv is not None
                                                         else sys.argv[1:])
  entry = run_study(args.study, scale, range(1, args.seeds + 1), work, report_dir, command)
  print(study_section(args.study, entry))
  return 0


if __name__ == "__main__":
  sys.exit(main())
