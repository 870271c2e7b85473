"""Where a pretraining step spends its time: TF profiler op times, summed by op type and part.

    .venv/bin/python -m benchmarks.profile_step [--side ours|peer] [--config configs/tiny.json]
        [--seq_length 64] [--precision float32|bfloat16] [--steps 2] [--recompute_grad]

Runs `--steps` steps of `benchmarks.train_step_bench`'s step function (after two warm-up steps)
under `tf.profiler`, then reads the trace (`*.xplane.pb`) and prints, per step, the op time
summed over TensorFlow's compute threads: by op type (MatMul, Einsum, Mul, ...) and by scope
(forward / gradient / optimizer x embeddings / attention / FFN / MLM head). Thread time, so on
2 cores it can be up to twice the step's wall time.
"""

import argparse
import collections
import glob
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from benchmarks import train_step_bench  # noqa: E402

PARTS = (("predictions", "mlm"), ("MaskedLM", "mlm"), ("embeddings", "embeddings"),
         ("attention", "attention"), ("ffn", "ffn"), ("intermediate", "ffn"),
         ("output", "ffn"))


def op_times(xplane_file, steps):
  """({op type: ms per step}, {(scope, part): ms per step}) from a profiler trace."""
  space = xplane_pb2.XSpace()
  with open(xplane_file, "rb") as f:
    space.ParseFromString(f.read())
  by_type, by_part = collections.Counter(), collections.Counter()
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith(("tf_Compute", "tf_inter")):
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if ":" not in name.replace("::", ""):  # executor bookkeeping nesting the op events
          continue
        ms = event.duration_ps / 1e9 / steps
        by_type[name.rsplit(":", 1)[1]] += ms
        scope = ("gradient" if name.startswith("gradient_tape") else
                 "optimizer" if name.startswith(("LAMB", "Adam")) else "forward")
        part = next((p for key, p in PARTS if key in name), "other")
        by_part[(scope, part)] += ms
  return by_type, by_part


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--side", choices=("ours", "peer"), default="ours")
  parser.add_argument("--config", default="configs/tiny.json")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seq_length", type=int, default=64)
  parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32")
  parser.add_argument("--steps", type=int, default=2)
  parser.add_argument("--top", type=int, default=15)
  parser.add_argument("--recompute_grad", action="store_true",
                      help="ours: blocks recomputed in the backward pass (--recompute_grad)")
  args = parser.parse_args(argv)
  if args.recompute_grad and args.side != "ours":
    parser.error("--recompute_grad is a flag of ours (--side=ours)")
  if args.precision == "bfloat16":
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  config = AlbertConfig.from_json_file(args.config)
  if args.side == "ours":
    step, _ = train_step_bench.ours_step(config, recompute_grad=args.recompute_grad)
  else:
    step, _ = train_step_bench.peer_step(config)
  batch = train_step_bench.make_batch(config, args.batch_size, args.seq_length, 20)
  for _ in range(2):
    float(step(batch))
  logdir = tempfile.mkdtemp(prefix="albert_profile_")
  tf.profiler.experimental.start(logdir)
  for _ in range(args.steps):
    float(step(batch))
  tf.profiler.experimental.stop()
  xplane = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1]
  by_type, by_part = op_times(xplane, args.steps)
  total = sum(by_type.values())
  print(f"{args.side}{' recompute_grad' if args.recompute_grad else ''} {args.precision}, "
        f"{args.config}, batch {args.batch_size} x seq "
        f"{args.seq_length}: {total:.1f} ms of op time per step (all threads); trace {logdir}")
  for title, counter in (("op type", by_type), ("scope, part", by_part)):
    print(f"\n{'ms/step':>10}  {'share':>6}  {title}")
    for key, ms in counter.most_common(args.top):
      print(f"{ms:10.1f}  {ms / total:6.1%}  {key if isinstance(key, str) else ' '.join(key)}")


if __name__ == "__main__":
  main()
