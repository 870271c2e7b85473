"""Pretrains ALBERT (MLM + SOP) with LAMB on any tf.distribute strategy (the original's flags).

  python run_pretraining.py --albert_config_file=configs/albert_base_v2.json \
      --input_file='data/train-*.tfrecord' --output_dir=runs/base --do_train --do_eval \
      --train_batch_size=4096 --max_seq_length=512 --num_train_steps=125000 \
      --num_warmup_steps=3125 --learning_rate=0.00176 --distribution_strategy=mirrored

Restarting with the same --output_dir resumes from its latest checkpoint.
"""

import logging
import sys

from absl import app
from absl import flags

from albert_tf.distribute import STRATEGIES, create_strategy
from albert_tf.training import PretrainingOptions, run_pretraining

FLAGS = flags.FLAGS
_D = PretrainingOptions()

flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("input_file", None, "Pretraining TFRecords: comma list and/or globs.")
flags.DEFINE_string("output_dir", None, "Checkpoints, summaries and eval_results.txt.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: an albert-tf checkpoint or an original TF1 one.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Sequence length of the data.")
flags.DEFINE_integer("max_predictions_per_seq", _D.max_predictions_per_seq,
                     "Masked LM predictions per sequence in the data.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate (writes eval_results.txt).")
flags.DEFINE_integer("train_batch_size", _D.train_batch_size, "Global batch per step.")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Global eval batch.")
flags.DEFINE_enum("optimizer", _D.optimizer, ["lamb", "adamw"], "Optimizer.")
flags.DEFINE_float("learning_rate", _D.learning_rate, "Peak learning rate.")
flags.DEFINE_float("poly_power", _D.poly_power, "Power of the polynomial decay.")
flags.DEFINE_integer("num_train_steps", _D.num_train_steps, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", _D.num_warmup_steps, "Warm-up steps.")
flags.DEFINE_integer("start_warmup_step", _D.start_warmup_step, "Step where warm-up starts.")
flags.DEFINE_integer("save_checkpoints_steps", _D.save_checkpoints_steps,
                     "Steps between checkpoints.")
flags.DEFINE_integer("keep_checkpoint_max", _D.keep_checkpoint_max, "Checkpoints kept.")
flags.DEFINE_integer("iterations_per_loop", _D.iterations_per_loop,
                     "Steps per tf.function call (host round trip).")
flags.DEFINE_integer("max_eval_steps", _D.max_eval_steps, "Eval batches.")
flags.DEFINE_bool("use_tpu", False, "Train on a TPU (same as --distribution_strategy=tpu).")
flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
flags.DEFINE_string("master", None, "TensorFlow master (TPU address when no --tpu_name).")
flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores (informational: the TPU system decides).")
flags.DEFINE_bool("init_from_group0", False,
                  "Initialise every group from group 0 of --init_checkpoint.")
flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES), "tf.distribute.")
flags.DEFINE_integer("gradient_accumulation_steps", 1,
                     "Micro-batches per step (train_batch_size is the whole step's batch).")
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "bfloat16", "float16"],
                  "Compute precision (float16 uses dynamic loss scaling).")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the forward and backward pass.")
flags.DEFINE_bool("bias_correction", False,
                  "Adam bias correction in LAMB/AdamW (the original has none).")
flags.DEFINE_bool("recompute_grad", False,
                  "Recompute each transformer block in the backward pass: activation memory of "
                  "one block instead of all, for about a third more compute.")
flags.DEFINE_integer("seed", None, "Seed of the initial weights, dropout and input "
                     "shuffling: the same seed repeats a run on the same machine.")
flags.DEFINE_bool("checkpoint_input_pipeline", True,
                  "Save the input position in checkpoints (one device / mirrored), so a resumed "
                  "run reads exactly the batches an uninterrupted run would.")
flags.DEFINE_float("log_every_seconds", _D.log_every_seconds, "Seconds between progress lines.")


def main(argv):
  del argv
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  logging.getLogger().setLevel(logging.INFO)
  options = PretrainingOptions(**{k: FLAGS[k].value for k in PretrainingOptions.__annotations__
                                  if k in FLAGS})
  strategy_name = "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy
  try:
    strategy = create_strategy(strategy_name, FLAGS.tpu_name, FLAGS.tpu_zone, FLAGS.gcp_project,
                               FLAGS.master)
    run_pretraining(options, strategy)
  except (OSError, ValueError, FloatingPointError) as e:
    logging.error("%s", e)
    return 1
  return 0


if __name__ == "__main__":
  for name in ("albert_config_file", "input_file", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
