"""ONNX Runtime's dynamic int8 on a trained SST-2 classifier: size, dev accuracy, deviation.

    .venv/bin/python benchmarks/distill_bench.py --teacher_only   # the teacher, ~10 min
    .venv/bin/python benchmarks/onnx_sst2.py [--work_dir /tmp/distill_bench] [--out rows.json]

The procedure of benchmarks-history.md's "Distillation and int8 TFLite (SST-2)" section, on its
teacher (`benchmarks/distill_bench.py`: a small all-shared ALBERT trained from random weights
on SST-2's train.tsv, `<work_dir>/teacher/best`): the classifier written as ONNX
(`albert_tf.export.onnx`, what `run_classifier.py --export_dir --onnx` writes) in float32 and
with `--onnx_quantize`'s dynamic int8, beside the TFLite files of the same model; for each,
the file's size, accuracy on all 872 rows of dev.tsv, agreement of its predictions with the
Keras model's and its largest logit deviation from them; then the latency of the Keras call
and of each file at batch 1 and 32 (seq `--max_seq_length`), calls interleaved.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distill_bench  # the teacher, its dev features and the TFLite rows

from albert_tf import AlbertConfig
from albert_tf.export.onnx import export_onnx, run_onnx, session, task_computation


def onnx_rows(model, inputs, labels, args):
  """Float32 and int8 ONNX files of `model`: size, dev accuracy, agreement with Keras."""
  keras = distill_bench.keras_logits(model, inputs)
  rows = []
  for quantize in (False, True):
    path = os.path.join(args.work_dir, f"teacher_{'int8' if quantize else 'float32'}.onnx")
    compute, specs = task_computation("classifier", model)
    size = export_onnx(compute, path, specs, quantize=quantize, config=model.config)
    logits = run_onnx(path, inputs)["logits"]
    row = {"model": "teacher", "format": "onnx int8 (dynamic)" if quantize else "onnx float32",
           "bytes": size, "dev_accuracy": float(np.mean(np.argmax(logits, -1) == labels)),
           "agreement_with_keras": float(np.mean(np.argmax(logits, -1) == np.argmax(keras, -1))),
           "max_abs_logit_diff": float(np.max(np.abs(logits - keras))), "path": path}
    print(json.dumps(row), flush=True)
    rows.append(row)
  return rows


def onnx_call(path, inputs, batch_size):
  runner = session(path)
  batch = {k: v[:batch_size] for k, v in inputs.items()}
  return lambda: runner.run(["logits"], batch)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--work_dir", default="/tmp/distill_bench")
  parser.add_argument("--data_dir", default=os.path.join(distill_bench.DATA, "glue", "SST-2"))
  parser.add_argument("--spm_model_file", default=os.path.join(
      distill_bench.DATA, "sentencepiece", "spiece.model"))
  parser.add_argument("--max_seq_length", type=int, default=64)
  parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 32])
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--calls", type=int, default=40)
  parser.add_argument("--rounds", type=int, default=10)
  parser.add_argument("--tflite_threads", type=int, default=os.cpu_count())
  parser.add_argument("--out")
  args = parser.parse_args()
  config = AlbertConfig.from_json_file(os.path.join(args.work_dir, "teacher_config.json"))
  model = distill_bench.trained_classifier(config, os.path.join(args.work_dir, "teacher", "best"))
  inputs, labels = distill_bench.dev_features(args)
  rows = (onnx_rows(model, inputs, labels, args)
          + distill_bench.tflite_rows("teacher", "teacher", model, inputs, labels, args))
  calls = {}
  for b in args.batch_sizes:
    calls[("keras", b)] = distill_bench.keras_call(model, inputs, b)
    for i, row in enumerate(rows):
      call = (onnx_call(row["path"], inputs, b) if row["format"].startswith("onnx")
              else distill_bench.tflite_call(row["path"], inputs, b, args))
      calls[(i, b)] = call
  ms = distill_bench.interleaved_ms(calls, args)
  print(f"\nmachine: {json.dumps(distill_bench.machine())}\n")
  print("| file | MB | dev acc | predictions equal to Keras fp32 | max abs logit diff | "
        + " | ".join(f"ms batch {b}" for b in args.batch_sizes) + " |")
  print("|---|---|---|---|---|" + "---|" * len(args.batch_sizes))
  print("| Keras fp32 | | | | | " + " | ".join(f"{ms[('keras', b)]:.2f}" for b in args.batch_sizes)
        + " |")
  for i, row in enumerate(rows):
    row["latency_ms"] = {str(b): ms[(i, b)] for b in args.batch_sizes}
    agree = round(row["agreement_with_keras"] * len(labels))
    print(f"| {row['format']} | {row['bytes'] / 1e6:.2f} | {row['dev_accuracy']:.4f} | "
          f"{agree}/{len(labels)} | {row['max_abs_logit_diff']:.2g} | "
          + " | ".join(f"{ms[(i, b)]:.2f}" for b in args.batch_sizes) + " |")
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  main()
