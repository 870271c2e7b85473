"""Fine-tunes ALBERT on RACE (multiple-choice reading comprehension) or your own multiple choice.

  python run_race.py --data_dir=race --output_dir=runs/race \
      --albert_config_file=albert_base/albert_config.json \
      --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --max_seq_length=512 --max_qa_length=128 --train_batch_size=32 --learning_rate=1e-5 \
      --train_step=12000 --warmup_step=1000 --do_train --do_eval --do_predict

--data_dir holds RACE/{train,dev,test}/{middle,high}/ with the release's one-article files or
the original's all.txt (one article per line). Your own data: --task_name=csv with
train/dev/test.csv (or .tsv) and --context_column, --question_column, --option_columns (N
choices) and --label_column (the answer's index or text).
"""

import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.cli.runs import run_race
from albert_tf.tasks.race import RaceOptions
from script_flags import define_job_flags, job_options, run_job

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """RaceOptions' flags, where the job runs, and the original's other name of one of them."""
  define_job_flags(RaceOptions, flag_values)
  flags.DEFINE_integer("num_keep_checkpoint", None,
                       "The original's name of --keep_checkpoint_max.", flag_values=flag_values)


def main(argv):
  del argv
  keep = {}
  if FLAGS.num_keep_checkpoint is not None:
    keep["keep_checkpoint_max"] = FLAGS.num_keep_checkpoint
  return run_job(run_race, job_options(RaceOptions, **keep))


if __name__ == "__main__":
  define_flags()
  for name in ("data_dir", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
