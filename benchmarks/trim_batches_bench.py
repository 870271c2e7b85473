"""Fine-tuning with and without `--trim_batches`: training examples/s and the dev evaluation's
time, run_classifier's own `Run` on the real GLUE files; optionally Model Garden's classifier
step at the fixed length and the matmul rate, in the same process.

    .venv/bin/python -m benchmarks.trim_batches_bench --config=configs/tiny.json \
        --max_seq_length=128 --steps=200 --multiples=8,16,32
    .venv/bin/python -m benchmarks.trim_batches_bench --config=configs/albert_base_v2.json \
        --task=sst-2 --steps=8 --warmup=2 --bucket --peer --matmul [--no_eval]

Each configuration runs in this process one after the other, in A/B then B/A order for each
repeat. Training: the steady examples/s of the loop after a first loop of `--warmup` steps
(which traces and compiles); evaluation: the second of two full dev passes. A config with fewer
positions than --max_seq_length gets that many (a tiny model is not a trained one: only speed
is measured; the results of both ways are equal to float32 rounding, tests/test_batch_length.py).
The feature caches are built once, before timing.

An epoch's time is the training split's examples over the measured examples/s (a few steps
measured and scaled: an ALBERT-base epoch of SST-2 on two cores takes hours). `--peer` times
Model Garden's `BertClassifier` on its `AlbertEncoder` (benchmarks.finetune_step_bench.peer_step:
AdamWeightDecay, clip 1, dropout 0.1) at max_seq_length, the only length its fixed-length input
has, on random full-length batches of the same size (its cost does not depend on the ids).
`--matmul` measures float32 [2048, 2048] matmul chains, and each row gets its rate on real
tokens: the split's mean real pieces per example times examples/s times the training FLOPs per
token (modeling.summary.flops_per_token, attention over the mean real length).
"""

import argparse
import json
import os
import tempfile
import time

import numpy as np

from albert_tf.data import batch_length
from albert_tf.data.classification.features import classification_dataset
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.training.run import Run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, os.pardir, "shared", "data")
TASK_DIRS = {"sst-2": "SST-2", "sts-b": "STS-B", "cola": "CoLA"}


def options(args, config, cache, trim, steps, bucket=False):
  return ClassifierOptions(
      task_name=args.task, data_dir=os.path.join(DATA, "glue", TASK_DIRS[args.task]),
      output_dir=tempfile.mkdtemp(), albert_config_file=config,
      spm_model_file=os.path.join(DATA, "sentencepiece", "spiece.model"),
      max_seq_length=args.max_seq_length, do_train=True, do_eval=False,
      train_batch_size=args.batch, eval_batch_size=args.eval_batch, train_step=steps,
      save_checkpoints_steps=steps, iterations_per_loop=args.warmup, learning_rate=1e-5,
      cached_dir=cache, seed=1, log_every_seconds=3600, trim_batches=trim,
      bucket_by_length=bucket)


def measure(args, config, cache, trim, bucket=False):
  """(training examples/s, dev evaluation seconds or None) of one run."""
  steps = args.warmup + args.steps
  o = options(args, config, cache, trim, steps, bucket)
  run = Run(ClassificationTask(o))
  run.loop.restore_or_initialize()

  class History(list):
    """Each loop's results; after the first loop (`--warmup` steps: tracing, first shapes),
    one loop of the rest, the timed one."""

    def append(self, results):
      super().append(results)
      o.iterations_per_loop = args.steps
  history = History()
  run.loop.fit(run.task.train_dataset(), history=history)
  assert len(history) == 2 and history[-1]["step"] == steps, history
  if args.no_eval:
    return history[-1]["examples_per_second"], None
  run.evaluate()  # traces the eval step
  start = time.perf_counter()
  run.evaluate()
  return history[-1]["examples_per_second"], time.perf_counter() - start


def measure_peer(args, config_file):
  """Model Garden's training examples/s at max_seq_length."""
  from albert_tf import AlbertConfig  # pylint: disable=import-outside-toplevel
  from benchmarks.finetune_step_bench import peer_step  # pylint: disable=import-outside-toplevel
  config = AlbertConfig.from_json_file(config_file)
  step, _ = peer_step("classifier", config, args.batch, args.max_seq_length)
  for _ in range(args.warmup):
    float(step())
  start = time.perf_counter()
  for _ in range(args.steps):
    float(step())
  return args.batch * args.steps / (time.perf_counter() - start)


