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
from albert_tf.data.ner import FORMATS, SCHEMES
from albert_tf.data.ner_features import WORD_SPLITS
from albert_tf.cli.runs import run_ner
from albert_tf.tasks.ner import NerOptions
from core_flags import define_core_flags, define_finetuning_flags, options_from_flags, run_job

FLAGS = flags.FLAGS
_D = NerOptions()

flags.DEFINE_enum("data_format", _D.data_format, list(FORMATS),
                  "conll (column files), cluener (CLUENER2020 JSON lines) or jsonl "
                  "({\"tokens\", \"tags\"} lines).")
flags.DEFINE_string("data_dir", None, "Folder with the format's train / dev / test files.")
flags.DEFINE_string("train_file", None, "Training file (default: in --data_dir).")
flags.DEFINE_string("dev_file", None, "Dev file (default: in --data_dir).")
flags.DEFINE_string("test_file", None, "Test file (default: in --data_dir).")
flags.DEFINE_enum("tag_scheme", _D.tag_scheme, list(SCHEMES),
                  "Tag scheme of column / jsonl files (auto detects it per file).")
flags.DEFINE_list("labels", [], "The entity types or tags (default: the training file's).")
flags.DEFINE_bool("use_crf", _D.use_crf, "A CRF head (valid BIO transitions only) instead of "
                  "a softmax per word.")
flags.DEFINE_float("dropout_prob", _D.dropout_prob, "Dropout on the sequence output.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Pieces per window, all included.")
flags.DEFINE_integer("doc_stride", _D.doc_stride,
                     "Pieces between the starts of a long sentence's windows.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on dev after each checkpoint; keep the best.")
flags.DEFINE_bool("do_predict", False, "Predict the test file (in its own format).")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Eval batch.")
flags.DEFINE_integer("train_step", _D.train_step, "Training steps.")
flags.DEFINE_integer("warmup_step", _D.warmup_step, "Warm-up steps.")
flags.DEFINE_string("export_dir", None,
                    "Write a raw-text serving SavedModel here (text -> entities with character "
                    "offsets).")
flags.DEFINE_enum("word_split", _D.word_split, ["auto"] + list(WORD_SPLITS),
                  "How the export cuts raw text into words: at whitespace, or one per "
                  "character (auto: the trained run's; characters for CLUENER or data of "
                  "one-character words).")
define_core_flags(_D)
define_finetuning_flags(_D)


def main(argv):
  del argv
  return run_job(run_ner, options_from_flags(NerOptions))


if __name__ == "__main__":
  flags.mark_flag_as_required("output_dir")
  app.run(lambda argv: sys.exit(main(argv)))
