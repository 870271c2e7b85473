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
from script_flags import define_job_flags, job_options, run_job

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """PretrainingOptions' flags and where the job runs."""
  define_job_flags(PretrainingOptions, flag_values)


def main(argv):
  del argv
  return run_job(run_pretraining, job_options(PretrainingOptions))


if __name__ == "__main__":
  define_flags()
  for name in ("input_file", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
