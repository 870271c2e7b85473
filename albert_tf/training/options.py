"""The options every training task shares (each task's options extend them) and the rule that
refuses values which cannot mean anything, naming the flag."""

import dataclasses

from albert_tf.jobs import option_fields
from albert_tf.jobs.option_fields import declaration, flag_name, option
from albert_tf.training.precision import PRECISIONS


@dataclasses.dataclass
class TrainingOptions:
  """The flags every training script shares: the model's config and the loop's settings (each
  task's options extend these)."""
  albert_config_file: str = option(
      None, "albert_config.json of the model (or a Hugging Face config.json). Required unless "
      "--init_checkpoint is a Hugging Face directory.")
  output_dir: str = option(None, "Checkpoints, summaries and the job's results.")
  train_batch_size: int = option(
      32, "Global train batch per optimizer step (all replicas, all micro-batches).",
      bound=">= 1")
  optimizer: str = option("adamw", "Optimizer.", choices=("lamb", "adamw"))
  learning_rate: float = option(5e-5, "Peak learning rate.", bound="> 0")
  weight_decay_rate: float = option(0.01, bound=">= 0")
  bias_correction: bool = option(False,
                                 "Adam bias correction in LAMB/AdamW (the original has none).")
  save_checkpoints_steps: int = option(
      1000, "Steps between checkpoints (and dev evaluations where a job has them).",
      bound=">= 1")
  keep_checkpoint_max: int = option(5, "Checkpoints kept.", bound=">= 1")
  iterations_per_loop: int = option(1000, "Steps per tf.function call (host round trip).",
                                    bound=">= 1")
  gradient_accumulation_steps: int = option(
      1, "Micro-batches per step (train_batch_size is the whole step's batch).", bound=">= 1")
  mixed_precision: str = option(
      "float32", "Compute precision (float16 uses dynamic loss scaling; bfloat16 for TPUs and "
      "CPUs with AVX512_BF16/AMX).", choices=PRECISIONS)
  jit_compile: bool = option(False, "XLA-compile the forward and backward pass.")
  recompute_grad: bool = option(
      False, "Recompute each transformer block in the backward pass: activation memory of one "
      "block instead of all, for about a third more compute (shared layers: one loop, one "
      "gradient sum per shared weight).")
  freeze: tuple = option(
      (), "Parts not trained: embeddings (with the E -> H projection), group_0, group_1, ... "
      "(transformer groups; with full sharing, the default, all layers are one group, "
      "group_0), pooler.")
  seed: int = option(None, "Seed of the initial weights, dropout and input shuffling: the same "
                     "seed repeats a run on the same machine.", bound=">= 0")
  log_every_seconds: float = option(10.0, "Seconds between progress lines.", bound=">= 0")
  allow_untrained: bool = option(
      False, "Evaluate, predict or export without a trained model (no checkpoint in "
      "--output_dir, and no starting weights for every part, a task's head included): the "
      "outputs then come from random weights.")
  checkpoint_input_pipeline: bool = option(
      True, "Save the input position in checkpoints (one device / mirrored), so a resumed run "
      "reads exactly the batches an uninterrupted run would.")


def _allows(rule, value):
  """Whether `value` meets `rule`: ">= 1", "> 0", "in [0, 1]", "in [0, 1)" or VERSION."""
  if rule == option_fields.VERSION:
    return option_fields.is_version(value)
  if rule.startswith("in "):
    low, high = (float(x) for x in rule[4:-1].split(","))
    return low <= value and (value < high if rule.endswith(")") else value <= high)
  op, bound = rule.split()
  return value >= float(bound) if op == ">=" else value > float(bound)


def check_options(options):
  """Refuses option values that cannot mean anything (a batch of 0, negative steps, a student
  of 0 layers, a value outside a flag's choices), naming the flag and the rule, before any work: such a value is never replaced
  by a default nor left to fail later under another name.

  The rules are the fields' bounds and the flags their names (`option_fields.option`); nested
  options (distillation's) are checked too.
  """
  for field in dataclasses.fields(options):
    value = getattr(options, field.name)
    declared = declaration(type(options), field.name)
    rule, choices = declared.get("bound"), declared.get("choices")
    if rule and value is not None and not _allows(rule, value):
      raise ValueError(f"--{flag_name(type(options), field.name)} must be {rule}, got {value!r}")
    if choices and value is not None and value not in choices:
      raise ValueError(f"--{flag_name(type(options), field.name)}={value} is not one of "
                       f"{', '.join(map(str, choices))}")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      check_options(value)


def check_sequence_length(max_seq_length, config):
  """A sequence longer than the model's position table cannot be embedded: refused, naming the
  flag and the config's key."""
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={max_seq_length} exceeds the config's "
                     f"max_position_embeddings={config.max_position_embeddings}")
