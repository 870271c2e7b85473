"""Statistics of pretraining TFRecords (ours or the original's).

    python -m albert_tf.cli.inspect data/train-*.tfrecord [--spm_model_file=30k-clean.model]

Prints the record count, the feature spec found in the files and the statistics of
albert_tf/data/pretraining/statistics.py (`record_statistics`), or them all as JSON (`--json`).
The replacement split's `[MASK]` id comes from `--spm_model_file` / `--vocab_file`, else from
the vocabulary that create_pretraining_data's JSON beside the shards names, else `--mask_id`;
with none of them the tool refuses instead of guessing. Exit status 0, or 2 with the error on
stderr.
"""

import argparse
import glob
import json
import sys

from albert_tf.cli import quiet
from albert_tf.data.pretraining.statistics import record_statistics


def main(argv=None):
  """Command-line entry; returns the exit status."""
  quiet.install(argv)
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("files", nargs="+", help="TFRecord files or globs")
  parser.add_argument("--spm_model_file", help="SentencePiece model the records were made with")
  parser.add_argument("--vocab_file", help="WordPiece vocab.txt, when no --spm_model_file")
  parser.add_argument("--mask_id", type=int, default=None,
                      help="[MASK] id, when no vocabulary is at hand (default: the "
                           "vocabulary's, or the one create_pretraining_data's JSON names)")
  parser.add_argument("--json", action="store_true", help="print JSON")
  args = parser.parse_args(argv)
  files = []
  for pattern in args.files:
    matches = sorted(glob.glob(pattern))
    if not matches:
      print(f"error: no file matches {pattern}", file=sys.stderr)
      return 2
    files += matches
  try:
    stats = record_statistics(files, args.mask_id, spm_model_file=args.spm_model_file,
                              vocab_file=args.vocab_file)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.json:
    print(json.dumps(stats, indent=2))
    return 0
  print(f"{stats['records']} records in {len(files)} files")
  print("features:")
  for name, f in stats["features"].items():
    print(f"  {name:<22} {f['type']:<11} [{f['length']}]")
  for key, value in stats.items():
    if key not in ("records", "features"):
      print(f"{key}: {value}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
