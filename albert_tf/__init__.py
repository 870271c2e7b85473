"""albert-tf: ALBERT on TensorFlow 2 / tf_keras, faithful to the original's weights and data.

The public names below are imported lazily so `import albert_tf.tokenization` (or the config)
does not pay for TensorFlow's import. Importing albert_tf, or any of its modules, changes
nothing in the process (environment, logging, import hooks): the command-line tools quiet
TensorFlow themselves (`albert_tf.cli.quiet.install`).
"""

import importlib

_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "AlbertEncoder": "albert_tf.modeling.encoder",
    "AlbertPretrainer": "albert_tf.modeling.pretrainer",
    "load_checkpoint": "albert_tf.interop.checkpoints",
    "load_saved_model": "albert_tf.interop.saved_models",
    "save_tf1_checkpoint": "albert_tf.interop.checkpoints",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
