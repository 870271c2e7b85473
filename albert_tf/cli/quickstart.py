"""The main job, end to end on a built-in corpus: text -> SentencePiece -> data -> pretraining.

    python -m albert_tf.cli.quickstart [--output_dir runs/quickstart] [--num_train_steps 600]

1. builds a default English corpus from the docstrings of Python's standard library (every
   Python installation has it; nothing is downloaded), one sentence per line, one docstring
   per document;
2. trains a 4k-piece SentencePiece model on it with ALBERT's recipe;
3. creates pretraining data (seq 128, SOP pairs, n-gram masks), holding one shard out for eval;
4. pretrains a small ALBERT with LAMB on the CPU, with progress lines;
5. evaluates, prints the loss and the MLM/SOP accuracies at the start and the end, and saves
   `training_curves.png`.
Every step is one of the tools a user runs on their own corpus (see the README).
"""

import argparse
import ast
import logging
import os
import re
import sys
import sysconfig
import time

from albert_tf import files
from albert_tf.cli import quiet

logger = logging.getLogger("albert_tf.cli.quickstart")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def stdlib_docstrings(max_bytes):
  """Docstrings of the standard library's modules, classes and functions (sorted, stable)."""
  root = sysconfig.get_paths()["stdlib"]
  total = 0
  for folder, dirs, names in os.walk(root):
    dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "site-packages", "idlelib",
                                                  "__pycache__"))
    for name in sorted(names):
      if not name.endswith(".py"):
        continue
      try:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
          tree = ast.parse(f.read())
      except (SyntaxError, UnicodeDecodeError, ValueError):
        continue
      for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
          doc = ast.get_docstring(node)
          if doc and len(doc) > 40:
            total += len(doc)
            yield doc
            if total >= max_bytes:
              return


def sentences(docstring):
  """A docstring's sentences: its paragraphs with whitespace collapsed, cut after . ! or ?
  followed by a capital."""
  paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", docstring)]
  return [s for p in paragraphs if p for s in _SENTENCE_END.split(p)]


def write_corpus(path, max_bytes):
  """One sentence per line, a blank line after each docstring; returns (documents, bytes)."""
  documents = 0
  with files.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
    for doc in stdlib_docstrings(max_bytes):
      lines = sentences(doc)
      if len(lines) < 2:
        continue
      f.write("\n".join(lines) + "\n\n")
      documents += 1
  return documents, os.path.getsize(path)


def plot_curves(history, evaluation, path, before=None):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  steps = [h["step"] for h in history]
  fig, axes = plt.subplots(1, 3, figsize=(14, 4))
  axes[0].plot(steps, [h["loss"] for h in history], label="train loss")
  axes[0].plot(steps, [h["masked_lm_loss"] for h in history], label="MLM loss")
  axes[0].plot(steps, [h["sentence_order_loss"] for h in history], label="SOP loss")
  axes[1].plot(steps, [h["masked_lm_accuracy"] for h in history], label="train")
  axes[2].plot(steps, [h["sentence_order_accuracy"] for h in history], label="train")
  evals = [e for e in (before, evaluation) if e]
  if evals:
    eval_steps = [e["global_step"] for e in evals]
    axes[0].scatter(eval_steps, [e["loss"] for e in evals], c="r", label="held-out eval",
                    zorder=3)
    axes[1].scatter(eval_steps, [e["masked_lm_accuracy"] for e in evals], c="r",
                    label="held-out eval", zorder=3)
    axes[2].scatter(eval_steps, [e["sentence_order_accuracy"] for e in evals], c="r",
                    label="held-out eval", zorder=3)
  for ax, title in zip(axes, ("loss", "masked LM accuracy", "sentence order accuracy")):
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def build_data(out, corpus_mb=4.0, vocab_size=4000, max_seq_length=128, dupe_factor=3):
  """Steps 1-3 in `out`: corpus, SentencePiece model, four shards of pretraining data (the
  last one for eval). Returns (spm model file, shards)."""
  # pylint: disable=g-import-not-at-top
  from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data
  from albert_tf.tokenization.train_spm import train_sentencepiece
  # pylint: enable=g-import-not-at-top
  corpus = os.path.join(out, "corpus.txt")
  documents, size = write_corpus(corpus, int(corpus_mb * 1e6))
  logger.info("[1/5] corpus: %d docstrings of the standard library, %.1f MB -> %s", documents,
              size / 1e6, corpus)

  spm_prefix = os.path.join(out, "spm")
  model_file = train_sentencepiece([corpus], spm_prefix, vocab_size, do_lower_case=True,
                                   log=lambda *a: None)
  logger.info("[2/5] SentencePiece: %d pieces -> %s", vocab_size, model_file)

  data = os.path.join(out, "data")
  os.makedirs(data, exist_ok=True)
  shards = [os.path.join(data, f"train-{i}.tfrecord") for i in range(4)]
  metadata = create_pretraining_data([corpus], shards, CreationOptions(
      spm_model_file=model_file, max_seq_length=max_seq_length, max_predictions_per_seq=20,
      dupe_factor=dupe_factor, num_workers=0))
  logger.info("[3/5] pretraining data: %d instances in %d shards (last one held out for eval)",
              metadata["total_instances"], len(shards))
  return model_file, shards


