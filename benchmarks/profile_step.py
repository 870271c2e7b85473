"""Where a pretraining step spends its time: TF profiler op times, summed by op type and part.

    .venv/bin/python -m benchmarks.profile_step [--side ours|peer] [--config configs/tiny.json]
        [--seq_length 64] [--precision float32|bfloat16] [--steps 2] [--recompute_grad]
        [--ops Cast,Mul]

Runs `--steps` steps of `benchmarks.train_step_bench`'s step function (after two warm-up steps)
under `tf.profiler`, then reads the trace (`*.xplane.pb`) and prints, per step, the op time
summed over TensorFlow's compute threads: by op type (MatMul, Einsum, Mul, ...) and by scope
(forward / gradient / optimizer x embeddings / attention / FFN / MLM head), and the share of
matrix products in it. `--ops` breaks the named op types down by op name (layer and application
numbers folded, so the L uses of a shared block add up). Thread time, so on 2 cores it can be
up to twice the step's wall time.
"""

import argparse
import collections
import glob
import os
import re
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
MATMULS = ("MatMul", "BatchMatMul", "Einsum")  # op types whose name contains one of these


# XLA-compiled functions (the training GELU and LayerNorm) run as one asynchronous launch with
# no op event of its own; their time is in XLA's executor events, nested in one another.
XLA_EVENT = re.compile(r"^(ThunkExecutor::Execute|call(\.\d+)?)$")


def op_events(xplane_file):
  """(op name, op type, duration ms) of every op a profiler trace timed on TF's threads; the
  outermost XLA executor events count as op type "XLA" (name "xla")."""
  space = xplane_pb2.XSpace()
  with open(xplane_file, "rb") as f:
    space.ParseFromString(f.read())
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith(("tf_Compute", "tf_inter")):
        continue
      xla_until = -1  # the end of the XLA event being inside which nests an event
      for event in sorted(line.events, key=lambda e: e.offset_ps):
        name = plane.event_metadata[event.metadata_id].name
        if XLA_EVENT.match(name):
          if event.offset_ps >= xla_until:
            xla_until = event.offset_ps + event.duration_ps
            yield "xla", "XLA", event.duration_ps / 1e9
          continue
        if ":" not in name.replace("::", ""):  # executor bookkeeping nesting the op events
          continue
        op_name, op_type = name.rsplit(":", 1)
        yield op_name, op_type, event.duration_ps / 1e9


def op_times(xplane_file, steps):
  """({op type: ms per step}, {(scope, part): ms per step}) from a profiler trace."""
  by_type, by_part = collections.Counter(), collections.Counter()
  for name, op_type, ms in op_events(xplane_file):
    by_type[op_type] += ms / steps
    scope = ("gradient" if name.startswith("gradient_tape") else
             "optimizer" if name.startswith(("LAMB", "Adam")) else
             "XLA (GELU, LayerNorm: forward and gradient)" if name == "xla" else "forward")
    part = next((p for key, p in PARTS if key in name), "other")
    by_part[(scope, part)] += ms / steps
  return by_type, by_part


def ops_by_name(xplane_file, steps, op_types):
  """{(op type, op name with its numbers folded to N): ms per step} for `op_types`."""
  found = collections.Counter()
  for name, op_type, ms in op_events(xplane_file):
    if op_type in op_types:
      found[(op_type, re.sub(r"_\d+", "_N", name))] += ms / steps
  return found


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--side", choices=("ours", "peer"), default="ours")
  parser.add_argument("--config", default="configs/tiny.json")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seq_length", type=int, default=64)
  parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32")
  parser.add_argument("--steps", type=int, default=2)
  parser.add_argument("--top", type=int, default=15)
  parser.add_argument("--ops", default="",
                      help="comma-separated op types (Cast,Mul) to break down by op name")
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
  matmul = sum(ms for op, ms in by_type.items() if any(m in op for m in MATMULS))
  print(f"matrix products {matmul:.1f} ms ({matmul / total:.1%}), the rest "
        f"{total - matmul:.1f} ms")
  tables = [("op type", by_type), ("scope, part", by_part)]
  if args.ops:
    tables.append(("op type, op name", ops_by_name(xplane, args.steps,
                                                   set(args.ops.split(",")))))
  for title, counter in tables:
    print(f"\n{'ms/step':>10}  {'share':>6}  {title}")
    for key, ms in counter.most_common(args.top):
      print(f"{ms:10.1f}  {ms / total:6.1%}  {key if isinstance(key, str) else ' '.join(key)}")


if __name__ == "__main__":
  main()
