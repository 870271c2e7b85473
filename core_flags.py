"""The flags every training script shares (the training core's), and how a script runs a job.

run_pretraining.py, run_classifier.py, run_squad.py and run_race.py define their own flags and
call `define_core_flags(<their options>())` for these, so each flag has one meaning everywhere.
"""

import dataclasses
import logging

from absl import app
from absl import flags

from albert_tf.interop import huggingface
from albert_tf.training.precision import PRECISIONS
from albert_tf.training.preemption import Preempted, sigterm_raises
from albert_tf.training.distribute import STRATEGIES, create_strategy

FLAGS = flags.FLAGS


def define_core_flags(defaults):
  """Defines the core's flags with `defaults` (a job's options dataclass instance)."""
  d = defaults
  flags.DEFINE_string("albert_config_file", None,
                      "albert_config.json of the model (or a Hugging Face config.json). "
                      "Required unless --init_checkpoint is a Hugging Face directory.")
  flags.DEFINE_string("output_dir", None, "Checkpoints, summaries and the job's results.")
  flags.DEFINE_integer("train_batch_size", d.train_batch_size,
                       "Global train batch per optimizer step (all replicas, all micro-batches).")
  flags.DEFINE_enum("optimizer", d.optimizer, ["lamb", "adamw"], "Optimizer.")
  flags.DEFINE_float("learning_rate", d.learning_rate, "Peak learning rate.")
  flags.DEFINE_integer("save_checkpoints_steps", d.save_checkpoints_steps,
                       "Steps between checkpoints (and dev evaluations where a job has them).")
  flags.DEFINE_integer("keep_checkpoint_max", d.keep_checkpoint_max, "Checkpoints kept.")
  flags.DEFINE_integer("iterations_per_loop", d.iterations_per_loop,
                       "Steps per tf.function call (host round trip).")
  flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES), "tf.distribute.")
  flags.DEFINE_bool("use_tpu", False, "Train on a TPU (same as --distribution_strategy=tpu).")
  flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")
  flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
  flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
  flags.DEFINE_string("master", None, "TensorFlow master (TPU address when no --tpu_name).")
  flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores (informational: the TPU system decides).")
  flags.DEFINE_integer("gradient_accumulation_steps", d.gradient_accumulation_steps,
                       "Micro-batches per step (train_batch_size is the whole step's batch).")
  flags.DEFINE_enum("mixed_precision", d.mixed_precision, list(PRECISIONS),
                    "Compute precision (float16 uses dynamic loss scaling; bfloat16 for "
                    "TPUs and CPUs with AVX512_BF16/AMX).")
  flags.DEFINE_bool("jit_compile", d.jit_compile, "XLA-compile the forward and backward pass.")
  flags.DEFINE_bool("bias_correction", d.bias_correction,
                    "Adam bias correction in LAMB/AdamW (the original has none).")
  flags.DEFINE_bool("recompute_grad", d.recompute_grad,
                    "Recompute each transformer block in the backward pass: activation memory "
                    "of one block instead of all, for about a third more compute (shared "
                    "layers: one loop, one gradient sum per shared weight).")
  flags.DEFINE_list("freeze", list(d.freeze),
                    "Parts not trained: embeddings (with the E -> H projection), group_0, "
                    "group_1, ... (transformer groups; with full sharing, the default, all "
                    "layers are one group, group_0), pooler.")
  flags.DEFINE_integer("seed", d.seed, "Seed of the initial weights, dropout and input "
                       "shuffling: the same seed repeats a run on the same machine.")
  flags.DEFINE_bool("checkpoint_input_pipeline", d.checkpoint_input_pipeline,
                    "Save the input position in checkpoints (one device / mirrored), so a "
                    "resumed run reads exactly the batches an uninterrupted run would.")
  flags.DEFINE_float("log_every_seconds", d.log_every_seconds, "Seconds between progress lines.")


def define_finetuning_flags(defaults):
  """The flags of every fine-tuning script: its starting point and vocabulary."""
  flags.DEFINE_string("init_checkpoint", None,
                      "Starting weights: our checkpoint, an original TF1 one (albert_zh too), or "
                      "a Hugging Face ALBERT directory (config.json + model.safetensors; its "
                      "config and tokenizer files are used unless given).")
  flags.DEFINE_string("albert_hub_module_handle", None,
                      "Local path of an encoder SavedModel (export_savedmodel.py) to start from.")
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model (ALBERT's English models).")
  flags.DEFINE_string("vocab_file", None,
                      "WordPiece vocab.txt when no --spm_model_file (albert_zh's Chinese models).")
  flags.DEFINE_bool("do_lower_case", defaults.do_lower_case, "Lowercase the input.")
  flags.DEFINE_integer("predict_batch_size", defaults.predict_batch_size, "Predict batch.")


def options_from_flags(options_class, **extra):
  """`options_class` filled from the flags of the same names (and `extra`)."""
  values = {}
  for field in dataclasses.fields(options_class):
    if field.name in extra:
      values[field.name] = extra[field.name]
    elif field.name in FLAGS:
      value = FLAGS[field.name].value
      values[field.name] = tuple(value) if isinstance(value, list) else value
  given = "do_lower_case" in FLAGS and FLAGS["do_lower_case"].present
  values = huggingface.start_defaults(values, do_lower_case_given=given)
  if "albert_config_file" in values and not values["albert_config_file"]:
    raise app.UsageError("--albert_config_file is required (unless --init_checkpoint is a "
                         "Hugging Face directory, whose config.json is then used)")
  return options_class(**values)


def run_job(job, options):
  """Runs `job(options, strategy)` and returns the exit code: 0 when done or preempted
  (SIGTERM: a checkpoint was saved; the same command resumes), 1 with one line on bad input.

  SIGTERM outside the training loop (building features, evaluating, predicting, exporting)
  stops at once and exits 0 too: those outputs appear only whole, and the same command
  does that work again.
  """
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  logging.getLogger().setLevel(logging.INFO)
  strategy_name = "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy
  try:
    with sigterm_raises("the job, outside its training loop"):
      strategy = create_strategy(strategy_name, FLAGS.tpu_name, FLAGS.tpu_zone,
                                 FLAGS.gcp_project, FLAGS.master)
      job(options, strategy)
  except Preempted as e:
    logging.warning("%s", e)
    return 0
  except (OSError, ValueError, FloatingPointError) as e:
    logging.error("%s", e)
    return 1
  return 0
