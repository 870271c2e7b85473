"""Creates ALBERT pretraining TFRecords from plain text (the original script's flags).

Input: one sentence per line, a blank line between documents. Example:

  python create_pretraining_data.py --input_file='corpus/*.txt' \
      --output_file=data/train-0.tfrecord,data/train-1.tfrecord \
      --spm_model_file=30k-clean.model --max_seq_length=128 --dupe_factor=5

Chinese (albert_zh) with whole-word masking of jieba words:

  python create_pretraining_data.py --input_file=zh.txt --output_file=zh.tfrecord \
      --vocab_file=albert_zh/vocab.txt --word_segmentation=jieba

On a cluster (or with Beam's DirectRunner on this machine), the same shards come from an Apache
Beam pipeline when --beam_pipeline_options is given (albert_tf/data/pretraining/beam_pipeline.py):

  python create_pretraining_data.py --input_file='gs://bucket/corpus/*.txt' \
      --output_file=gs://bucket/data/train-0.tfrecord,gs://bucket/data/train-1.tfrecord \
      --spm_model_file=30k-clean.model \
      --beam_pipeline_options="--runner=DataflowRunner --project=P --region=R ..."

SIGINT (Ctrl-C) or SIGTERM stops the workers at once (Beam's DirectRunner's too) and removes the
temporary shards, with exit status 130 or 143 (128 + the signal): nothing is written under the
output names until the whole job has succeeded. A rerun removes what a run killed outright
(SIGKILL) left. Either path refuses a job that cannot finish (bad --beam_pipeline_options, a
missing or read-only output folder) in one line before any work.
"""

import dataclasses
import logging
import signal
import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.data.pretraining.create import (CreationOptions, Interrupted,
                                               create_pretraining_data, expand_input_files)
from script_flags import define_options_flags, options_from_flags

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
  """The job's files and CreationOptions' flags."""
  flags.DEFINE_string("input_file", None, "Input text files: comma list and/or globs.",
                      flag_values=flag_values)
  flags.DEFINE_string("output_file", None, "Output TFRecord shards: comma list.",
                      flag_values=flag_values)
  flags.DEFINE_string("metadata_file", None,
                      "JSON of counts and flags (default: beside the output shards).",
                      flag_values=flag_values)
  flags.DEFINE_string("beam_pipeline_options", None,
                      "Apache Beam's own options as one string (e.g. \"--runner=DirectRunner "
                      "--direct_num_workers=2 --direct_running_mode=multi_processing\"): given, "
                      "an Apache Beam pipeline makes the same shards (--num_workers is then "
                      "Beam's business); otherwise this machine's worker processes do.",
                      flag_values=flag_values)
  define_options_flags(CreationOptions, flag_values)


def main(argv):
  del argv
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
  options = options_from_flags(CreationOptions)
  if options.spm_model_file:
    options = dataclasses.replace(options, vocab_file=None)
  try:
    inputs = expand_input_files(FLAGS.input_file)
    outputs = [p.strip() for p in FLAGS.output_file.split(",") if p.strip()]
    if FLAGS.beam_pipeline_options is not None:
      from albert_tf.data.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
      quiet = FLAGS.verbosity < 1
      if quiet:
        # Beam logs its workers' start and stop at INFO, and the runner echoes each line: keep
        # its warnings and our progress (per block), unless asked otherwise.
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
      beam_pipeline.create_pretraining_data(inputs, outputs, options,
                                            FLAGS.beam_pipeline_options, FLAGS.metadata_file,
                                            quiet_workers=quiet)
    else:
      create_pretraining_data(inputs, outputs, options, FLAGS.metadata_file)
  except (OSError, ValueError, LookupError) as e:
    logging.error("%s", e)
    return 1
  except KeyboardInterrupt:
    return 128 + signal.SIGINT
  except Interrupted as e:
    return 128 + e.signal_number
  return 0


if __name__ == "__main__":
  define_flags()
  flags.mark_flag_as_required("input_file")
  flags.mark_flag_as_required("output_file")
  app.run(lambda argv: sys.exit(main(argv)))
