"""One measurement in its own process, for `benchmarks.run` (which starts one per configuration).

    python -m benchmarks.workers '{"kind": "train", "side": "ours", ...}'

Prints progress, then one last line `RESULT {json}` with the figures and the process's own
peak memory (`ru_maxrss` and `VmHWM`, both the resident high-water mark of this process: the
model, the optimizer state, the activations and TensorFlow's own ~0.5-1 GiB). Kinds:

  matmul  this machine's matmul rate: a chain of `iters` [n, n] x [n, n] products in one
          `tf.function`, float32 and bfloat16; GFLOP/s = iters * 2 n^3 / seconds (best of the
          repeats; the median is reported too).
  train   one pretraining optimizer step (forward, backward, clip, LAMB) per call, ours or
          Model Garden's (`benchmarks.train_step_bench`), under the `mixed_bfloat16` Keras
          policy for bfloat16, with or without `jit_compile` (ours also with `"recompute":
          true`, block recomputation); median seconds per step.
  finetune  one fine-tuning optimizer step per call, ours (the task's training loop) or Model
          Garden's task model (`benchmarks.finetune_step_bench`): "task" classifier, tagger or
          squad, float32 or bfloat16; median seconds per step.
  export  writes the encoder SavedModels of one side, one per variant: "float32", "bfloat16",
          "float32 xla" (signatures compiled by XLA: `export_savedmodel.py --jit_compile`).
  infer   loads an exported SavedModel and times its `serving_default` signature on a fixed
          `[batch, seq]` batch at each batch size; median milliseconds per call (the peak
          memory is then the process's, i.e. of the largest batch).
"""

import json
import os
import resource
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer  # noqa: E402
from benchmarks import train_step_bench  # noqa: E402

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def peak_memory():
  """This process's resident high-water mark in MiB: (ru_maxrss, VmHWM from /proc)."""
  maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
  hwm = None
  try:
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          hwm = int(line.split()[1]) / 1024.0
  except OSError:
    pass
  return {"ru_maxrss_mib": maxrss, "vmhwm_mib": hwm}


def set_precision(precision):
  policy = {"float32": "float32", "bfloat16": "mixed_bfloat16"}[precision]
  tf_keras.mixed_precision.set_global_policy(policy)


def matmul(spec):
  """GFLOP/s of a chain of [n, n] products for each precision in `spec["precisions"]`."""
  n, iters = spec["n"], spec["iters"]
  rng = np.random.default_rng(0)
  # Scaled so that the chained products stay finite.
  a0 = rng.standard_normal([n, n]) / np.sqrt(n)
  b0 = rng.standard_normal([n, n]) / np.sqrt(n)

  @tf.function
  def chain(a, b):
    x = a
    for _ in range(iters):  # each product depends on the last: no common subexpression
      x = tf.matmul(x, b)
    return tf.reduce_sum(tf.cast(x[0], tf.float32))

  result = {}
  for precision in spec["precisions"]:
    a, b = tf.cast(a0, precision), tf.cast(b0, precision)
    float(chain(a, b))
    times = []
    for _ in range(spec["repeats"]):
      start = time.perf_counter()
      float(chain(a, b))
      times.append(time.perf_counter() - start)
    flops = iters * 2.0 * n ** 3
    result[precision] = {"gflops_best": flops / min(times) / 1e9,
                         "gflops_median": flops / statistics.median(times) / 1e9,
                         "seconds": times}
  return result


def _timed(step, params, spec, start):
  """Times `step()` (one optimizer step, returning its loss): the first call traces (from
  `start`), `spec["warmup"]` more warm up, then `spec["steps"]` are timed."""
  first_loss = float(step())  # trace (and compile) + first step
  trace_seconds = time.perf_counter() - start
  for _ in range(spec.get("warmup", 1)):
    float(step())
  times = []
  for _ in range(spec["steps"]):
    begin = time.perf_counter()
    last_loss = float(step())
    times.append(time.perf_counter() - begin)
  return {"seconds_per_step": statistics.median(times), "step_seconds": times,
          "parameters": int(params), "build_trace_seconds": trace_seconds,
          "first_loss": first_loss, "last_loss": last_loss}


