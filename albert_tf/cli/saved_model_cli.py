"""`saved_model_cli` with tensorflow-text's ops registered, for the raw-text SavedModels.

    python -m albert_tf.cli.saved_model_cli run --dir exported/base/fill_mask \
        --tag_set serve --signature_def serving_default --input_exprs 'text=["a [MASK] day"]'

TensorFlow's own `saved_model_cli` cannot run the preprocessing, fill-mask or classifier
serving models: their in-graph tokenizer uses tensorflow-text ops, which a process must import
before loading. This entry point imports them and hands over to TensorFlow's tool unchanged.
"""

import sys

from albert_tf.cli import quiet


def main(argv=None):
  """Command-line entry; returns TensorFlow's tool's exit status."""
  argv = sys.argv[1:] if argv is None else list(argv)
  quiet.install(argv)
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from tensorflow.python.tools import saved_model_cli  # pylint: disable=g-import-not-at-top
  given, sys.argv[1:] = sys.argv[1:], argv  # TensorFlow's tool parses sys.argv (absl, argparse)
  try:
    saved_model_cli.main()
  except SystemExit as e:  # absl's app.run always exits
    if e.code is None or isinstance(e.code, int):
      return e.code or 0
    raise
  finally:
    sys.argv[1:] = given
  return 0


if __name__ == "__main__":
  sys.exit(main())
