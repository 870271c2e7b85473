"""Speed and memory of albert-tf against Model Garden, side by side in one run.

    .venv/bin/python -m benchmarks.run --suite quick|full|finetune [--out results.json]
        [--repeats N] [--only SUBSTR[,SUBSTR]] [--quiet_wait S]

The peer is tf-models-official's `networks.AlbertEncoder` + `layers.MaskedLM` + a Dense
sentence-order head + its `LAMB` (see `benchmarks/train_step_bench.py`), built from the same
albert_config.json and fed the same batch. Every measured configuration runs in its own
subprocess (`benchmarks/workers.py`), so each has its own peak memory and no state leaks
between them; this process imports no TensorFlow. Ours and the peer alternate (A/B, then B/A
in the next repeat), repeats are interleaved, medians are reported, and every ratio is between
figures of this same run.

What is measured (the suite picks the shapes, see SUITES):
  matmul   this machine's float32 and bfloat16 matmul rate (a chain of [n, n] products).
  train    one pretraining optimizer step per call (forward, backward, global-norm clip, LAMB),
           float32 and bfloat16 (Keras `mixed_bfloat16` policy, both sides), with and without
           `jit_compile`: seconds/step, sequences/s, tokens/s, model FLOPs utilisation.
  infer    latency of the exported encoder SavedModel's `serving_default` at batch 1 and 32:
           ours via `albert_tf.export.encoder.export_encoder`, the peer's encoder via
           `tf.saved_model.save` behind the same signature (pooled, sequence and stacked
           per-layer outputs, cast to float32), float32 and bfloat16, and float32 with the
           signature compiled by XLA on both sides (ours: `export_savedmodel.py --jit_compile`);
           "vs peer fp32" compares with the peer's plain float32 export.
  finetune (quick and finetune suites) one fine-tuning optimizer step per call of
           run_classifier's, run_ner's and run_squad's training loop against Model Garden's
           BertClassifier / BertTokenClassifier / BertSpanLabeler on its AlbertEncoder with its
           AdamWeightDecay (`benchmarks/finetune_step_bench.py`), dropout 0.1, float32 and
           bfloat16; "vs peer fp32" compares with the same job's float32 peer step.
  data     (full suite) `benchmarks/create_pretraining_data_bench.py`, SentencePiece mode, one
           worker, against Model Garden's create_pretraining_data.py, as its own subprocess.
  memory   each process's peak resident memory (VmHWM = ru_maxrss), TensorFlow included.

FLOPs: `albert_tf.modeling.summary.flops_per_token` counts 2 FLOPs per multiply-add in every
matmul of the forward pass (the E->H projection, L block applications of 4 H^2 + 2 H I weights
and 2 S H of attention per token, the MLM head at the masked positions, pooler and SOP) and a
training step as 3x the forward (the backward pass is two matmuls per forward matmul). The peer
computes the same function, so the same count applies to both. MFU = model FLOP/s / the matmul
rate of the same precision measured in this run.

Other processes distort the figures: before each run the harness waits (up to --quiet_wait s)
for the rest of the machine to use under a quarter of a core, and records how many cores the
rest used during the run ("others" in the table: the largest over a row's runs).
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.create_pretraining_data_bench import CpuMeter, machine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUIET_CORES = 0.25
SIDES = ("ours", "peer")
PRECISIONS = ("float32", "bfloat16")
# Encoder exports: a precision, optionally "xla" (signatures compiled by XLA, both sides).
EXPORTS = ("float32", "bfloat16", "float32 xla")

SUITES = {
    # A few minutes on 2 cores: configs/tiny.json (its max_position_embeddings is 64).
    "quick": {"config": "configs/tiny.json", "shape": "tiny", "batch": 8, "seq": 64,
              "predictions": 20, "steps": 10, "repeats": 1, "infer_seq": 64,
              "infer_batches": [1, 32], "calls": 20, "matmul_n": 2048, "matmul_iters": 4,
              "data": False, "kinds": ("train", "infer", "finetune"),
              "finetune": {"classifier": [64, 8], "tagger": [64, 8], "squad": [64, 8]}},
    # The shapes: ALBERT-base at seq 128 (about 20-25 min per repeat on 2 cores).
    "full": {"config": "configs/albert_base_v2.json", "shape": "base", "batch": 8, "seq": 128,
             "predictions": 20, "steps": 3, "repeats": 2, "infer_seq": 128,
             "infer_batches": [1, 32], "calls": 3, "matmul_n": 2048, "matmul_iters": 8,
             "data": True, "kinds": ("train", "infer")},
    # Fine-tuning steps at the jobs' shapes, ALBERT-base: run_classifier and run_ner at seq 128
    # batch 32, run_squad at seq 384 (batch 8 here, to bound the suite's time: 3,072 tokens a
    # step against the others' 4,096). About 15 minutes per repeat on 2 cores.
    "finetune": {"config": "configs/albert_base_v2.json", "shape": "base", "batch": 32,
                 "seq": 128, "predictions": 0, "steps": 3, "repeats": 1, "matmul_n": 2048,
                 "matmul_iters": 8, "data": False, "kinds": ("finetune",),
                 "finetune": {"classifier": [128, 32], "tagger": [128, 32], "squad": [384, 8]}},
}


def run_worker(spec, meter, quiet_wait, timeout, log_path):
  """Runs one worker subprocess; returns its RESULT dict plus wall, CPU and others' cores."""
  waited, _ = meter.wait_quiet(quiet_wait) if quiet_wait > 0 else (0.0, None)
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
  argv = [sys.executable, "-m", "benchmarks.workers", json.dumps(spec)]
  busy0, cpu0 = meter.machine_busy_seconds(), meter.children_seconds()
  start = time.perf_counter()
  with open(log_path, "wb") as log:
    proc = subprocess.run(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env,
                          timeout=timeout, check=False)
  wall = time.perf_counter() - start
  busy1, cpu1 = meter.machine_busy_seconds(), meter.children_seconds()
  with open(log_path, "rb") as log:
    text = log.read().decode("utf-8", "replace")
  results = [line[len("RESULT "):] for line in text.splitlines() if line.startswith("RESULT ")]
  if proc.returncode != 0 or not results:
    raise RuntimeError(f"worker {spec} failed (rc={proc.returncode}):\n{text[-3000:]}")
  result = json.loads(results[-1])
  cpu = cpu1 - cpu0
  result.update(wall_seconds=wall, cpu_seconds=cpu, waited_seconds=waited,
                others_cores=None if busy0 is None else max(0.0, (busy1 - busy0 - cpu) / wall))
  return result