def split_statistics(args, config, cache):
  """(training examples, mean real pieces per training example) of the task's train split."""
  task = ClassificationTask(options(args, config, cache, True, 1))
  examples, path = task.records("train")
  real = [float(np.sum(b["input_mask"])) for b in classification_dataset(
      path, args.max_seq_length, 4096, False, task.regression)]
  return len(examples), sum(real) / len(examples)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(REPO, "configs", "tiny.json"))
  parser.add_argument("--task", default="sst-2", choices=sorted(TASK_DIRS))
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--eval_batch", type=int, default=8)
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=1)
  parser.add_argument("--multiples", default=str(batch_length.LENGTH_MULTIPLE),
                      help="Comma-separated multiples to round trimmed lengths up to.")
  parser.add_argument("--bucket", action="store_true",
                      help="also time --bucket_by_length (multiple 16; its own batches)")
  parser.add_argument("--peer", action="store_true", help="also time Model Garden's step")
  parser.add_argument("--matmul", action="store_true", help="also measure the matmul rate")
  parser.add_argument("--no_eval", action="store_true", help="training only")
  parser.add_argument("--out", help="also write the figures as JSON here")
  args = parser.parse_args()
  work = tempfile.mkdtemp()
  with open(args.config, encoding="utf-8") as f:
    config = json.load(f)
  config["max_position_embeddings"] = max(config["max_position_embeddings"],
                                          args.max_seq_length)
  config_file = os.path.join(work, "config.json")
  with open(config_file, "w", encoding="utf-8") as f:
    json.dump(config, f)
  cache = os.path.join(work, "features")
  count, mean_real = split_statistics(args, config_file, cache)
  # None: --notrim_batches; a number: trimmed, rounded up to that multiple; "peer": Model Garden.
  variants = ([None] + [int(m) for m in args.multiples.split(",")]
              + (["bucket"] if args.bucket else []) + (["peer"] if args.peer else []))
  results = {v: [] for v in variants}
  for repeat in range(args.repeats):
    for variant in (variants if repeat % 2 == 0 else variants[::-1]):
      if variant == "peer":
        results[variant].append((measure_peer(args, config_file), None))
        continue
      if variant == "bucket":
        batch_length.LENGTH_MULTIPLE = 16
        results[variant].append(measure(args, config_file, cache, True, bucket=True))
        continue
      if variant is not None:
        batch_length.LENGTH_MULTIPLE = variant
      results[variant].append(measure(args, config_file, cache, variant is not None))
  matmul = None
  if args.matmul:
    from benchmarks.workers import matmul as matmul_rate  # pylint: disable=import-outside-toplevel
    matmul = matmul_rate({"precisions": ["float32"], "n": 2048, "iters": 8,
                          "repeats": 3})["float32"]["gflops_median"]
  from albert_tf import AlbertConfig  # pylint: disable=import-outside-toplevel
  from albert_tf.modeling.summary import flops_per_token  # pylint: disable=import-outside-toplevel
  _, train_flops = flops_per_token(AlbertConfig.from_json_file(config_file),
                                   max(1, round(mean_real)), 0)
  rows = []
  fixed = None
  for variant in variants:
    rates, evals = zip(*results[variant])
    rate = sorted(rates)[len(rates) // 2]
    evals = [e for e in evals if e is not None]
    fixed = rate if variant is None else fixed
    rows.append({
        "variant": {None: "--notrim_batches", "peer": "Model Garden (fixed length)",
                    "bucket": "--trim_batches --bucket_by_length"}.get(
                        variant, f"--trim_batches (multiple {variant})"),
        "examples_per_second": rate, "epoch_seconds": count / rate,
        "epoch_vs_fixed": fixed / rate, "real_token_gflops": rate * mean_real * train_flops / 1e9,
        "dev_eval_seconds": sorted(evals)[len(evals) // 2] if evals else None,
        "runs": len(rates)})
  print(f"{args.task}: {count} training examples, {mean_real:.1f} real pieces each on average; "
        f"{os.path.basename(args.config)}, seq {args.max_seq_length}, batch {args.batch}, "
        f"{args.steps} timed steps after {args.warmup}"
        + (f"; float32 matmul {matmul:.0f} GFLOP/s" if matmul else ""))
  print("| variant | train examples/s | epoch (scaled) | x fixed | real-token GFLOP/s | "
        "dev eval s |")
  print("|---|---|---|---|---|---|")
  for row in rows:
    evaluated = row["dev_eval_seconds"]
    print(f"| {row['variant']} | {row['examples_per_second']:.1f} | "
          f"{row['epoch_seconds'] / 60:.0f} min | {row['epoch_vs_fixed']:.2f} | "
          f"{row['real_token_gflops']:.0f}"
          + (f" ({row['real_token_gflops'] / matmul:.0%} of matmul)" if matmul else "")
          + f" | {'' if evaluated is None else f'{evaluated:.1f}'} |")
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump({"task": args.task, "config": os.path.basename(args.config),
                 "max_seq_length": args.max_seq_length, "batch": args.batch,
                 "steps": args.steps, "train_examples": count, "mean_real_pieces": mean_real,
                 "matmul_gflops": matmul, "rows": rows}, f, indent=2)


if __name__ == "__main__":
  main()
