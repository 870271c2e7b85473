"""Parameter counts by part and training FLOPs per token, for choosing a config.

    python -m albert_tf.cli.summary --albert_config_file configs/albert_base_v2.json

Computed from the config, no model built (albert_tf/modeling/summary.py): xxlarge is instant.
Exit status 0, or 2 when the config cannot be read.
"""

import argparse
import sys

from albert_tf.cli import quiet
from albert_tf.config import AlbertConfig
from albert_tf.modeling.summary import format_summary


def main(argv=None):
  """Command-line entry; returns the exit status."""
  quiet.install(argv)
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--albert_config_file", required=True, help="albert_config.json")
  parser.add_argument("--max_seq_length", type=int, default=512)
  parser.add_argument("--max_predictions_per_seq", type=int, default=20)
  args = parser.parse_args(argv)
  try:
    config = AlbertConfig.from_json_file(args.albert_config_file)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(format_summary(config, args.max_seq_length, args.max_predictions_per_seq))
  return 0


if __name__ == "__main__":
  sys.exit(main())
