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

import logging
import sys

from absl import app
from absl import flags

from albert_tf.distribute import STRATEGIES, create_strategy
from albert_tf.finetuning import ClassifierOptions, run_classifier

FLAGS = flags.FLAGS
_D = ClassifierOptions()

flags.DEFINE_string("task_name", None, "GLUE task (cola, mnli, mnli-mm, mrpc, qnli, qqp, rte, "
                    "sst-2, sts-b, wnli, ax), Chinese task (afqmc, tnews, iflytek, ocnli, "
                    "cmnli, csl: CLUE's JSON lines; lcqmc: albert_zh's train/dev/test.txt; "
                    "chnsenticorp: TSV with header label, text_a) or 'csv' for your own data.")
flags.DEFINE_string("data_dir", None, "Folder with the task's train/dev/test files.")
flags.DEFINE_string("output_dir", None, "Checkpoints, eval_results.txt, predictions.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("init_checkpoint", None, "Our checkpoint or an original TF1 one.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "Local path of an encoder SavedModel (export_savedmodel.py) to start from.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (when no --spm_model_file).")
flags.DEFINE_bool("do_lower_case", _D.do_lower_case, "Lowercase the input.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Sequence length.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on dev (and keep the best checkpoint).")
flags.DEFINE_bool("do_predict", False, "Write test-set predictions: GLUE's <TASK>.tsv, or for "
                  "a Chinese task CLUE's <task>_predict.json (each test row's own id).")
flags.DEFINE_integer("train_batch_size", _D.train_batch_size, "Global train batch.")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Eval batch.")
flags.DEFINE_integer("predict_batch_size", _D.predict_batch_size, "Predict batch.")
flags.DEFINE_float("learning_rate", _D.learning_rate, "Peak learning rate.")
flags.DEFINE_enum("optimizer", _D.optimizer, ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_integer("train_step", _D.train_step, "Training steps.")
flags.DEFINE_integer("warmup_step", _D.warmup_step, "Warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", _D.save_checkpoints_steps,
                     "Steps between checkpoints (and dev evaluations with --do_eval).")
flags.DEFINE_integer("keep_checkpoint_max", _D.keep_checkpoint_max, "Checkpoints kept.")
flags.DEFINE_integer("iterations_per_loop", _D.iterations_per_loop, "Steps per tf.function.")
flags.DEFINE_string("cached_dir", None, "Where feature TFRecords are cached (default output).")
flags.DEFINE_float("layerwise_lr_decay", None,
                   "Layer-wise learning-rate decay (adamw): the head and pooler get the full "
                   "rate, each transformer group below it this factor more, embeddings last.")
flags.DEFINE_string("export_dir", None, "Write a raw-text-in serving SavedModel here at the end.")
flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES), "tf.distribute.")
flags.DEFINE_bool("recompute_grad", False,
                  "Recompute each transformer block in the backward pass: activation memory of "
                  "one block instead of all, for about a third more compute.")
flags.DEFINE_integer("seed", None, "Seed of the initial weights, dropout and input "
                     "shuffling: the same seed repeats a run on the same machine.")
flags.DEFINE_float("log_every_seconds", _D.log_every_seconds, "Seconds between progress lines.")
flags.DEFINE_string("text_a_column", None, "csv task: column of the first text.")
flags.DEFINE_string("text_b_column", None, "csv task: column of the second text, if any.")
flags.DEFINE_string("label_column", "label", "csv task: column of the label.")
flags.DEFINE_list("labels", None, "csv task: the label set (default: inferred from train).")
flags.DEFINE_bool("regression", False, "csv task: float labels, MSE loss.")


def main(argv):
  del argv
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  logging.getLogger().setLevel(logging.INFO)
  csv_options = {}
  if FLAGS.task_name and FLAGS.task_name.lower() == "csv":
    csv_options = dict(text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
                       label_column=FLAGS.label_column, labels=FLAGS.labels,
                       regression=FLAGS.regression)
  options = ClassifierOptions(
      **{k: FLAGS[k].value for k in ClassifierOptions.__annotations__ if k in FLAGS},
      csv_options=csv_options)
  try:
    run_classifier(options, create_strategy(FLAGS.distribution_strategy))
  except (OSError, ValueError, FloatingPointError) as e:
    logging.error("%s", e)
    return 1
  return 0


if __name__ == "__main__":
  for name in ("task_name", "data_dir", "output_dir", "albert_config_file"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
