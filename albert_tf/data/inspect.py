"""`python -m albert_tf.data.inspect`, as documented before the re-foldering (issue 42), is
`python -m albert_tf.cli.inspect` now: this module only says so, and exits 1."""

import sys

if __name__ == "__main__":
  sys.exit("python -m albert_tf.data.inspect moved: run python -m albert_tf.cli.inspect")
