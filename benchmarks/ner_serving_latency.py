"""The raw-text NER export's latency per sentence at a real model size.

    .venv/bin/python -m benchmarks.ner_serving_latency [--config configs/albert_base_v2.json]
        [--calls 30] [--export_dir /tmp/ner_latency_export]

Exports an `AlbertTokenClassifier` of the config (random weights: latency does not depend on
them) with CoNLL-2003's 9 tags and ALBERT's SentencePiece model through `export_ner`, loads it,
and times `serving_default` in this process on CoNLL-2003 test sentences of 5 words or more, the
words joined by spaces: `--calls` calls of one sentence and 6 calls of 32. Prints the median
per call and per sentence.
"""

import argparse
import os
import shutil
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.data.ner import read_conll  # noqa: E402
from albert_tf.export.ner_serving import export_ner  # noqa: E402
from albert_tf.modeling.token_classifier import AlbertTokenClassifier  # noqa: E402
from benchmarks.finetune_step_bench import CONLL_TAGS  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "..", "shared", "data")


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
  parser.add_argument("--calls", type=int, default=30, help="timed calls of one sentence")
  parser.add_argument("--export_dir", default="/tmp/ner_latency_export")
  args = parser.parse_args(argv)
  model = AlbertTokenClassifier(AlbertConfig.from_json_file(args.config), list(CONLL_TAGS))
  model(dict(model.encoder.dummy_inputs(1, 8), word_positions=tf.zeros([1, 8], tf.int32)))
  shutil.rmtree(args.export_dir, ignore_errors=True)
  path = export_ner(model, args.export_dir,
                    spm_model_file=os.path.join(DATA, "sentencepiece", "spiece.model"))
  serve = tf.saved_model.load(path).signatures["serving_default"]
  sentences = [" ".join(e.words) for e in read_conll(
      os.path.join(DATA, "ner", "conll2003", "test.txt")) if len(e.words) >= 5][:200]
  print(f"{len(sentences)} sentences, "
        f"{statistics.mean(len(s.split()) for s in sentences):.1f} words on average")
  for batch, calls in ((1, args.calls), (32, 6)):
    serve(text=tf.constant(sentences[:batch]))  # warm-up
    times = []
    for i in range(calls):
      texts = tf.constant([sentences[(i * batch + j) % len(sentences)] for j in range(batch)])
      start = time.perf_counter()
      for value in serve(text=texts).values():
        value.numpy()
      times.append(time.perf_counter() - start)
    ms = 1000 * statistics.median(times)
    print(f"batch {batch:2d}: {ms:.1f} ms per call, {ms / batch:.1f} ms per sentence")
  return 0


if __name__ == "__main__":
  main()
