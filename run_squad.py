"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 and writes predictions (the original script's flags).

  python run_squad.py --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --version_2_with_negative --output_dir=runs/squad2 \
      --albert_config_file=albert_base/albert_config.json \
      --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_predict --max_seq_length=384 --doc_stride=128 --max_query_length=64 \
      --train_batch_size=48 --learning_rate=3e-5 --num_train_epochs=2.0 --export_dir=runs/serve

Chinese (CMRC 2018, DRCD) with albert_zh's WordPiece vocabulary, scored by the CMRC 2018 metric:

  python run_squad.py --train_file=cmrc2018_train.json --predict_file=cmrc2018_dev.json \
      --output_dir=runs/cmrc --albert_config_file=configs/albert_base_zh.json \
      --init_checkpoint=albert_base_zh/model.ckpt-best \
      --vocab_file=albert_base_zh/vocab_chinese.txt --do_train --do_predict \
      --max_seq_length=512 --learning_rate=3e-5 --eval_metric=cmrc2018 --export_dir=runs/serve_zh

Outputs in --output_dir: checkpoints, predictions.json, nbest_predictions.json, null_odds.json
(v2), eval_results.txt (official EM/F1 over the questions of --predict_file that have
answers, or the CMRC 2018 EM/F1/AVERAGE; `skipped_unanswered` counts the others), cached
features.
"""

import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.cli.runs import run_squad
from albert_tf.tasks.squad import SquadOptions
from script_flags import define_job_flags, job_options, run_job

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """SquadOptions' flags and where the job runs."""
  define_job_flags(SquadOptions, flag_values)


def main(argv):
  del argv
  return run_job(run_squad, job_options(SquadOptions))


if __name__ == "__main__":
  define_flags()
  for name in ("output_dir",):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