def small_config(vocab_size, max_seq_length):
  """The quickstart's model: E 64, H 128, 4 layers, no dropout."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  return AlbertConfig(vocab_size=vocab_size, embedding_size=64, hidden_size=128,
                      num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
                      max_position_embeddings=max_seq_length, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def run(args):
  out = os.path.abspath(args.output_dir)
  os.makedirs(out, exist_ok=True)
  start = time.time()
  model_file, shards = build_data(out, args.corpus_mb, args.vocab_size, args.max_seq_length,
                                  args.dupe_factor)
  config = small_config(args.vocab_size, args.max_seq_length)
  config_file = os.path.join(out, "albert_config.json")
  config.to_json_file(config_file)
  history = []
  before, evaluation = _pretrain(args, config_file, shards, out, history)
  logger.info("[4/5] pretrained %d steps (%s)", args.num_train_steps, config_file)

  png = os.path.join(out, "training_curves.png")
  plot_curves(history, evaluation, png, before)
  first, last = history[0], history[-1]
  print(f"\nheld-out eval, untrained -> after {last['step']} steps:")
  for key in ("loss", "masked_lm_accuracy", "sentence_order_accuracy"):
    print(f"  {key:<24} {before[key]:.3f} -> {evaluation[key]:.3f}")
  print(f"training loss {first['loss']:.3f} (steps 1-{first['step']}) -> {last['loss']:.3f} "
        f"(last {args.log_every_steps} steps)")
  _query_fill_mask(out, model_file)
  print(f"[5/5] curves: {png}; everything in {out} ({time.time() - start:.0f}s)")
  learned = (evaluation["loss"] < before["loss"] - 0.5
             and evaluation["masked_lm_accuracy"] > before["masked_lm_accuracy"] + 0.05)
  if not learned:
    print("warning: the loss did not fall / MLM accuracy did not rise clearly", file=sys.stderr)
  return 0 if learned or not args.require_learning else 3


def _query_fill_mask(out, model_file):
  """Exports the trained model as a raw-text fill-mask SavedModel and asks it a question."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.export.task_models import export_fill_mask  # pylint: disable=g-import-not-at-top
  from albert_tf.interop.checkpoints import load_checkpoint  # pylint: disable=g-import-not-at-top
  from albert_tf.interop.saved_models import load_saved_model  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=g-import-not-at-top
  model = AlbertPretrainer(AlbertConfig.from_json_file(os.path.join(out, "albert_config.json")))
  load_checkpoint(model, os.path.join(out, "model"))
  path = export_fill_mask(model, os.path.join(out, "fill_mask"), spm_model_file=model_file,
                          max_seq_length=64, top_k=5)
  loaded = load_saved_model(path)  # kept: its signature holds variables weakly
  fill_mask = loaded.signatures["serving_default"]
  for text in ("Return the [MASK] of the list.", "Raise an exception if the file does not "
               "[MASK]."):
    answer = fill_mask(text=tf.constant([text]))
    guesses = ", ".join(f"{t.decode()} ({s:.2f})" for t, s in zip(
        answer["top_tokens"][0, 0].numpy(), answer["top_scores"][0, 0].numpy()))
    print(f"fill-mask {text!r}: {guesses}")


def _pretrain(args, config_file, shards, out, history):
  from albert_tf.cli.runs import run_pretraining  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import PretrainingOptions  # pylint: disable=g-import-not-at-top
  common = dict(albert_config_file=config_file, output_dir=os.path.join(out, "model"),
                max_seq_length=args.max_seq_length, max_predictions_per_seq=20,
                train_batch_size=args.train_batch_size, eval_batch_size=args.train_batch_size,
                num_train_steps=args.num_train_steps,
                num_warmup_steps=max(1, args.num_train_steps // 10),
                learning_rate=args.learning_rate, save_checkpoints_steps=args.num_train_steps,
                iterations_per_loop=args.log_every_steps, max_eval_steps=20, seed=0,
                log_every_seconds=0)
  evaluate = lambda folder, **extra: run_pretraining(PretrainingOptions(
      input_file=shards[-1], do_eval=True, **dict(common, output_dir=folder, **extra)))[1]
  # The baseline is random weights on purpose.
  before = evaluate(os.path.join(out, "untrained"), allow_untrained=True)
  run_pretraining(PretrainingOptions(input_file=",".join(shards[:-1]), do_train=True, **common),
                  history=history)
  return before, evaluate(common["output_dir"])


def main(argv=None):
  """Command-line entry; returns the exit status (3: --require_learning, and it did not)."""
  quiet.install(argv)
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", default="runs/quickstart")
  parser.add_argument("--corpus_mb", type=float, default=4.0)
  parser.add_argument("--vocab_size", type=int, default=4000)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--dupe_factor", type=int, default=3)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--num_train_steps", type=int, default=1000)
  parser.add_argument("--learning_rate", type=float, default=0.005)
  parser.add_argument("--log_every_steps", type=int, default=50)
  parser.add_argument("--require_learning", action="store_true",
                      help="exit with status 3 unless the loss fell and MLM accuracy rose")
  args = parser.parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  return run(args)


if __name__ == "__main__":
  sys.exit(main())
