"""run_ner plumbing: a tiny model from scratch on CoNLL-2003 and CLUENER2020, against baselines.

    .venv/bin/python -m benchmarks.ner_plumbing [--steps 1500] [--datasets conll,cluener]
        [--out /tmp/ner_plumbing] [--json results.json]

Not an accuracy target: `configs/tiny.json`'s shape (E 16, H 32, 2 layers, max_position 64;
`vocab_size` set to the vocabulary's) from random weights, so what it shows is that the data,
alignment, head, metric and export paths learn and agree. For each dataset, in one process:

- the baselines on the dev file, scored by the same metric (`metrics.ner.ner_results`):
  `majority` tags every word with the training file's most common tag (O, so F1 0), and
  `dictionary` tags the longest runs of words that are an entity of the training file with that
  entity's most common type (the CoNLL-2003 shared task's baseline, applied per character for
  CLUENER);
- `run_ner` with --do_train --do_eval (entity F1 on dev after each checkpoint), then
  `--do_predict` on the test file and `--export_dir` timed on their own;
- the export's serving latency: the median of `serving_default` on one dev text and on 32.

Prints Markdown tables (and JSON with --json).
"""

import argparse
import collections
import dataclasses
import json
import logging
import os
import statistics
import time

import tensorflow as tf

from albert_tf.cli.runs import run_ner
from albert_tf.config import AlbertConfig
from albert_tf.data import ner as ner_data
from albert_tf.export.tasks import export_task
from albert_tf.metrics.ner import ner_results
from albert_tf.tasks.ner import NerOptions, NerTask
from albert_tf.tokenization import FullTokenizer
from albert_tf.training.run import Run
from benchmarks.create_pretraining_data_bench import machine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, os.pardir, "shared", "data")
DATASETS = {
    "conll": dict(data_format="conll", data_dir=os.path.join(DATA, "ner", "conll2003"),
                  spm_model_file=os.path.join(DATA, "sentencepiece", "spiece.model")),
    "cluener": dict(data_format="cluener", data_dir=os.path.join(DATA, "ner", "cluener"),
                    vocab_file=os.path.join(DATA, "chinese", "albert_zh", "vocab.txt")),
}


def majority_baseline(train, dev):
  """Every word tagged with the training file's most common tag."""
  tag = collections.Counter(t for e in train for t in e.tags).most_common(1)[0][0]
  return [[tag] * len(e.words) for e in dev]


def dictionary_baseline(train, dev, longest=8):
  """The longest runs of words (up to `longest`) that are a training entity, with its most
  common type; everything else O."""
  types = collections.defaultdict(collections.Counter)
  for e in train:
    for kind, start, end in ner_data.tags_to_spans(e.tags):
      if end - start <= longest:
        types[tuple(e.words[start:end])][kind] += 1
  known = {words: counter.most_common(1)[0][0] for words, counter in types.items()}
  predictions = []
  for e in dev:
    tags, i = ["O"] * len(e.words), 0
    while i < len(e.words):
      for n in range(min(longest, len(e.words) - i), 0, -1):
        kind = known.get(tuple(e.words[i:i + n]))
        if kind:
          tags[i:i + n] = [f"B-{kind}"] + [f"I-{kind}"] * (n - 1)
          i += n
          break
      else:
        i += 1
    predictions.append(tags)
  return predictions


