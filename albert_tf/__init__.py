"""albert-tf: ALBERT on TensorFlow 2 / tf_keras, faithful to the original's weights and data.

The public names below are imported lazily so `import albert_tf.tokenization` (or the config)
does not pay for TensorFlow's import.
"""

import importlib
import sys

# `python -m albert_tf.<tool>`: runpy imports this package first, while sys.argv[0] is "-m".
# The tools then start as quietly as the scripts do (quiet.py); importers of albert_tf do not.
if (sys.argv[:1] == ["-m"] and
    sys.orig_argv[-len(sys.argv)].removeprefix("-m").split(".")[0] == __name__):
  from albert_tf.cli import quiet  # noqa: F401  pylint: disable=unused-import

_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "AlbertEncoder": "albert_tf.modeling.encoder",
    "AlbertPretrainer": "albert_tf.modeling.pretrainer",
    "load_checkpoint": "albert_tf.interop.checkpoints",
    "save_tf1_checkpoint": "albert_tf.interop.checkpoints",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
