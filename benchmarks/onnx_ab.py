"""ONNX Runtime against the SavedModel, in one process: the encoder's latency, size, deviation.

    .venv/bin/python -m benchmarks.onnx_ab [--config configs/albert_base_v2.json] \
        [--seq_length 128] [--calls_batch1 30] [--calls_batch32 6] [--work_dir /tmp/onnx_ab] \
        [--profile] [--reuse]

Writes one randomly initialised encoder (seeded) as the SavedModel (`export_encoder`) and as
ONNX files (`albert_tf.export.onnx`): float32 (also in a session whose idle threads sleep
instead of spinning: `session(spinning=False)`); float32 through ONNX Runtime's transformer
optimizer (`onnxruntime.transformers.optimizer`, model type bert_tf, kept only where it fused
something and its outputs stay within float32 rounding of the plain file's); dynamic int8
(`--onnx_quantize`). Then calls the SavedModel's `lean` signature (the same two outputs as the
ONNX file) and an ONNX Runtime session of each file (graph optimisations "all", its default,
one intra-op thread per core) in turn on the same random ids, order reversed every other round,
and prints per batch size the median latency, its ratio to the SavedModel, each file's size and
its largest deviation from the SavedModel's outputs. The machine line names the CPU and its
AVX2 / AVX-512 / VNNI / BF16 / AMX flags. `--profile` also writes ONNX Runtime's profile of the float32 file
at batch 1 and prints its op time by type (what limits it, where it is slower).
"""

import argparse
import collections
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.export.encoder import export_encoder
from albert_tf.export.onnx import export_encoder_onnx, run_onnx, session
from benchmarks.distill_bench import machine


def transformer_optimized(source, target, config):
  """ONNX Runtime's transformer optimizer on `source`, written to `target`; returns the fused
  op counts (empty: it recognised nothing).

  Its GELU fusion is off: ours is `x * sigmoid(2c x + 2ca x^3)` (modeling/activations.py), whose
  `x * sigmoid(...)` its QuickGelu pattern takes for `x * sigmoid(a x)` and then fails on (1.32:
  AttributeError reading `a` as a constant)."""
  from onnxruntime.transformers.fusion_options import FusionOptions  # pylint: disable=g-import-not-at-top
  from onnxruntime.transformers.optimizer import optimize_model  # pylint: disable=g-import-not-at-top
  options = FusionOptions("bert_tf")
  options.enable_gelu = False
  model = optimize_model(source, model_type="bert_tf", num_heads=config.num_attention_heads,
                         hidden_size=config.hidden_size, optimization_options=options)
  model.save_model_to_file(target)
  return {k: v for k, v in model.get_fused_operator_statistics().items() if v}