def _median_seconds(fn, calls):
  fn()  # the first call traces
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def run_dataset(name, steps, out, batch_size, learning_rate):
  spec = DATASETS[name]
  work = os.path.join(out, name)
  tf.io.gfile.makedirs(work)
  tokenizer = FullTokenizer(spm_model_file=spec.get("spm_model_file"),
                            vocab_file=spec.get("vocab_file"))
  config_file = os.path.join(work, "tiny.json")
  AlbertConfig.from_json_file(os.path.join(REPO, "configs", "tiny.json")).replace(
      vocab_size=tokenizer.vocab_size).to_json_file(config_file)
  fmt, folder = spec["data_format"], spec["data_dir"]
  train = ner_data.read_examples(fmt, ner_data.default_file(fmt, folder, "train"))
  dev = ner_data.read_examples(fmt, ner_data.default_file(fmt, folder, "dev"))
  gold = [e.tags for e in dev]
  row = {"dataset": name, "train_sentences": len(train), "dev_sentences": len(dev),
         "baselines": {b: ner_results(gold, fn(train, dev)) for b, fn in
                       (("majority", majority_baseline), ("dictionary", dictionary_baseline))}}

  options = NerOptions(
      albert_config_file=config_file, output_dir=os.path.join(work, "run"), do_train=True,
      do_eval=True, max_seq_length=64, doc_stride=32, train_batch_size=batch_size,
      eval_batch_size=256, predict_batch_size=256, learning_rate=learning_rate,
      train_step=steps, warmup_step=steps // 10, save_checkpoints_steps=steps // 3,
      iterations_per_loop=100, seed=1, **spec)
  start = time.perf_counter()
  run_ner(options)
  row["train_and_eval_seconds"] = time.perf_counter() - start
  with open(os.path.join(options.output_dir, "best", "best_results.txt")) as f:
    row["best_dev"] = {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}

  runner = Run(NerTask(dataclasses.replace(options, do_train=False, do_eval=False,
                                         do_predict=True,
                                         export_dir=os.path.join(work, "export"))))
  runner.loop.restore_or_initialize()
  start = time.perf_counter()
  runner.predict()
  row["predict_seconds"] = time.perf_counter() - start
  row["test_sentences"] = len(runner.task.examples("test"))
  start = time.perf_counter()
  export_task(runner.task, runner.loop.model)
  row["export_seconds"] = time.perf_counter() - start

  serve = tf.saved_model.load(runner.task.options.export_dir).signatures["serving_default"]
  texts = [e.text if e.text is not None else " ".join(e.words) for e in dev]
  one, many = tf.constant(texts[:1]), tf.constant(texts[:32])
  row["serving_batch1_ms"] = 1e3 * _median_seconds(lambda: serve(text=one), 50)
  row["serving_batch32_ms"] = 1e3 * _median_seconds(lambda: serve(text=many), 10)
  start = time.perf_counter()
  for i in range(0, len(texts), 256):
    serve(text=tf.constant(texts[i:i + 256]))
  row["serving_dev_seconds"] = time.perf_counter() - start
  return row


def _table(rows):
  lines = ["| dataset | dev F1: majority | dictionary | tiny model (best step) | precision | "
           "recall | token accuracy |", "|---|---|---|---|---|---|---|"]
  for r in rows:
    b, d = r["baselines"], r["best_dev"]
    lines.append(f"| {r['dataset']} | {b['majority']['f1']:.3f} | {b['dictionary']['f1']:.3f} "
                 f"| **{d['f1']:.3f}** (step {int(d['global_step'])}) | {d['precision']:.3f} | "
                 f"{d['recall']:.3f} | {d['token_accuracy']:.3f} |")
  lines += ["", "| dataset | train + dev evals | --do_predict (test) | export | serving batch 1 "
            "| batch 32 | whole dev served |", "|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(f"| {r['dataset']} | {r['train_and_eval_seconds']:.0f} s | "
                 f"{r['predict_seconds']:.1f} s ({r['test_sentences']} sentences) | "
                 f"{r['export_seconds']:.1f} s | {r['serving_batch1_ms']:.1f} ms | "
                 f"{r['serving_batch32_ms']:.0f} ms | {r['serving_dev_seconds']:.1f} s "
                 f"({r['dev_sentences']} sentences) |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=1500)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-3)
  parser.add_argument("--datasets", default="conll,cluener")
  parser.add_argument("--out", default="/tmp/ner_plumbing")
  parser.add_argument("--json")
  args = parser.parse_args()
  logging.getLogger().setLevel(logging.WARNING)
  rows = [run_dataset(name, args.steps, args.out, args.batch_size, args.learning_rate)
          for name in args.datasets.split(",")]
  print(json.dumps(machine()))
  print(_table(rows))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"machine": machine(), "rows": rows}, f, indent=2)


if __name__ == "__main__":
  main()
