"""The built-in default job (until pretraining lands): build, checkpoint, reload, predict.

    python -m albert_tf.demo [--albert_config_file configs/albert_base_v2.json]

Builds an AlbertPretrainer from a config, loads `--init_checkpoint` (an original TF1 ALBERT
checkpoint or ours) or else writes a fresh one in both formats to `--output_dir` and reloads
it into a second model (checking the outputs agree), tokenizes a sentence pair with ALBERT's
SentencePiece model, and prints the outputs, masked-token predictions, the sentence-order
probabilities and the parameter counts.
"""

import argparse
import logging
import os
import sys
import time

import numpy as np

from albert_tf import tokenization
from albert_tf.cli.summary import format_summary

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CONFIG = os.path.join(_ROOT, "configs", "albert_base_v2.json")
DEFAULT_SPM = os.path.join(os.path.dirname(_ROOT), "shared", "data", "sentencepiece",
                           "spiece.model")


def _parse(argv):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--albert_config_file", default=DEFAULT_CONFIG)
  p.add_argument("--spm_model_file", default=DEFAULT_SPM,
                 help="SentencePiece model (default: ../shared/data's ALBERT 30k model)")
  p.add_argument("--vocab_file", default=None, help="WordPiece vocab.txt (if no spm model)")
  p.add_argument("--do_lower_case", default=True, type=lambda s: s.lower() != "false")
  p.add_argument("--init_checkpoint", default=None,
                 help="original TF1 ALBERT checkpoint or an albert-tf checkpoint")
  p.add_argument("--output_dir", default=os.path.join(_ROOT, "demo_output"))
  p.add_argument("--text_a", default="The quick brown fox jumped over the lazy dog.")
  p.add_argument("--text_b", default="Then it ran back into the forest, in 1990, alone.")
  p.add_argument("--max_seq_length", type=int, default=32)
  return p.parse_args(argv)


def run(args):
  import tensorflow as tf  # after argument parsing, so --help is instant
  tf.get_logger().setLevel(logging.WARNING)
  from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint, save_tf1_checkpoint
  from albert_tf.interop.checkpoints import native_checkpoint

  config = AlbertConfig.from_json_file(args.albert_config_file)
  if args.vocab_file and not os.path.exists(args.spm_model_file or ""):
    tokenizer = tokenization.FullTokenizer(vocab_file=args.vocab_file,
                                           do_lower_case=args.do_lower_case)
  else:
    tokenizer = tokenization.FullTokenizer(spm_model_file=args.spm_model_file,
                                           do_lower_case=args.do_lower_case)
  if tokenizer.vocab_size != config.vocab_size:
    raise ValueError(f"tokenizer has {tokenizer.vocab_size} entries but "
                     f"{args.albert_config_file} says vocab_size={config.vocab_size}")

  print(format_summary(config, args.max_seq_length), "\n")
  start = time.time()
  model = AlbertPretrainer(config)
  print(f"built AlbertPretrainer: {model.count_params():,} parameters "
        f"in {time.time() - start:.1f}s")

  if args.init_checkpoint:
    print(load_checkpoint(model, args.init_checkpoint).summary())
  else:
    os.makedirs(args.output_dir, exist_ok=True)
    tf1_prefix = save_tf1_checkpoint(model, os.path.join(args.output_dir, "tf1", "model.ckpt"))
    native_path = native_checkpoint(model).write(os.path.join(args.output_dir, "native",
                                                              "ckpt"))
    print(f"wrote a fresh checkpoint in the original's format: {tf1_prefix}")
    print(f"wrote the same weights as an albert-tf checkpoint:  {native_path}")

  features = tokenization.encode_pair(tokenizer, args.text_a, args.text_b,
                                      args.max_seq_length)
  tokens = features["tokens"]
  # Mask the first word piece of segment B, to show the MLM head's predictions.
  masked = tokens.index(tokenizer.sep_token) + 1
  ids = list(features["input_ids"])
  original_id = ids[masked]
  ids[masked] = tokenizer.mask_id
  inputs = {
      "input_word_ids": tf.constant([ids], tf.int32),
      "input_mask": tf.constant([features["input_mask"]], tf.int32),
      "input_type_ids": tf.constant([features["segment_ids"]], tf.int32),
      "masked_lm_positions": tf.constant([[masked]], tf.int32),
  }
  outputs = model(inputs, training=False)

  if not args.init_checkpoint:
    reloaded = AlbertPretrainer(config)
    report = load_checkpoint(reloaded, tf1_prefix)
    again = reloaded(inputs, training=False)
    diff = float(np.max(np.abs(again["sop_logits"] - outputs["sop_logits"])))
    print(f"reloaded {len(report.loaded)} variables from the TF1 checkpoint; "
          f"max |difference| in outputs: {diff:.2e}")

  print(f"\ntokens ({len(tokens)}): {' '.join(tokens)}")
  for key in ("embedding_output", "sequence_output", "pooled_output", "mlm_logits",
              "sop_logits"):
    print(f"  {key:<17} {outputs[key].shape}")
  print(f"  encoder_outputs   {len(outputs['encoder_outputs'])} x "
        f"{outputs['encoder_outputs'][0].shape}")
  probs = tf.nn.softmax(outputs["mlm_logits"][0, 0]).numpy()
  top = np.argsort(-probs)[:5]
  guesses = ", ".join(f"{tokenizer.convert_ids_to_tokens([int(i)])[0]} ({probs[i]:.3f})"
                      for i in top)
  print(f"masked {tokenizer.convert_ids_to_tokens([original_id])[0]!r} at position {masked}; "
        f"top predictions: {guesses}")
  sop = tf.nn.softmax(outputs["sop_logits"][0]).numpy()
  print(f"sentence order: P(in order)={sop[0]:.3f}  P(swapped)={sop[1]:.3f}")
  if not args.init_checkpoint:
    print("(random weights: pass --init_checkpoint to load a trained ALBERT)")
  return 0


def main(argv=None):
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  args = _parse(argv)
  try:
    return run(args)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
