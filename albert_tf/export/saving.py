"""Writing a SavedModel so that a served folder is never half-written."""

import tensorflow as tf

from albert_tf import files
from albert_tf.export.warmup import write_warmup_requests
from albert_tf.modeling.activations import plain_activations


def save_atomically(module, export_dir, signatures, num_choices=4):
  """`tf.saved_model.save` into a temporary folder that replaces `export_dir` when complete
  (files.py's rule), with the activations traced in their plain form (no training-only
  variants in a served graph), and TF Serving's warm-up requests in its assets.extra/ (a model
  server replays them before serving it; `num_choices`: a multiple-choice export's options
  per row). Returns `export_dir`."""
  with files.atomic_path(export_dir) as tmp, plain_activations():
    tf.saved_model.save(module, tmp, signatures=signatures)
    write_warmup_requests(tmp, num_choices)
  return export_dir
