"""bfloat16 against float32: the training-loss curves of the same real pretraining run.

    .venv/bin/python -m benchmarks.loss_curves [--steps 300] [--out_dir runs/loss_curves]

Builds the quickstart's data (stdlib docstrings -> 4k SentencePiece -> seq-128 SOP/MLM
instances), then pretrains the quickstart's small ALBERT (E 64, H 128, 4 layers, no dropout)
twice from the same initial weights and the same batches, once in float32 and once with
`--mixed_precision bfloat16`, each in its own process. It reports the loss every
`--log_every` steps for both, the largest relative gap after the first `--skip` steps, step
times, and writes `loss_curves.png` and `loss_curves.json`.
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train(args, precision):
  """One run (in this process): returns the history of run_pretraining and its wall time."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf.cli.runs import run_pretraining  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import PretrainingOptions  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(0)  # the same initial weights in both runs
  with open(os.path.join(args.out_dir, "shards.json")) as f:
    shards = json.load(f)
  history = []
  start = time.time()
  run_pretraining(PretrainingOptions(
      albert_config_file=os.path.join(args.out_dir, "albert_config.json"),
      input_file=",".join(shards[:-1]), output_dir=os.path.join(args.out_dir, precision),
      do_train=True, max_seq_length=128, max_predictions_per_seq=20,
      train_batch_size=args.batch_size, num_train_steps=args.steps,
      num_warmup_steps=max(1, args.steps // 10), learning_rate=args.learning_rate,
      save_checkpoints_steps=args.steps, iterations_per_loop=args.log_every, seed=0,
      log_every_seconds=30, mixed_precision=precision), history=history)
  return {"history": history, "seconds": time.time() - start}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out_dir", default=os.path.join(REPO, "runs", "loss_curves"))
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--log_every", type=int, default=10)
  parser.add_argument("--skip", type=int, default=50,
                      help="steps left out of the gap (the first, steepest part)")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=0.005)
  parser.add_argument("--worker", choices=["float32", "bfloat16"], help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if args.worker:
    result = train(args, args.worker)
    with open(os.path.join(args.out_dir, args.worker + ".json"), "w") as f:
      json.dump(result, f)
    return 0

  from albert_tf.cli import quickstart  # pylint: disable=g-import-not-at-top
  os.makedirs(args.out_dir, exist_ok=True)
  _, shards = quickstart.build_data(args.out_dir)
  quickstart.small_config(4000, 128).to_json_file(os.path.join(args.out_dir,
                                                               "albert_config.json"))
  with open(os.path.join(args.out_dir, "shards.json"), "w") as f:
    json.dump(shards, f)
  runs = {}
  for precision in ("float32", "bfloat16"):
    command = [sys.executable, "-m", "benchmarks.loss_curves", "--worker", precision,
               "--out_dir", args.out_dir, "--steps", str(args.steps),
               "--log_every", str(args.log_every), "--batch_size", str(args.batch_size),
               "--learning_rate", str(args.learning_rate)]
    subprocess.run(command, cwd=REPO, check=True)
    with open(os.path.join(args.out_dir, precision + ".json")) as f:
      runs[precision] = json.load(f)

  fp32, bf16 = (runs[p]["history"] for p in ("float32", "bfloat16"))
  print(f"\nstep  float32 loss  bfloat16 loss  gap")
  gaps = []
  for a, b in zip(fp32, bf16):
    gap = (b["loss"] - a["loss"]) / a["loss"]
    if a["step"] > args.skip:
      gaps.append(abs(gap))
    print(f"{a['step']:>4}  {a['loss']:>12.4f}  {b['loss']:>13.4f}  {gap:+.2%}")
  mean_gap = sum(gaps) / len(gaps)
  print(f"after step {args.skip}: largest |gap| {max(gaps):.2%}, mean |gap| {mean_gap:.2%}; "
        f"wall: float32 {runs['float32']['seconds']:.0f}s, bfloat16 "
        f"{runs['bfloat16']['seconds']:.0f}s")
  summary = {"steps": args.steps, "skip": args.skip, "largest_gap": max(gaps),
             "mean_gap": mean_gap, "runs": runs}
  with open(os.path.join(args.out_dir, "loss_curves.json"), "w") as f:
    json.dump(summary, f, indent=1)

  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7, 4))
  for name, history in (("float32", fp32), ("bfloat16 (mixed)", bf16)):
    ax.plot([h["step"] for h in history], [h["loss"] for h in history], label=name)
  ax.set_xlabel("step")
  ax.set_ylabel(f"training loss (mean of {args.log_every} steps)")
  ax.legend()
  fig.tight_layout()
  fig.savefig(os.path.join(args.out_dir, "loss_curves.png"), dpi=100)
  return 0


if __name__ == "__main__":
  sys.exit(main())
