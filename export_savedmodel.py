"""Exports SavedModels for serving and fine-tuning from a checkpoint (ours or the original's).

  python export_savedmodel.py --albert_config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --export_dir=exported/albert_base --max_seq_length=128 --tflite

Writes export_dir/encoder (TF-Hub-style encoder: serving_default and mlm signatures); with a
vocabulary (--spm_model_file or --vocab_file), export_dir/preprocessing (raw strings ->
input_word_ids/input_mask/input_type_ids, tokenized in-graph) and, when the checkpoint holds
the MLM head (a pretraining checkpoint, ours or the original's), export_dir/fill_mask (text
with [MASK]s -> top tokens); with --tflite, export_dir/encoder.tflite (--tflite_quantize: the
same file with dynamic-range int8 weights, about a quarter of the size); with --onnx,
export_dir/encoder.onnx for ONNX Runtime, any batch and length (--onnx_quantize: its dynamic
int8; docs/onnx.md). --jit_compile compiles the encoder's signatures with XLA (see
albert_tf/export/encoder.py); --serving_dtype=bfloat16 / float16 computes in that dtype.

export_dir is replaced as a whole, atomically: the bundle is written into a sibling
`<export_dir>.tmp-export-<pid>` and renamed into place, so nothing of a previous export stays
beside the new models, and a failed or killed export leaves the previous bundle untouched (the
next export removes the temporary folder it left).
"""

import dataclasses
import logging
import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.export.bundle import BundleOptions, export_bundle
from script_flags import define_options_flags, options_from_flags

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """BundleOptions' flags."""
  define_options_flags(BundleOptions, flag_values)


def main(argv):
  del argv
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  logging.getLogger().setLevel(logging.INFO)
  try:
    export_bundle(**dataclasses.asdict(options_from_flags(BundleOptions)))
  except (OSError, ValueError) as e:
    logging.error("%s", e)
    return 1
  return 0


if __name__ == "__main__":
  define_flags()
  for name in ("albert_config_file", "checkpoint", "export_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
