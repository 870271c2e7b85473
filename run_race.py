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
from core_flags import define_core_flags, define_finetuning_flags, options_from_flags, run_job

FLAGS = flags.FLAGS
_D = RaceOptions()

flags.DEFINE_string("data_dir", None, "Folder with RACE/{train,dev,test}/{middle,high} (or the "
                    "csv task's train/dev/test files).")
flags.DEFINE_string("task_name", _D.task_name, "race, or csv for your own multiple choice.")
flags.DEFINE_string("train_file", None, "Cache of the training features (TFRecord; built if "
                    "missing or stale; default output_dir/<task>_train_<seq>.tf_record).")
flags.DEFINE_string("eval_file", None, "Cache of the dev features.")
flags.DEFINE_string("predict_file", None, "Cache of the test features.")
flags.DEFINE_string("cached_dir", None, "Where feature caches go by default (else output_dir).")
flags.DEFINE_float("dropout_prob", _D.dropout_prob, "Dropout on the pooled output.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Pieces per choice, all included.")
flags.DEFINE_integer("max_qa_length", _D.max_qa_length,
                     "Question + option pieces kept (their last ones).")
flags.DEFINE_bool("high_only", False, "Only the high-school questions.")
flags.DEFINE_bool("middle_only", False, "Only the middle-school questions.")
flags.DEFINE_bool("do_train", _D.do_train, "Train.")
flags.DEFINE_bool("do_eval", _D.do_eval, "Evaluate on dev after each checkpoint; keep the best.")
flags.DEFINE_bool("do_predict", _D.do_predict, "Write test_predictions.jsonl (and "
                  "test_results.txt when the test files have answers).")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Eval batch.")
flags.DEFINE_integer("train_step", _D.train_step, "Training steps.")
flags.DEFINE_integer("warmup_step", _D.warmup_step, "Warm-up steps.")
flags.DEFINE_integer("num_keep_checkpoint", None, "The original's name of --keep_checkpoint_max.")
flags.DEFINE_string("export_dir", None, "Write an (article, question, options) -> answer "
                    "serving SavedModel here at the end.")
flags.DEFINE_string("context_column", None, "csv task: column of the passage.")
flags.DEFINE_string("question_column", None, "csv task: column of the question.")
flags.DEFINE_list("option_columns", [], "csv task: the option columns, in choice order.")
flags.DEFINE_string("label_column", _D.label_column,
                    "csv task: the answer, an option's index (0-based) or its text.")
define_core_flags(_D)
define_finetuning_flags(_D)


def main(argv):
  del argv
  keep = {}
  if FLAGS.num_keep_checkpoint is not None:
    keep["keep_checkpoint_max"] = FLAGS.num_keep_checkpoint
  return run_job(run_race, options_from_flags(RaceOptions, **keep))


if __name__ == "__main__":
  for name in ("data_dir", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
