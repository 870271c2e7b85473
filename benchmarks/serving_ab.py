"""Serving latency A/B in one process: exported encoders called in alternation.

    .venv/bin/python benchmarks/serving_ab.py PEER_EXPORT OURS_BEFORE OURS_AFTER \
        [--calls_batch1 30] [--calls_batch32 6] [--seq_length 128]

Loads every SavedModel given, warms each up, then calls their `serving_default` in turn
(order reversed every other round) on the same random ids, and prints the median latency of
each at batch 1 and 32 with its ratio to the first export. Alternating in one process keeps
slow drifts of a shared machine out of the ratios, which separate processes do not.
(`benchmarks.workers` / `benchmarks.run` write the exports: ours with
`albert_tf.export.encoder.export_encoder`, the peer's with `PeerEncoderExport`.)
"""

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("exports", nargs="+", help="SavedModel folders; the first is the yardstick")
  parser.add_argument("--calls_batch1", type=int, default=30)
  parser.add_argument("--calls_batch32", type=int, default=6)
  parser.add_argument("--seq_length", type=int, default=128)
  args = parser.parse_args(argv)
  served = {path: tf.saved_model.load(path).signatures["serving_default"]
            for path in args.exports}
  rng = np.random.default_rng(0)
  for batch, calls in ((1, args.calls_batch1), (32, args.calls_batch32)):
    ids = tf.constant(rng.integers(5, 30000, (batch, args.seq_length)), tf.int32)
    inputs = dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                  input_type_ids=tf.zeros_like(ids))
    for fn in served.values():
      for _ in range(2):
        fn(**inputs)["pooled_output"].numpy()
    times = {path: [] for path in served}
    for i in range(calls):
      for path in (args.exports if i % 2 == 0 else args.exports[::-1]):
        start = time.perf_counter()
        served[path](**inputs)["pooled_output"].numpy()
        times[path].append(time.perf_counter() - start)
    base = statistics.median(times[args.exports[0]])
    for path in args.exports:
      median = statistics.median(times[path])
      print(f"batch {batch:2d}  {1000 * median:9.1f} ms  {median / base:.3f}x  {path}")


if __name__ == "__main__":
  main()