def train(spec):
  set_precision(spec["precision"])
  config = AlbertConfig.from_json_file(spec["config"])
  start = time.perf_counter()
  if spec["side"] == "ours":
    step, params = train_step_bench.ours_step(config, jit_compile=spec["jit"],
                                              recompute_grad=spec.get("recompute", False))
  else:
    step, params = train_step_bench.peer_step(config, jit_compile=spec["jit"])
  batch = train_step_bench.make_batch(config, spec["batch"], spec["seq"], spec["predictions"])
  return _timed(lambda: step(batch), params, spec, start)


def finetune(spec):
  import tempfile  # pylint: disable=g-import-not-at-top
  from benchmarks import finetune_step_bench as fb  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="finetune_") as work:
    config_file, config = fb.with_dropout(spec["config"], work)
    start = time.perf_counter()
    if spec["side"] == "ours":  # the job's options carry the precision (--mixed_precision)
      step, params = fb.ours_step(spec["task"], config_file, spec["batch"], spec["seq"],
                                  spec["precision"], os.path.join(work, "out"),
                                  jit_compile=spec.get("jit", False))
    else:
      set_precision(spec["precision"])
      step, params = fb.peer_step(spec["task"], config, spec["batch"], spec["seq"],
                                  jit_compile=spec.get("jit", False))
    return _timed(step, params, spec, start)


class PeerEncoderExport(tf.Module):
  """Model Garden's AlbertEncoder behind the same serving signature as ours (float32 out)."""

  def __init__(self, encoder, jit_compile=False):
    super().__init__(name="peer_encoder")
    self.encoder = encoder
    specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}
    self.serving = tf.function(self._serving, input_signature=[specs],
                               jit_compile=True if jit_compile else None)

  def _serving(self, inputs):
    out = self.encoder(inputs, training=False)
    return {"pooled_output": tf.cast(out["pooled_output"], tf.float32),
            "sequence_output": tf.cast(out["sequence_output"], tf.float32),
            "encoder_outputs": tf.cast(tf.stack(out["encoder_outputs"], axis=1), tf.float32)}


def export(spec):
  """Writes the encoder SavedModel of `spec["side"]` for each of `spec["exports"]`."""
  config = AlbertConfig.from_json_file(spec["config"])
  dummy = {name: tf.zeros([1, 8], tf.int32) for name in INPUT_NAMES}
  seconds = {}
  for variant, export_dir in spec["exports"].items():
    precision, _, compiler = variant.partition(" ")  # "float32", "bfloat16", "float32 xla"
    jit = compiler == "xla"
    set_precision(precision)  # the policy in force when the layers are built
    start = time.perf_counter()
    if spec["side"] == "ours":
      from albert_tf.export.encoder import export_encoder  # pylint: disable=g-import-not-at-top
      pretrainer = AlbertPretrainer(config)
      pretrainer(dict(dummy, masked_lm_positions=tf.zeros([1, 2], tf.int32)))
      export_encoder(pretrainer, export_dir, jit_compile=jit)
    else:
      encoder = train_step_bench.peer_encoder(config)
      encoder(dummy)
      module = PeerEncoderExport(encoder, jit_compile=jit)
      tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serving})
    seconds[variant] = time.perf_counter() - start
  set_precision("float32")
  return {"export_seconds": seconds}


def infer(spec):
  """Median latency of `serving_default` at each batch size of `spec["batches"]`."""
  serving = tf.saved_model.load(spec["dir"]).signatures["serving_default"]
  config = AlbertConfig.from_json_file(spec["config"])
  result = {}
  for batch_size in spec["batches"]:
    batch = train_step_bench.make_batch(config, batch_size, spec["seq"], 1)
    inputs = {name: batch[name] for name in INPUT_NAMES}
    out = serving(**inputs)
    dtypes = {k: v.dtype.name for k, v in out.items()}
    for _ in range(spec.get("warmup", 2)):
      serving(**inputs)["pooled_output"].numpy()
    times = []
    for _ in range(spec["calls"]):
      start = time.perf_counter()
      serving(**inputs)["pooled_output"].numpy()
      times.append(time.perf_counter() - start)
    result[str(batch_size)] = {"latency_ms": 1000 * statistics.median(times),
                               "call_seconds": times, "output_dtypes": dtypes}
  return result


KINDS = {"matmul": matmul, "train": train, "finetune": finetune, "export": export,
         "infer": infer}


def main(argv):
  spec = json.loads(argv[1])
  result = KINDS[spec["kind"]](spec)
  result["threads"] = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                       "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
  result.update(peak_memory())
  print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  main(sys.argv)
