"""Pretrains ALBERT (MLM + SOP) with LAMB on any tf.distribute strategy (the original's flags).

  python run_pretraining.py --albert_config_file=configs/albert_base_v2.json \
      --input_file='data/train-*.tfrecord' --output_dir=runs/base --do_train --do_eval \
      --train_batch_size=4096 --max_seq_length=512 --num_train_steps=125000 \
      --num_warmup_steps=3125 --learning_rate=0.00176 --distribution_strategy=mirrored

Restarting with the same --output_dir resumes from its latest checkpoint.
"""

import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.cli.runs import run_pretraining
from albert_tf.tasks.pretraining import PretrainingOptions
from core_flags import define_core_flags, options_from_flags, run_job

FLAGS = flags.FLAGS
_D = PretrainingOptions()

flags.DEFINE_string("input_file", None, "Pretraining TFRecords: comma list and/or globs.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: an albert-tf checkpoint or an original TF1 one.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Sequence length of the data.")
flags.DEFINE_integer("max_predictions_per_seq", _D.max_predictions_per_seq,
                     "Masked LM predictions per sequence in the data.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate (writes eval_results.txt).")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Global eval batch.")
flags.DEFINE_float("poly_power", _D.poly_power, "Power of the polynomial decay.")
flags.DEFINE_integer("num_train_steps", _D.num_train_steps, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", _D.num_warmup_steps, "Warm-up steps.")
flags.DEFINE_integer("start_warmup_step", _D.start_warmup_step, "Step where warm-up starts.")
flags.DEFINE_integer("max_eval_steps", _D.max_eval_steps, "Eval batches.")
flags.DEFINE_bool("init_from_group0", False,
                  "Initialise every group from group 0 of --init_checkpoint.")
flags.DEFINE_bool("dynamic_masking", False,
                  "Mask anew each time a record is read (RoBERTa-style), in tf.data, with "
                  "SPEC's n-gram rules; needs data made with create_pretraining_data "
                  "--no_masking.")
flags.DEFINE_float("masked_lm_prob", _D.masked_lm_prob, "With --dynamic_masking: masked LM "
                   "probability.")
flags.DEFINE_integer("ngram", _D.ngram, "With --dynamic_masking: longest n-gram (in words).")
flags.DEFINE_bool("favor_shorter_ngram", _D.favor_shorter_ngram,
                  "With --dynamic_masking: P(n) proportional to 1/n (else reversed).")
flags.DEFINE_bool("do_whole_word_mask", _D.do_whole_word_mask,
                  "With --dynamic_masking: mask whole words.")
flags.DEFINE_float("sentence_loss_weight", _D.sentence_loss_weight,
                   "Weight of the sentence loss (SOP, or NSP on --random_next_sentence data); "
                   "0 trains the masked LM alone.")
define_core_flags(_D)


def main(argv):
  del argv
  return run_job(run_pretraining, options_from_flags(PretrainingOptions))


if __name__ == "__main__":
  for name in ("input_file", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
