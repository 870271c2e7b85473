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

import sys

from absl import app
from absl import flags

from albert_tf.cli import quiet
quiet.install()  # before TensorFlow loads: the imports below load it
from albert_tf.tasks.distillation import DistillOptions
from albert_tf.cli.runs import run_classifier
from albert_tf.tasks.classification import ClassifierOptions
from core_flags import define_core_flags, define_finetuning_flags, options_from_flags, run_job

FLAGS = flags.FLAGS
_D = ClassifierOptions()

flags.DEFINE_string("task_name", None, "GLUE task (cola, mnli, mnli-mm, mrpc, qnli, qqp, rte, "
                    "sst-2, sts-b, wnli, ax), Chinese task (afqmc, tnews, iflytek, ocnli, "
                    "cmnli, csl: CLUE's JSON lines; lcqmc: albert_zh's train/dev/test.txt; "
                    "chnsenticorp: TSV with header label, text_a) or 'csv' for your own data.")
flags.DEFINE_string("data_dir", None, "Folder with the task's train/dev/test files.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Sequence length.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on dev (and keep the best checkpoint).")
flags.DEFINE_bool("do_predict", False, "Write test-set predictions: GLUE's <TASK>.tsv, or for "
                  "a Chinese task CLUE's <task>_predict.json (each test row's own id).")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Eval batch.")
flags.DEFINE_integer("train_step", _D.train_step, "Training steps.")
flags.DEFINE_integer("warmup_step", _D.warmup_step, "Warm-up steps.")
flags.DEFINE_float("num_train_epochs", None, "Train this many epochs instead of --train_step "
                   "(BERT's and brightmart's flag); warm-up is then --warmup_proportion of it.")
flags.DEFINE_float("warmup_proportion", _D.warmup_proportion,
                   "With --num_train_epochs: the share of the steps spent warming up.")
flags.DEFINE_string("cached_dir", None, "Where feature TFRecords are cached (default output).")
flags.DEFINE_float("layerwise_lr_decay", None,
                   "Layer-wise learning-rate decay (adamw): the head and pooler get the full "
                   "rate, each transformer group below it this factor more, embeddings last.")
flags.DEFINE_string("export_dir", None, "Write a raw-text-in serving SavedModel here at the end.")
flags.DEFINE_bool("tflite_quantize", False, "With --export_dir, also write classifier.tflite "
                  "(token ids in, logits out) with dynamic-range int8 weights.")
flags.DEFINE_string("teacher_checkpoint", None,
                    "Distil: the teacher, a run_classifier output folder (its best/ checkpoint "
                    "if kept, else the latest) or a checkpoint of the same task.")
flags.DEFINE_string("teacher_config_file", None, "Distil: the teacher's albert_config.json "
                    "(default: the one in the teacher's output folder).")
flags.DEFINE_string("teacher_export_dir", None, "Distil: the teacher as a classifier "
                    "SavedModel of run_classifier.py --export_dir (logits only, no hidden states).")
flags.DEFINE_float("distill_temperature", 1.0, "Distil: softmax temperature T of both models.")
flags.DEFINE_float("distill_alpha", 0.5, "Distil: weight of the soft loss (T^2-scaled KL to the "
                   "teacher's tempered probabilities); 1 - alpha goes to the labels.")
flags.DEFINE_float("distill_hidden_weight", 0.0, "Distil: weight of the hidden-state MSE between "
                   "mapped layers (a learned projection when the widths differ).")
flags.DEFINE_string("distill_layer_map", None, "Distil: student:teacher block pairs, 1-based, "
                    "e.g. 1:2,2:4,3:6 (default: student i <- teacher round(i * L_t / L_s)).")
flags.DEFINE_integer("student_num_hidden_layers", None,
                     "Distil: the student is the teacher's ALBERT with its shared block applied "
                     "this many times, starting from the teacher's weights.")
flags.DEFINE_string("text_a_column", None, "csv task: column of the first text.")
flags.DEFINE_string("text_b_column", None, "csv task: column of the second text, if any.")
flags.DEFINE_string("label_column", "label", "csv task: column of the label.")
flags.DEFINE_list("labels", None, "csv task: the label set (default: inferred from train).")
flags.DEFINE_bool("regression", False, "csv task: float labels, MSE loss.")


define_core_flags(_D)
define_finetuning_flags(_D)


def main(argv):
  del argv
  csv_options = {}
  if FLAGS.task_name and FLAGS.task_name.lower() == "csv":
    csv_options = dict(text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
                       label_column=FLAGS.label_column, labels=FLAGS.labels,
                       regression=FLAGS.regression)
  distill = DistillOptions(
      teacher_checkpoint=FLAGS.teacher_checkpoint, teacher_config_file=FLAGS.teacher_config_file,
      teacher_export_dir=FLAGS.teacher_export_dir, temperature=FLAGS.distill_temperature,
      alpha=FLAGS.distill_alpha, hidden_weight=FLAGS.distill_hidden_weight,
      layer_map=FLAGS.distill_layer_map,
      student_num_hidden_layers=FLAGS.student_num_hidden_layers)
  return run_job(run_classifier, options_from_flags(ClassifierOptions, csv_options=csv_options,
                                                    distill=distill))


if __name__ == "__main__":
  for name in ("task_name", "data_dir", "output_dir"):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
