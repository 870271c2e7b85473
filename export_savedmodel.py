"""Exports SavedModels for serving and fine-tuning from a checkpoint (ours or the original's).

  python export_savedmodel.py --albert_config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --export_dir=exported/albert_base --max_seq_length=128 --tflite

Writes export_dir/encoder (TF-Hub-style encoder: serving_default and mlm signatures); with a
vocabulary (--spm_model_file or --vocab_file), export_dir/preprocessing (raw strings ->
input_word_ids/input_mask/input_type_ids, tokenized in-graph) and, when the checkpoint holds
the MLM head (a pretraining checkpoint, ours or the original's), export_dir/fill_mask (text
with [MASK]s -> top tokens); with --tflite, export_dir/encoder.tflite (--tflite_quantize: the
same file with dynamic-range int8 weights, about a quarter of the size). --jit_compile compiles
the encoder's signatures with XLA (see albert_tf/export/encoder.py).

export_dir is replaced as a whole, atomically: the bundle is written into a sibling
`<export_dir>.tmp-export-<pid>` and renamed into place, so nothing of a previous export stays
beside the new models, and a failed or killed export leaves the previous bundle untouched (the
next export removes the temporary folder it left).
"""

import logging
import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.export.bundle import export_bundle

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("checkpoint", None, "Checkpoint: ours, or an original TF1 / TF-Hub one.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model for the preprocessing model.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (when no --spm_model_file).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase in the preprocessing model.")
flags.DEFINE_string("export_dir", None, "Output folder.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the preprocessing model "
                     "(and of the TFLite model).")
flags.DEFINE_bool("tflite", False, "Also write encoder.tflite.")
flags.DEFINE_bool("tflite_quantize", False, "Write encoder.tflite with dynamic-range int8 "
                  "weights (about a quarter of the float32 size; implies --tflite).")
flags.DEFINE_enum("serving_dtype", "float32", ["float32", "bfloat16"],
                  "Compute dtype of the exported models: bfloat16 for CPUs with AVX512_BF16 / "
                  "AMX and for GPUs (weights stay float32; inputs and outputs are unchanged).")
flags.DEFINE_bool("jit_compile", False, "Compile the encoder's signatures with XLA (faster on "
                  "CPUs; XLA compiles once per input shape; TF Serving then needs "
                  "--xla_cpu_compilation_enabled=true).")


def main(argv):
  del argv
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  logging.getLogger().setLevel(logging.INFO)
  try:
    export_bundle(FLAGS.albert_config_file, FLAGS.checkpoint, FLAGS.export_dir,
                  FLAGS.spm_model_file, FLAGS.vocab_file, FLAGS.do_lower_case,
                  FLAGS.max_seq_length, FLAGS.tflite, FLAGS.jit_compile,
                  FLAGS.tflite_quantize, FLAGS.serving_dtype)
  except (OSError, ValueError) as e:
    logging.error("%s", e)
    return 1
  return 0


if __name__ == "__main__":
  for name in ("albert_config_file", "checkpoint", "export_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
