"""SST-2 fine-tuning with and without `--trim_batches`: training examples/s and the dev
evaluation's time, run_classifier's own `Run` on the real GLUE files.

    .venv/bin/python -m benchmarks.trim_batches_bench --config=configs/tiny.json \
        --max_seq_length=128 --steps=200 --multiples=8,16,32

Each configuration runs in this process one after the other, in A/B then B/A order for each
repeat. Training: the steady examples/s of the loop after a first loop of `--warmup` steps
(which traces and compiles); evaluation: the second of two full dev passes (872 sentences).
A config with fewer positions than --max_seq_length gets that many (a tiny model is not a
trained one: only speed is measured). The feature caches are built once, before timing.
"""

import argparse
import json
import os
import tempfile
import time

from albert_tf.data import batch_length
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.training.run import Run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, os.pardir, "shared", "data")


def measure(args, config, cache, trim):
  """(training examples/s, dev evaluation seconds) of one run."""
  steps = args.warmup + args.steps
  options = ClassifierOptions(
      task_name="sst-2", data_dir=os.path.join(DATA, "glue", "SST-2"),
      output_dir=tempfile.mkdtemp(), albert_config_file=config,
      spm_model_file=os.path.join(DATA, "sentencepiece", "spiece.model"),
      max_seq_length=args.max_seq_length, do_train=True, do_eval=False,
      train_batch_size=args.batch, eval_batch_size=args.eval_batch, train_step=steps,
      save_checkpoints_steps=steps, iterations_per_loop=args.warmup, learning_rate=1e-5,
      cached_dir=cache, seed=1, log_every_seconds=3600, trim_batches=trim)
  run = Run(ClassificationTask(options))
  run.loop.restore_or_initialize()
  options.iterations_per_loop = args.steps  # after the first loop: one loop of the rest
  history = []
  run.loop.fit(run.task.train_dataset(), history=history)
  run.evaluate()  # traces the eval step
  start = time.perf_counter()
  run.evaluate()
  return history[-1]["examples_per_second"], time.perf_counter() - start


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(REPO, "configs", "tiny.json"))
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--eval_batch", type=int, default=8)
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=1)
  parser.add_argument("--multiples", default=str(batch_length.LENGTH_MULTIPLE),
                      help="Comma-separated multiples to round trimmed lengths up to.")
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
  # None: --notrim_batches; a number: trimmed, rounded up to that multiple.
  variants = [None] + [int(m) for m in args.multiples.split(",")]
  results = {v: [] for v in variants}
  for repeat in range(args.repeats):
    for variant in (variants if repeat % 2 == 0 else variants[::-1]):
      if variant is not None:
        batch_length.LENGTH_MULTIPLE = variant
      results[variant].append(measure(args, config_file, cache, variant is not None))
  print(f"| --trim_batches (multiple) | train examples/s | dev eval s | "
        f"({os.path.basename(args.config)}, seq {args.max_seq_length}, batch {args.batch}, "
        f"{args.steps} steps) |")
  print("|---|---|---|---|")
  for variant in variants:
    rates, evals = zip(*results[variant])
    trim = "off" if variant is None else f"on ({variant})"
    print(f"| {trim} | {sorted(rates)[len(rates) // 2]:.1f} | "
          f"{sorted(evals)[len(evals) // 2]:.2f} | {len(rates)} runs |")


if __name__ == "__main__":
  main()
