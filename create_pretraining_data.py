"""Creates ALBERT pretraining TFRecords from plain text (the original script's flags).

Input: one sentence per line, a blank line between documents. Example:

  python create_pretraining_data.py --input_file='corpus/*.txt' \
      --output_file=data/train-0.tfrecord,data/train-1.tfrecord \
      --spm_model_file=30k-clean.model --max_seq_length=128 --dupe_factor=5

Chinese (albert_zh) with whole-word masking of jieba words:

  python create_pretraining_data.py --input_file=zh.txt --output_file=zh.tfrecord \
      --vocab_file=albert_zh/vocab.txt --word_segmentation=jieba

On a cluster (or with Beam's DirectRunner on this machine), the same shards come from an Apache
Beam pipeline when --beam_pipeline_options is given (albert_tf/data/beam_pipeline.py):

  python create_pretraining_data.py --input_file='gs://bucket/corpus/*.txt' \
      --output_file=gs://bucket/data/train-0.tfrecord,gs://bucket/data/train-1.tfrecord \
      --spm_model_file=30k-clean.model \
      --beam_pipeline_options="--runner=DataflowRunner --project=P --region=R ..."

SIGINT (Ctrl-C) or SIGTERM stops the workers at once and removes the temporary shards, with
exit status 130 or 143 (128 + the signal): nothing is written under the output names until the
whole job has succeeded. A rerun removes what a run killed outright (SIGKILL) left.
"""

import logging
import signal
import shlex
import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.data.pretraining.create import (WORD_SEGMENTATIONS, CreationOptions, Interrupted,
                                   create_pretraining_data, expand_input_files)

FLAGS = flags.FLAGS
_DEFAULTS = CreationOptions()

flags.DEFINE_string("input_file", None, "Input text files: comma list and/or globs.")
flags.DEFINE_string("output_file", None, "Output TFRecord shards: comma list.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (when no --spm_model_file).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model.")
flags.DEFINE_bool("do_lower_case", _DEFAULTS.do_lower_case, "Lowercase the input text.")
flags.DEFINE_bool("do_whole_word_mask", _DEFAULTS.do_whole_word_mask,
                  "Mask whole words: a non-initial piece joins the previous candidate.")
flags.DEFINE_bool("favor_shorter_ngram", _DEFAULTS.favor_shorter_ngram,
                  "P(n) proportional to 1/n (else reversed).")
flags.DEFINE_bool("random_next_sentence", _DEFAULTS.random_next_sentence,
                  "NSP-style: B from a random document half of the time (else SOP swaps).")
flags.DEFINE_integer("max_seq_length", _DEFAULTS.max_seq_length,
                     "Maximum sequence length (at least 5: [CLS] A [SEP] B [SEP]).")
flags.DEFINE_integer("ngram", _DEFAULTS.ngram, "Maximum n-gram length (in words) to mask.")
flags.DEFINE_integer("max_predictions_per_seq", _DEFAULTS.max_predictions_per_seq,
                     "Maximum masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", _DEFAULTS.random_seed, "Seed: the output depends on "
                     "inputs, flags and this seed only.")
flags.DEFINE_integer("dupe_factor", _DEFAULTS.dupe_factor,
                     "Passes over the input, each with different masks.")
flags.DEFINE_float("masked_lm_prob", _DEFAULTS.masked_lm_prob, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", _DEFAULTS.short_seq_prob,
                   "Probability of a shorter target length for a document.")
flags.DEFINE_bool("pure_sop", _DEFAULTS.pure_sop,
                  "One-sentence chunks are merged or skipped instead of paired with a random "
                  "document, so every label-1 instance is a swap.")
flags.DEFINE_integer("num_workers", _DEFAULTS.num_workers,
                     "Worker processes (0 = all cores); the output does not depend on it.")
flags.DEFINE_integer("block_bytes", _DEFAULTS.block_bytes,
                     "Text per work unit; random-document partners and the instance shuffle "
                     "stay within one block. Changing it changes the output.")
flags.DEFINE_string("input_encoding", _DEFAULTS.input_encoding,
                    "Encoding of the input files (e.g. latin-1).")
flags.DEFINE_bool("strict", _DEFAULTS.strict,
                  "Fail on a line that does not decode instead of skipping it.")
flags.DEFINE_enum("word_segmentation", _DEFAULTS.word_segmentation, WORD_SEGMENTATIONS,
                  "jieba: segment each line with jieba so whole-word / n-gram masking takes "
                  "Chinese words whole (albert_zh practice; ids stay plain characters). Needs "
                  "--vocab_file; refused with --spm_model_file.")
flags.DEFINE_bool("no_masking", _DEFAULTS.no_masking,
                  "Write the instances unmasked (empty masked_lm_* features) for "
                  "run_pretraining.py --dynamic_masking, which masks them anew each epoch; "
                  "the masking flags are then run_pretraining's.")
flags.DEFINE_string("metadata_file", None,
                    "JSON of counts and flags (default: beside the output shards).")
flags.DEFINE_string("beam_pipeline_options", None,
                    "Apache Beam's own options as one string (e.g. \"--runner=DirectRunner "
                    "--direct_num_workers=2 --direct_running_mode=multi_processing\"): given, "
                    "an Apache Beam pipeline makes the same shards (--num_workers is then "
                    "Beam's business); otherwise this machine's worker processes do.")


def main(argv):
  del argv
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
  options = CreationOptions(
      spm_model_file=FLAGS.spm_model_file,
      vocab_file=None if FLAGS.spm_model_file else FLAGS.vocab_file,
      do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      masked_lm_prob=FLAGS.masked_lm_prob, dupe_factor=FLAGS.dupe_factor,
      short_seq_prob=FLAGS.short_seq_prob, ngram=FLAGS.ngram,
      favor_shorter_ngram=FLAGS.favor_shorter_ngram,
      do_whole_word_mask=FLAGS.do_whole_word_mask,
      random_next_sentence=FLAGS.random_next_sentence, random_seed=FLAGS.random_seed,
      pure_sop=FLAGS.pure_sop, num_workers=FLAGS.num_workers, block_bytes=FLAGS.block_bytes,
      input_encoding=FLAGS.input_encoding, strict=FLAGS.strict,
      word_segmentation=FLAGS.word_segmentation, no_masking=FLAGS.no_masking)
  try:
    inputs = expand_input_files(FLAGS.input_file)
    outputs = [p.strip() for p in FLAGS.output_file.split(",") if p.strip()]
    if FLAGS.beam_pipeline_options is not None:
      from albert_tf.data.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
      beam_options = FLAGS.beam_pipeline_options
      if FLAGS.verbosity < 1:
        # Beam logs its workers' start and stop at INFO, and the runner echoes each line: keep
        # its warnings and our progress (per block), unless asked otherwise.
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
        if "sdk_harness_log_level" not in beam_options:
          beam_options += (" --default_sdk_harness_log_level=WARNING "
                           + shlex.quote('--sdk_harness_log_level_overrides={"albert_tf": '
                                         '"INFO"}'))
      beam_pipeline.create_pretraining_data(inputs, outputs, options,
                                            beam_options, FLAGS.metadata_file)
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
  flags.mark_flag_as_required("input_file")
  flags.mark_flag_as_required("output_file")
  app.run(lambda argv: sys.exit(main(argv)))
