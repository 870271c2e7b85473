"""One run of a variant at one seed: pretraining, intrinsic evaluation, fine-tuning."""

import glob
import json
import os
import time

from albert_tf import files
from benchmarks.ablations.data import data_dir, spm_model
from benchmarks.ablations.variants import config_for, run_key


def _stage(path, compute):
  """The JSON at `path`, computed (and written atomically) if missing."""
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  value = compute()
  files.write_text(path, json.dumps(value, indent=1))
  return value


def _clear_session():
  import tf_keras  # pylint: disable=import-outside-toplevel
  tf_keras.backend.clear_session()


def train_curves(folder):
  """[{step, tag: value}] from the TensorBoard files of a training folder."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  points = {}
  for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                  else value.simple_value)
        points.setdefault(int(event.step), {})[value.tag] = number
  return [dict(step=s, **points[s]) for s in sorted(points)]


def run_variant(variant, seed, scale, work, sets, glue):
  """Pretrains, evaluates and fine-tunes one variant at one seed; returns its metrics."""
  from albert_tf.modeling.summary import parameter_counts  # pylint: disable=import-outside-toplevel
  from albert_tf.cli.runs import run_classifier  # pylint: disable=import-outside-toplevel
  from albert_tf.tasks.classification import (ClassifierOptions)  # pylint: disable=import-outside-toplevel
  from albert_tf.cli.runs import run_pretraining  # pylint: disable=import-outside-toplevel
  from albert_tf.tasks.pretraining import (PretrainingOptions)  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  folder = os.path.join(work, "runs", run_key(variant, scale, seed))
  os.makedirs(folder, exist_ok=True)
  config = config_for(variant, scale)
  config_file = os.path.join(folder, "albert_config.json")
  config.to_json_file(config_file)
  pretrain_dir = os.path.join(folder, "pretrain")

  def pretrain():
    started = time.time()
    run_pretraining(PretrainingOptions(
        albert_config_file=config_file, input_file=sets[f"train_{variant.data}"],
        output_dir=pretrain_dir, max_seq_length=scale.seq,
        max_predictions_per_seq=scale.max_predictions, do_train=True,
        train_batch_size=scale.batch, num_train_steps=scale.steps,
        num_warmup_steps=scale.warmup, learning_rate=scale.learning_rate,
        save_checkpoints_steps=max(1, scale.steps // 4),
        iterations_per_loop=max(1, min(50, scale.steps // 10)), seed=seed,
        sentence_loss_weight=variant.sentence_loss_weight, log_every_seconds=30))
    _clear_session()
    return {"seconds": time.time() - started,
            "checkpoint": os.path.relpath(tf.train.latest_checkpoint(pretrain_dir), folder)}
  trained = _stage(os.path.join(folder, "pretrain.json"), pretrain)
  checkpoint = os.path.join(folder, trained["checkpoint"])

  def intrinsic(style):
    def compute():
      started = time.time()
      _, results = run_pretraining(PretrainingOptions(
          albert_config_file=config_file, input_file=sets[f"eval_{style}"],
          output_dir=os.path.join(folder, f"eval_{style}"), init_checkpoint=checkpoint,
          max_seq_length=scale.seq, max_predictions_per_seq=scale.max_predictions,
          do_eval=True, eval_batch_size=scale.eval_batch, max_eval_steps=scale.eval_batches,
          sentence_loss_weight=variant.sentence_loss_weight, seed=0))
      _clear_session()
      return dict({k: float(v) for k, v in results.items()}, seconds=time.time() - started)
    return _stage(os.path.join(folder, f"eval_{style}.json"), compute)
  sop, nsp = intrinsic("sop"), intrinsic("nsp")

  def finetune(task, steps):
    def compute():
      started = time.time()
      results = run_classifier(ClassifierOptions(
          task_name=task, data_dir=glue[task], output_dir=os.path.join(folder, task),
          albert_config_file=config_file, init_checkpoint=checkpoint,
          spm_model_file=spm_model(work, scale),
          max_seq_length=scale.seq, do_train=True, do_eval=True,
          train_batch_size=scale.finetune_batch, eval_batch_size=128, train_step=steps,
          warmup_step=max(1, steps // 10), learning_rate=scale.finetune_learning_rate,
          save_checkpoints_steps=steps, iterations_per_loop=max(1, min(100, steps)),
          cached_dir=os.path.join(data_dir(work, scale), "features", f"seq{scale.seq}"),
          seed=seed,
          log_every_seconds=30))
      _clear_session()
      return dict({k: float(v) for k, v in results.items()}, seconds=time.time() - started)
    return _stage(os.path.join(folder, f"{task}.json"), compute)
  sst2 = finetune("sst-2", scale.sst2_steps)
  stsb = finetune("sts-b", scale.stsb_steps)
  return {
      "seed": seed,
      "parameters": parameter_counts(config)["encoder_total"],
      "mlm_accuracy": sop["masked_lm_accuracy"],
      "sop_accuracy": sop["sentence_order_accuracy"],
      "nsp_accuracy": nsp["sentence_order_accuracy"],
      "sst2_accuracy": sst2["accuracy"],
      "stsb_pearson": stsb["pearson"],
      "pretrain_seconds": trained["seconds"],
      "seconds": sum(stage["seconds"] for stage in (trained, sop, nsp, sst2, stsb)),
      "curve": [{k: p[k] for k in p if k in ("step", "loss", "masked_lm_accuracy",
                                              "sentence_order_accuracy")}
                for p in train_curves(os.path.join(pretrain_dir, "train"))],
      "run": os.path.relpath(folder, work),
  }
