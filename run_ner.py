"""Fine-tunes ALBERT for named-entity recognition (token classification): English or Chinese.

  python run_ner.py --data_format=conll --data_dir=conll2003 --output_dir=runs/conll \
      --albert_config_file=albert_base/albert_config.json \
      --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --train_step=5000 \
      --warmup_step=500 --do_train --do_eval --do_predict
  python run_ner.py --data_format=cluener --data_dir=cluener --use_crf \
      --albert_config_file=albert_tiny_zh/albert_config_tiny.json \
      --init_checkpoint=albert_tiny_zh/albert_model.ckpt --vocab_file=albert_tiny_zh/vocab.txt ...

--data_dir holds the format's usual files (conll: train.txt, valid.txt, test.txt; cluener:
train.json, dev.json, test.json; jsonl: train.jsonl, dev.jsonl, test.jsonl), or name them with
--train_file / --dev_file / --test_file. Column files may use IOB1, BIO, BIOES or BMES tags
(--tag_scheme, detected by default), one word or one Chinese character per line.
"""

import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.cli.runs import run_ner
from albert_tf.tasks.ner import NerOptions
from script_flags import define_job_flags, job_options, run_job

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """NerOptions' flags and where the job runs."""
  define_job_flags(NerOptions, flag_values)


def main(argv):
  del argv
  return run_job(run_ner, job_options(NerOptions))


if __name__ == "__main__":
  define_flags()
  flags.mark_flag_as_required("output_dir")
  app.run(lambda argv: sys.exit(main(argv)))
