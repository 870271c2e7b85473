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
from core_flags import define_core_flags, define_finetuning_flags, options_from_flags, run_job

FLAGS = flags.FLAGS
_D = SquadOptions()

flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict, e.g. dev-v1.1.json.")
flags.DEFINE_integer("max_seq_length", _D.max_seq_length, "Pieces per window, all included.")
flags.DEFINE_integer("doc_stride", _D.doc_stride, "Pieces between window starts.")
flags.DEFINE_integer("max_query_length", _D.max_query_length, "Questions are cut to this.")
flags.DEFINE_bool("do_train", False, "Train on --train_file.")
flags.DEFINE_bool("do_predict", False, "Predict --predict_file (and score it if it has answers).")
flags.DEFINE_float("num_train_epochs", _D.num_train_epochs,
                   "Epochs; steps = questions / train_batch_size * epochs, as the original.")
flags.DEFINE_float("warmup_proportion", _D.warmup_proportion, "Share of steps warming up.")
flags.DEFINE_integer("n_best_size", _D.n_best_size, "Answers kept per question (n-best list).")
flags.DEFINE_integer("max_answer_length", _D.max_answer_length, "Longest answer, in pieces.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: unanswerable questions.")
flags.DEFINE_integer("start_n_top", _D.start_n_top, "v2: beam of starts.")
flags.DEFINE_integer("end_n_top", _D.end_n_top, "v2: ends kept per start.")
flags.DEFINE_float("dropout_prob", _D.dropout_prob, "v2: dropout of the answer-class layer.")
flags.DEFINE_float("null_score_diff_threshold", None,
                   "v2: empty answer when the null score is at least this (default: the best "
                   "threshold on --predict_file's answers, as the original).")
flags.DEFINE_string("train_feature_file", None,
                    "Cache of training features (default output_dir/train_features.tf_record).")
flags.DEFINE_string("predict_feature_file", None,
                    "Cache of predict features (default output_dir/predict_features.tf_record).")
flags.DEFINE_string("export_dir", None,
                    "Write a (question, context) -> answer serving SavedModel here at the end.")
flags.DEFINE_float("layerwise_lr_decay", None, "Layer-wise learning-rate decay (adamw).")
flags.DEFINE_enum("eval_metric", _D.eval_metric, ["squad", "cmrc2018", "auto"],
                  "Metric of --do_predict: the official SQuAD EM/F1, or CMRC 2018's EM/F1/"
                  "AVERAGE over mixed Chinese/English segments; auto: cmrc2018 with "
                  "--vocab_file on mostly Chinese contexts (v1), else squad.")


define_core_flags(_D)
define_finetuning_flags(_D)


def main(argv):
  del argv
  return run_job(run_squad, options_from_flags(SquadOptions))


if __name__ == "__main__":
  for name in ("output_dir",):
    flags.mark_flag_as_required(name)
  app.run(lambda argv: sys.exit(main(argv)))
