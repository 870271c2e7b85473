"""Trains a SentencePiece model with the original ALBERT recipe (SPEC.md, "Tokenization").

    python -m albert_tf.cli.train_spm --input "corpus/*.txt" \
        --model_prefix out/30k-clean --vocab_size 30000

The recipe, the normalisation and how the model files appear: albert_tf/tokenization/
train_spm.py, which does the work (`train_sentencepiece`). `--do_lower_case` (the default)
lowercases the corpus as FullTokenizer(do_lower_case=True) will at encode time.
"""

import argparse
import sys

from albert_tf.cli import quiet
from albert_tf.tokenization.train_spm import DEFAULT_NUM_THREADS, RECIPE, train_sentencepiece


def _bool(text):
  value = text.strip().lower()
  if value in ("true", "1", "yes"):
    return True
  if value in ("false", "0", "no"):
    return False
  raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _parse(argv):
  p = argparse.ArgumentParser(
      prog="python -m albert_tf.cli.train_spm", description=__doc__.splitlines()[0])
  p.add_argument("--input", required=True,
                 help="utf-8 text files: a comma list of paths and glob patterns")
  p.add_argument("--model_prefix", required=True,
                 help="writes <model_prefix>.model and <model_prefix>.vocab")
  p.add_argument("--vocab_size", type=int, default=30000,
                 help="pieces, specials included (default: the original's 30000)")
  p.add_argument("--do_lower_case", nargs="?", type=_bool, const=True, default=True,
                 help="lowercase the corpus, as FullTokenizer(do_lower_case=True) will at "
                 "encode time (default true; --do_lower_case=false or --nodo_lower_case "
                 "to keep case)")
  p.add_argument("--nodo_lower_case", dest="do_lower_case", action="store_false",
                 help=argparse.SUPPRESS)
  p.add_argument("--input_sentence_size", type=int, default=RECIPE["input_sentence_size"],
                 help="sentences SentencePiece samples from the corpus (default %(default)s)")
  p.add_argument("--character_coverage", type=float, default=RECIPE["character_coverage"],
                 help="share of characters covered by the vocab (default %(default)s)")
  p.add_argument("--num_threads", type=int, default=DEFAULT_NUM_THREADS,
                 help="training threads (default %(default)s)")
  p.add_argument("--seed_sentencepiece_size", type=int,
                 default=RECIPE["seed_sentencepiece_size"],
                 help="initial unigram candidates (default %(default)s)")
  p.add_argument("--verbose", action="store_true", help="show SentencePiece's own log")
  return p.parse_args(argv)


def main(argv=None):
  """Command-line entry; returns the exit status (0, or 1 with the error on stderr)."""
  quiet.install(argv)
  args = _parse(argv)
  try:
    train_sentencepiece(
        args.input, args.model_prefix, args.vocab_size, do_lower_case=args.do_lower_case,
        input_sentence_size=args.input_sentence_size,
        character_coverage=args.character_coverage, num_threads=args.num_threads,
        seed_sentencepiece_size=args.seed_sentencepiece_size,
        minloglevel=0 if args.verbose else 1)
  except (OSError, ValueError, RuntimeError) as e:
    print(f"train_spm: error: {e}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
