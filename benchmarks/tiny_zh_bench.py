"""albert_tiny_zh exported: file sizes and serving latency at batch 1, seq 128.

    .venv/bin/python -m benchmarks.tiny_zh_bench [--calls 200] [--repeats 3]

brightmart's albert_tiny_zh (configs/brightmart/albert_config_tiny.json, their layout) against
the same shapes in Google's layout (albert_config_tiny_google.json, brightmart's
albert_tiny_google_zh), random weights, each exported by `export_savedmodel.py`'s bundle
(`albert_tf.export.bundle.export_bundle`, float32 TFLite and `--tflite_quantize` int8).
Measured in one process, the two models alternating per repeat: the median latency of the
encoder SavedModel's `serving_default` and of the TFLite encoder (one interpreter thread and
all threads), on a fixed batch of one 128-token sequence.
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, save_tf1_checkpoint
from albert_tf.export.bundle import export_bundle
from benchmarks.create_pretraining_data_bench import machine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"albert_tiny_zh (brightmart layout)": "albert_config_tiny.json",
          "albert_tiny_google_zh (Google layout)": "albert_config_tiny_google.json"}
SEQ = 128


def _size(path):
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _inputs():
  rng = np.random.default_rng(0)
  ids = rng.integers(100, 21128, size=(1, SEQ)).astype(np.int32)
  ids[0, 0], ids[0, -1] = 2, 3
  return {"input_word_ids": ids, "input_mask": np.ones((1, SEQ), np.int32),
          "input_type_ids": np.zeros((1, SEQ), np.int32)}


def _prepare(name, config_file, tmp):
  config = AlbertConfig.from_json_file(os.path.join(REPO, "configs", "brightmart", config_file))
  model = AlbertPretrainer(config)
  for v in model.trainable_variables:
    v.assign(tf.random.stateless_normal(v.shape, [1, len(v.name)]) * 0.05
             + (1.0 if "gamma" in v.name else 0.0))
  folder = os.path.join(tmp, config_file[:-5])
  ckpt = save_tf1_checkpoint(model, os.path.join(folder, "albert_model.ckpt"))
  config_path = os.path.join(folder, "albert_config.json")
  config.to_json_file(config_path)
  out = {"name": name, "parameters": model.encoder.count_params()}
  for quantize in (False, True):
    paths = export_bundle(config_path, ckpt, os.path.join(folder, f"export_{quantize}"),
                          max_seq_length=SEQ, tflite=True, tflite_quantize=quantize)
    out["tflite_int8" if quantize else "tflite_float32"] = paths["tflite"]
    out["savedmodel"] = paths["encoder"]
  out["sizes_mb"] = {k: round(_size(out[k]) / 2**20, 2)
                     for k in ("savedmodel", "tflite_float32", "tflite_int8")}
  return out


def _time(fn, calls):
  fn()
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times) * 1e3


def _latencies(model, calls):
  x = _inputs()
  serving = tf.saved_model.load(model["savedmodel"]).signatures["serving_default"]
  tensors = {k: tf.constant(v) for k, v in x.items()}
  result = {"savedmodel_ms": _time(lambda: serving(**tensors)["pooled_output"].numpy(), calls)}
  for kind in ("tflite_float32", "tflite_int8"):
    for threads in (1, None):
      interpreter = tf.lite.Interpreter(model_path=model[kind], num_threads=threads)
      interpreter.allocate_tensors()
      for d in interpreter.get_input_details():
        key = next(k for k in x if k in d["name"])
        interpreter.set_tensor(d["index"], x[key])

      def invoke(interpreter=interpreter):
        interpreter.invoke()
      result[f"{kind}_{threads or 'all'}thr_ms"] = _time(invoke, calls)
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--calls", type=int, default=200)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  with tempfile.TemporaryDirectory() as tmp:
    models = [_prepare(name, f, tmp) for name, f in MODELS.items()]
    runs = {m["name"]: [] for m in models}
    for r in range(args.repeats):
      for m in (models if r % 2 == 0 else models[::-1]):
        runs[m["name"]].append(_latencies(m, args.calls))
    report = {"machine": machine(), "seq": SEQ, "batch": 1, "calls": args.calls,
              "repeats": args.repeats, "models": []}
    for m in models:
      keys = runs[m["name"]][0]
      report["models"].append({
          "name": m["name"], "parameters": m["parameters"], "sizes_mb": m["sizes_mb"],
          "latency_ms": {k: round(statistics.median(run[k] for run in runs[m["name"]]), 3)
                         for k in keys}})
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
