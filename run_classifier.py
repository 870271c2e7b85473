"""Fine-tunes ALBERT on a GLUE or Chinese (CLUE) task or your own CSV/TSV (the original's flags).

  python run_classifier.py --task_name=sst-2 --data_dir=glue/SST-2 --output_dir=runs/sst2 \
      --albert_config_file=albert_base/albert_config.json \
      --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=1e-5 --train_step=20935 --warmup_step=1256

Chinese tasks read their released files with albert_zh's WordPiece vocabulary; --do_predict
writes the CLUE submission `<task>_predict.json` (one `{"id", "label"}` line per test row):

  python run_classifier.py --task_name=afqmc --data_dir=clue/afqmc --output_dir=runs/afqmc \
      --albert_config_file=configs/albert_base_zh.json \
      --vocab_file=albert_base_zh/vocab_chinese.txt \
      --init_checkpoint=albert_base_zh/model.ckpt-best --do_train --do_eval --do_predict \
      --max_seq_length=128 --learning_rate=2e-5

The starting point may be one of our checkpoints, an original TF1 checkpoint, or an encoder
SavedModel from export_savedmodel.py (--albert_hub_module_handle=exported/encoder).
"""

import dataclasses
import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.cli.runs import run_classifier
from albert_tf.tasks.classification import ClassifierOptions, CsvOptions
from script_flags import (define_job_flags, define_options_flags, job_options, options_from_flags,
                          run_job)

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """ClassifierOptions' flags (distillation's with them), the csv task's and where the job
  runs."""
  define_job_flags(ClassifierOptions, flag_values)
  define_options_flags(CsvOptions, flag_values)


def main(argv):
  del argv
  csv_options = {}
  if FLAGS.task_name and FLAGS.task_name.lower() == "csv":
    csv_options = dataclasses.asdict(options_from_flags(CsvOptions))
  return run_job(run_classifier, job_options(ClassifierOptions, csv_options=csv_options))


if __name__ == "__main__":
  define_flags()
  for name in ("task_name", "data_dir", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