def plan(suite, tmp):
  """The measured configurations: [(row name, {side: worker spec})], plus export specs."""
  s = suite
  config = os.path.join(REPO, s["config"])
  rows = []
  for task, (seq, batch) in s.get("finetune", {}).items() if "finetune" in s["kinds"] else ():
    for precision in PRECISIONS:
      rows.append((f"finetune {task} {s['shape']} {precision}",
                   {side: {"kind": "finetune", "side": side, "config": config, "task": task,
                           "seq": seq, "batch": batch, "precision": precision,
                           "steps": s["steps"]} for side in SIDES}))
  if "train" not in s["kinds"]:
    return rows, {}  # (the suites that train also serve)
  for precision in PRECISIONS:
    for jit in (False, True):
      name = f"train {s['shape']} {precision}{' jit' if jit else ''}"
      rows.append((name, {side: {"kind": "train", "side": side, "config": config,
                                 "batch": s["batch"], "seq": s["seq"],
                                 "predictions": s["predictions"], "precision": precision,
                                 "jit": jit, "steps": s["steps"]} for side in SIDES}))
  # Ours with block recomputation (--recompute_grad) against the peer's plain float32 step.
  rows.append((f"train {s['shape']} float32 recompute",
               {side: {"kind": "train", "side": side, "config": config, "batch": s["batch"],
                       "seq": s["seq"], "predictions": s["predictions"],
                       "precision": "float32", "jit": False, "steps": s["steps"],
                       "recompute": side == "ours"} for side in SIDES}))
  exports = {side: {"kind": "export", "side": side, "config": config,
                    "exports": {v: os.path.join(tmp, f"{side}_{v.replace(' ', '_')}")
                                for v in EXPORTS}}
             for side in SIDES}
  for variant in EXPORTS:
    rows.append((f"infer {s['shape']} {variant}",
                 {side: {"kind": "infer", "side": side, "config": config,
                         "dir": exports[side]["exports"][variant], "seq": s["infer_seq"],
                         "batches": s["infer_batches"], "calls": s["calls"]}
                  for side in SIDES}))
  return rows, exports


