"""`python -m albert_tf.convert`, as documented before the re-foldering (issue 42), is
`python -m albert_tf.cli.convert` now: this module only says so, and exits 1."""

import sys

if __name__ == "__main__":
  sys.exit("python -m albert_tf.convert moved: run python -m albert_tf.cli.convert")
