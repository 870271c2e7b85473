"""Writing a SavedModel so that a served folder is never half-written."""

import tensorflow as tf

from albert_tf import files
from albert_tf.export.warmup import write_warmup_requests
from albert_tf.modeling.activations import plain_activations

# Serving exports are saved without their custom gradients (the `tf.custom_gradient` functions
# of modeling/'s GELU, LayerNorm, softmax, dropout and casts): nobody differentiates a served
# model, and each `tf.saved_model.load` registers every saved gradient in TensorFlow's global
# gradient registry, which then keeps that load's functions and graphs alive for the life of
# the process (about 150 MB per load of a tiny classifier export; issue 56).
INFERENCE_ONLY = tf.saved_model.SaveOptions(experimental_custom_gradients=False)


def save_atomically(module, export_dir, signatures, options=INFERENCE_ONLY, num_choices=4):
  """`tf.saved_model.save` into a temporary folder that replaces `export_dir` when complete
  (files.py's rule), with the activations traced in their plain form (no training-only
  variants in a served graph), and TF Serving's warm-up requests in its assets.extra/ (a model
  server replays them before serving it; `num_choices`: a multiple-choice export's options
  per row). `options`: INFERENCE_ONLY unless the export is meant to be differentiated.
  Returns `export_dir`."""
  with files.atomic_path(export_dir) as tmp, plain_activations():
    tf.saved_model.save(module, tmp, signatures=signatures, options=options)
    write_warmup_requests(tmp, num_choices)
  return export_dir