def summarize(suite, runs, matmul_runs):
  """Medians and ratios per row; returns (matmul rates, rows)."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.summary import flops_per_token  # pylint: disable=g-import-not-at-top
  rates = {p: statistics.median(r[p]["gflops_best"] for r in matmul_runs) for p in PRECISIONS}
  config = AlbertConfig.from_json_file(os.path.join(REPO, suite["config"]))
  _, per_token = flops_per_token(config, suite["seq"], suite["predictions"])
  tokens = suite["batch"] * suite["seq"]
  step_gflop = per_token * tokens / 1e9
  rows = {}
  for name, sides in runs.items():
    row = {"kind": name.split()[0]}
    for side, results in sides.items():
      if not results:
        continue
      peak = max(r["vmhwm_mib"] or r["ru_maxrss_mib"] for r in results)
      others = [r["others_cores"] for r in results if r["others_cores"] is not None]
      entry = {"runs": len(results), "peak_mib": peak,
               "others_cores": max(others) if others else None}
      if row["kind"] == "finetune":
        seq, batch = results[0]["seq"], results[0]["batch"]
        seconds = statistics.median(t for r in results for t in r["step_seconds"])
        gflops = flops_per_token(config, seq, 0)[1] * batch * seq / 1e9 / seconds
        entry.update(seconds_per_step=seconds, sequences_per_second=batch / seconds,
                     gflops=gflops, mfu=gflops / rates[results[0]["precision"]],
                     parameters=results[0]["parameters"], last_loss=results[-1]["last_loss"],
                     seq=seq, batch=batch)
      elif row["kind"] == "train":
        seconds = statistics.median(t for r in results for t in r["step_seconds"])
        precision = results[0]["precision"] if "precision" in results[0] else name.split()[2]
        gflops = step_gflop / seconds
        entry.update(seconds_per_step=seconds, sequences_per_second=suite["batch"] / seconds,
                     tokens_per_second=tokens / seconds, gflops=gflops,
                     mfu=gflops / rates[precision], parameters=results[0]["parameters"],
                     last_loss=results[-1]["last_loss"])
      else:
        entry["latency_ms"] = {b: statistics.median(r[b]["latency_ms"] for r in results)
                               for b in results[0] if b.isdigit()}
      row[side] = entry
    rows[name] = row
  base = rows.get(f"train {suite['shape']} float32", {}).get("peer")
  base_infer = rows.get(f"infer {suite['shape']} float32", {}).get("peer")
  for name, row in rows.items():
    ours, peer = row.get("ours"), row.get("peer")
    if not (ours and peer):
      continue
    row["memory_ours_over_peer"] = ours["peak_mib"] / peer["peak_mib"]
    if row["kind"] == "finetune":  # against the same job's peer step, and its float32 one
      row["speed_ours_over_peer"] = peer["seconds_per_step"] / ours["seconds_per_step"]
      fp32 = rows.get(name.rsplit(" ", 1)[0] + " float32", {}).get("peer")
      if fp32:
        row["speed_ours_over_peer_float32"] = fp32["seconds_per_step"] / ours["seconds_per_step"]
    elif row["kind"] == "train":
      row["speed_ours_over_peer"] = peer["seconds_per_step"] / ours["seconds_per_step"]
      if base:
        row["speed_ours_over_peer_float32"] = base["seconds_per_step"] / ours["seconds_per_step"]
    else:
      row["latency_ours_over_peer"] = {b: ours["latency_ms"][b] / peer["latency_ms"][b]
                                       for b in ours["latency_ms"]}
      if base_infer:  # against the peer's plain float32 export (what it ships)
        row["latency_ours_over_peer_float32"] = {
            b: ours["latency_ms"][b] / base_infer["latency_ms"][b] for b in ours["latency_ms"]}
  return rates, rows, step_gflop


def _fmt(x, f):
  return "-" if x is None else format(x, f)


def _step_lines(rows, kind, shape):
  """Table lines of the step rows of `kind`: the row's name, the side, `shape(entry)` cells,
  then time, rate, FLOPs, MFU, memory, the ratios and the others' cores."""
  lines = []
  for name, row in rows.items():
    if row["kind"] != kind:
      continue
    for side in SIDES:
      e = row.get(side)
      if not e:
        continue
      mine = side == "ours"
      lines.append("| " + " | ".join([
          name if mine else "", side, *shape(e), f"{e['seconds_per_step']:.3f}",
          f"{e['sequences_per_second']:.1f}", *([f"{e['tokens_per_second']:.0f}"]
                                                if kind == "train" else []),
          f"{e['gflops']:.1f}", f"{e['mfu']:.0%}", f"{e['peak_mib']:.0f}",
          _fmt(row.get("speed_ours_over_peer"), ".2f") + "x" if mine else "1.00x",
          _fmt(row.get("speed_ours_over_peer_float32"), ".2f") + "x" if mine else "",
          _fmt(row.get("memory_ours_over_peer"), ".2f") + "x" if mine else "1.00x",
          _fmt(e["others_cores"], ".2f")]) + " |")
  return lines


