"""Converts ALBERT checkpoints between the original's TF1 format, ours and Hugging Face's.

    # the original's albert_base_v2 -> a transformers directory (AlbertForPreTraining)
    python -m albert_tf.cli.convert --from=tf1 --to=huggingface \\
        --checkpoint=albert_base/model.ckpt-best \\
        --albert_config_file=albert_base/albert_config.json \\
        --spm_model_file=albert_base/30k-clean.model --output_dir=albert_base_hf
    # a transformers directory -> our checkpoint (config and tokenizer come from the directory)
    python -m albert_tf.cli.convert --from=huggingface --to=native --input_dir=albert_base_hf \\
        --output_dir=albert_base_native

The formats, how the head is found and what is refused: albert_tf/interop/convert.py, which
does the work (`convert`). Exit status 0, or 1 with the error on stderr.
"""

import argparse
import logging
import sys

from albert_tf.cli import quiet


def _parse(argv):
  from albert_tf.interop.convert import (  # pylint: disable=g-import-not-at-top
      HEADS, INPUT_FORMATS, OUTPUT_FORMATS)
  p = argparse.ArgumentParser(prog="python -m albert_tf.cli.convert",
                              description=__doc__.splitlines()[0])
  p.add_argument("--from", dest="from_format", required=True, choices=INPUT_FORMATS)
  p.add_argument("--to", dest="to_format", required=True, choices=OUTPUT_FORMATS)
  p.add_argument("--checkpoint", help="tf1/native: a checkpoint prefix or its directory")
  p.add_argument("--input_dir", help="huggingface: the directory (also accepted as --checkpoint)")
  p.add_argument("--albert_config_file",
                 help="albert_config.json (tf1/native; default: the one beside the checkpoint; "
                      "huggingface reads config.json)")
  p.add_argument("--spm_model_file", help="SentencePiece model to write with the output")
  p.add_argument("--vocab_file", help="WordPiece vocab.txt, when no --spm_model_file")
  p.add_argument("--do_lower_case", default=None, type=lambda s: s.lower() not in ("false", "0"),
                 help="for the tokenizer files (default: the source's, else true)")
  p.add_argument("--head", default="auto", choices=HEADS,
                 help="which head to convert; 'encoder' drops any head")
  p.add_argument("--output_dir", required=True)
  args = p.parse_args(argv)
  source = args.input_dir or args.checkpoint
  if not source:
    p.error("--checkpoint (tf1, native) or --input_dir (huggingface) is required")
  return args, source


def main(argv=None):
  """Command-line entry; returns the exit status."""
  quiet.install(argv)
  args, source = _parse(argv)  # (imports the converter, and with it TensorFlow)
  from albert_tf.interop.convert import convert  # pylint: disable=g-import-not-at-top
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  try:
    convert(args.from_format, args.to_format, source, args.output_dir,
            albert_config_file=args.albert_config_file, head=args.head,
            spm_model_file=args.spm_model_file, vocab_file=args.vocab_file,
            do_lower_case=args.do_lower_case)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