def profile(path, inputs, folder, calls=5):
  """ONNX Runtime's profile of `calls` calls of `path`: (wall ms per call, the nodes' summed
  ms per call, [(op type, ms per call)] of the largest). A node's time is its wall time (its
  threads together), so their sum below the call's wall time is time between the nodes."""
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  options = ort.SessionOptions()
  options.enable_profiling = True
  options.profile_file_prefix = os.path.join(folder, "ort_profile")
  runner = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
  runner.run(None, inputs)
  start = time.perf_counter()
  for _ in range(calls):
    runner.run(None, inputs)
  wall = 1000 * (time.perf_counter() - start) / calls
  with open(runner.end_profiling(), encoding="utf-8") as f:
    events = json.load(f)
  by_type = collections.Counter()
  for event in events:
    if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
      by_type[event["args"]["op_name"]] += event["dur"] / 1000 / (calls + 1)
  return wall, sum(by_type.values()), by_type.most_common(12)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/albert_base_v2.json")
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--calls_batch1", type=int, default=30)
  parser.add_argument("--calls_batch32", type=int, default=6)
  parser.add_argument("--work_dir", default="/tmp/onnx_ab")
  parser.add_argument("--profile", action="store_true")
  parser.add_argument("--reuse", action="store_true",
                      help="keep the exports an earlier run left in --work_dir (same seed)")
  args = parser.parse_args(argv)
  print(f"machine: {json.dumps(machine())}")
  config = AlbertConfig.from_json_file(args.config)
  tf_keras.utils.set_random_seed(0)
  model = AlbertPretrainer(config)
  model(dict(model.encoder.dummy_inputs(), masked_lm_positions=tf.zeros([1, 2], tf.int32)))
  os.makedirs(args.work_dir, exist_ok=True)
  saved_dir = os.path.join(args.work_dir, "encoder")
  files = {"onnx float32": os.path.join(args.work_dir, "encoder.onnx"),
           "onnx int8": os.path.join(args.work_dir, "encoder-int8.onnx")}
  if not (args.reuse and all(os.path.exists(p) for p in [saved_dir, *files.values()])):
    export_encoder(model, saved_dir)
    for name, path in files.items():
      export_encoder_onnx(model, path, quantize=name.endswith("int8"))
  optimized = os.path.join(args.work_dir, "encoder-optimized.onnx")
  fused = transformer_optimized(files["onnx float32"], optimized, config)
  print(f"transformer optimizer (bert_tf) fused: {fused or 'nothing'}")
  if fused:
    files["onnx float32 + transformer optimizer"] = optimized
  served = tf.saved_model.load(saved_dir).signatures["lean"]
  runners = {name: session(path) for name, path in files.items()}
  # The same file with ONNX Runtime's idle threads sleeping instead of spinning between ops.
  runners["onnx float32, no spinning"] = session(files["onnx float32"], spinning=False)
  files["onnx float32, no spinning"] = files["onnx float32"]
  rng = np.random.default_rng(0)
  rows = []
  for batch, calls in ((1, args.calls_batch1), (32, args.calls_batch32)):
    ids = rng.integers(5, config.vocab_size, (batch, args.seq_length)).astype(np.int32)
    x = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
         "input_type_ids": np.zeros_like(ids)}
    tensors = {k: tf.constant(v) for k, v in x.items()}
    want = {k: v.numpy() for k, v in served(**tensors).items()}
    calls_of = {"savedmodel": lambda t=tensors: served(**t)["pooled_output"].numpy()}
    deviation = {"savedmodel": 0.0}
    for name, runner in runners.items():
      got = run_onnx(runner, x)
      deviation[name] = max(float(np.max(np.abs(got[k] - want[k]))) for k in want)
      calls_of[name] = lambda runner=runner, x=x: runner.run(["pooled_output"], x)
    if "onnx float32 + transformer optimizer" in deviation and (
        deviation["onnx float32 + transformer optimizer"] > 1e-4):
      print("the transformer optimizer's outputs moved by "
            f"{deviation['onnx float32 + transformer optimizer']:.2g}: not kept")
    for call in calls_of.values():
      call(), call()
    times = {name: [] for name in calls_of}
    order = list(calls_of)
    for i in range(calls):
      for name in (order if i % 2 == 0 else order[::-1]):
        start = time.perf_counter()
        calls_of[name]()
        times[name].append(time.perf_counter() - start)
    base = statistics.median(times["savedmodel"])
    for name in order:
      median = statistics.median(times[name])
      size = (sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(saved_dir)
                  for f in fs) if name == "savedmodel" else os.path.getsize(files[name]))
      rows.append(f"| {name} | {batch} | {1000 * median:.1f} | {median / base:.3f}x | "
                  f"{size / 1e6:.1f} | {deviation[name]:.2g} |")
  print(f"\nseq {args.seq_length}, {config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}; medians of interleaved calls\n")
  print("| model | batch | ms | vs SavedModel | MB | max abs deviation |")
  print("|---|---|---|---|---|---|")
  print("\n".join(rows))
  if args.profile:
    ids = rng.integers(5, config.vocab_size, (1, args.seq_length)).astype(np.int32)
    x = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
         "input_type_ids": np.zeros_like(ids)}
    wall, nodes, by_type = profile(files["onnx float32"], x, args.work_dir)
    print(f"\nONNX Runtime profile, float32, batch 1: {wall:.1f} ms per call, of which "
          f"{nodes:.1f} ms in its nodes; by op type (ms per call):")
    for op, ms in by_type:
      print(f"  {op:28s} {ms:8.1f}")


if __name__ == "__main__":
  main()