def format_tables(suite, rates, rows, step_gflop, data):
  s = suite
  fmt = _fmt
  lines = [f"matmul rate (this run): float32 {rates['float32']:.1f} GFLOP/s, bfloat16 "
           f"{rates['bfloat16']:.1f} GFLOP/s ({s['matmul_n']}^2 chains)"]
  kinds = {row["kind"] for row in rows.values()}
  if "finetune" in kinds:
    lines += ["", f"fine-tuning step: {s['config']}, dropout 0.1, AdamW (3 x forward matmul "
              "FLOPs)", "",
              "| config | side | seq x batch | s/step | seq/s | GFLOP/s | MFU | peak MiB | "
              "speed vs peer | vs peer fp32 | memory vs peer | others |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += _step_lines(rows, "finetune", lambda e: [f"{e['seq']} x {e['batch']}"])
  if "train" in kinds:
    lines += ["", f"train step: {s['config']}, batch {s['batch']} x seq {s['seq']}, "
              f"{s['predictions']} predictions; {step_gflop:.1f} GFLOP/step "
              "(3 x forward matmul FLOPs)", "",
              "| config | side | s/step | seq/s | tokens/s | GFLOP/s | MFU | peak MiB | "
              "speed vs peer | vs peer fp32 | memory vs peer | others |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += _step_lines(rows, "train", lambda e: [])
  if "infer" in kinds:
    lines += ["", f"encoder inference (SavedModel serving_default), seq {s['infer_seq']}:", "",
              "| config | side | batch | latency ms | latency vs peer | vs peer fp32 | peak MiB "
              "| memory vs peer | others |", "|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
      if row["kind"] != "infer":
        continue
      for side in SIDES:
        e = row.get(side)
        if not e:
          continue
        for b, ms in e["latency_ms"].items():
          mine = side == "ours"
          lines.append("| " + " | ".join([
              name, side, b, f"{ms:.1f}",
              fmt(row.get("latency_ours_over_peer", {}).get(b), ".2f") + "x" if mine else "1.00x",
              fmt(row.get("latency_ours_over_peer_float32", {}).get(b), ".2f") + "x"
              if mine else "",
              f"{e['peak_mib']:.0f}",
              fmt(row.get("memory_ours_over_peer"), ".2f") + "x" if mine else "1.00x",
              fmt(e["others_cores"], ".2f")]) + " |")
  if data:
    lines += ["", "create_pretraining_data (SentencePiece, benchmarks/"
              "create_pretraining_data_bench.py):", "",
              "| config | median wall s | inst/s | inst/s vs peer | others |",
              "|---|---|---|---|---|"]
    for name, r in data["runs"].items():
      if r.get("seconds"):
        lines.append(f"| {name} | {r['median_seconds']:.2f} | {r['instances_per_second']:.0f} "
                     f"| {fmt(r.get('ratio_vs_peer_instances_per_second'), '.2f')}x "
                     f"| {fmt(r.get('max_others_cores'), '.2f')} |")
  return "\n".join(lines)


def row_wanted(name, item):
  """Whether row `name` is asked for by one `--only` item: a substring, or with a trailing
  '$' the whole name."""
  return name == item[:-1] if item.endswith("$") else item in name


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--suite", choices=sorted(SUITES), default="quick")
  parser.add_argument("--out", help="also write the results as JSON here")
  parser.add_argument("--repeats", type=int, help="interleaved repeats (suite default)")
  parser.add_argument("--steps", type=int, help="timed steps per train run (suite default)")
  parser.add_argument("--only", default="",
                      help="comma list of substrings: measure only the rows whose name has one "
                           "(e.g. 'float32', 'train', 'infer'); an item ending in '$' must be "
                           "the whole name ('train base bfloat16$' leaves out its jit row); "
                           "matmul always runs")
  parser.add_argument("--no_data", action="store_true", help="skip create_pretraining_data")
  parser.add_argument("--quiet_wait", type=float, default=20.0,
                      help="before each run wait up to this long for the machine to be idle")
  parser.add_argument("--timeout", type=float, default=900.0, help="per worker, seconds")
  args = parser.parse_args(argv)
  suite = dict(SUITES[args.suite])
  for key in ("repeats", "steps"):
    if getattr(args, key):
      suite[key] = getattr(args, key)
  meter = CpuMeter()
  tmp = tempfile.mkdtemp(prefix="albert_bench_")
  started = time.time()
  load_before = os.getloadavg()
  try:
    rows, exports = plan(suite, tmp)
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    rows = [(n, sides) for n, sides in rows if not wanted or any(row_wanted(n, w) for w in wanted)]
    log = lambda i: os.path.join(tmp, f"worker{i}.log")
    count = [0]

    def run(spec, label):
      count[0] += 1
      result = run_worker(spec, meter, args.quiet_wait, args.timeout, log(count[0]))
      print(f"  {label}: {result['wall_seconds']:.0f}s wall, peak "
            f"{result['vmhwm_mib'] or result['ru_maxrss_mib']:.0f} MiB, others "
            f"{result['others_cores'] if result['others_cores'] is not None else float('nan'):.2f}"
            " cores", flush=True)
      return result

    if any(n.startswith("infer") for n, _ in rows):
      for side, spec in exports.items():
        run(spec, f"export {side}")
    matmul_spec = {"kind": "matmul", "precisions": list(PRECISIONS), "n": suite["matmul_n"],
                   "iters": suite["matmul_iters"], "repeats": 3}
    runs = {name: {side: [] for side in SIDES} for name, _ in rows}
    matmul_runs = []
    for rep in range(suite["repeats"]):
      print(f"repeat {rep + 1}/{suite['repeats']}", flush=True)
      matmul_runs.append(run(matmul_spec, "matmul"))
      for i, (name, sides) in enumerate(rows):
        order = SIDES if (rep + i) % 2 == 0 else SIDES[::-1]  # A/B, then B/A
        for side in order:
          result = run(sides[side], f"{name} {side}")
          if "step_seconds" in result:
            result.update(precision=sides[side]["precision"], seq=sides[side]["seq"],
                          batch=sides[side]["batch"])
            print(f"    {statistics.median(result['step_seconds']):.3f} s/step", flush=True)
          runs[name][side].append(result)
    rates, summary, step_gflop = summarize(suite, runs, matmul_runs)

    data = None
    if suite["data"] and not args.no_data and (not wanted or any(w in "data" for w in wanted)):
      print("create_pretraining_data", flush=True)
      data_out = os.path.join(tmp, "data.json")
      subprocess.run([sys.executable, "-m", "benchmarks.create_pretraining_data_bench",
                      "--repeats", str(suite["repeats"]), "--only",
                      "ours spm workers=1,peer spm", "--out", data_out], cwd=REPO, check=True)
      with open(data_out, encoding="utf-8") as f:
        data = json.load(f)

    print()
    print(format_tables(suite, rates, summary, step_gflop, data))
    load_after = os.getloadavg()
    print(f"\nrepeats {suite['repeats']}, {time.time() - started:.0f}s in all; load average "
          f"before/after {load_before[0]:.2f}/{load_after[0]:.2f}")
    if args.out:
      results = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                 "suite": args.suite, "settings": suite, "machine": machine(),
                 "matmul_gflops": rates, "train_step_gflop": step_gflop, "rows": summary,
                 "raw": {"matmul": matmul_runs, "runs": runs}, "data": data,
                 "load_average_1min": {"before": load_before[0], "after": load_after[0]},
                 "seconds": time.time() - started}
      with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
