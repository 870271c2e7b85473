"""The options every training task shares (each task's options extend them) and the rule that
refuses values which cannot mean anything, naming the flag."""

import dataclasses


@dataclasses.dataclass
class TrainingOptions:
  """The flags every training script shares: the loop's (each task's options extend these)."""
  output_dir: str = None
  train_batch_size: int = 32
  optimizer: str = "adamw"
  learning_rate: float = 5e-5
  weight_decay_rate: float = 0.01
  bias_correction: bool = False
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  iterations_per_loop: int = 1000
  gradient_accumulation_steps: int = 1
  mixed_precision: str = "float32"
  jit_compile: bool = False
  recompute_grad: bool = False
  freeze: tuple = ()
  seed: int = None
  log_every_seconds: float = 10.0
  checkpoint_input_pipeline: bool = True

  # What a value must be to mean anything (`check_options`); None is "not given".
  BOUNDS = {"train_batch_size": ">= 1", "learning_rate": "> 0", "weight_decay_rate": ">= 0",
            "save_checkpoints_steps": ">= 1", "keep_checkpoint_max": ">= 1",
            "iterations_per_loop": ">= 1", "gradient_accumulation_steps": ">= 1",
            "seed": ">= 0", "log_every_seconds": ">= 0"}


def _allows(rule, value):
  """Whether `value` meets `rule`: ">= 1", "> 0", "in [0, 1]" or "in [0, 1)"."""
  if rule.startswith("in "):
    low, high = (float(x) for x in rule[4:-1].split(","))
    return low <= value and (value < high if rule.endswith(")") else value <= high)
  op, bound = rule.split()
  return value >= float(bound) if op == ">=" else value > float(bound)


def check_options(options):
  """Refuses option values that cannot mean anything (a batch of 0, negative steps, a student
  of 0 layers), naming the flag and the rule, before any work: such a value is never replaced
  by a default nor left to fail later under another name.

  Each options dataclass lists its rules in a `BOUNDS` class attribute ({field: rule}) and the
  flags named otherwise than their fields in `FLAG_NAMES`; nested options (distillation's)
  are checked too.
  """
  for klass in type(options).__mro__:
    for name, rule in vars(klass).get("BOUNDS", {}).items():
      value = getattr(options, name)
      if value is not None and not _allows(rule, value):
        flag = getattr(options, "FLAG_NAMES", {}).get(name, name)
        raise ValueError(f"--{flag} must be {rule}, got {value!r}")
  for field in dataclasses.fields(options):
    value = getattr(options, field.name)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      check_options(value)


def check_sequence_length(max_seq_length, config):
  """A sequence longer than the model's position table cannot be embedded: refused, naming the
  flag and the config's key."""
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={max_seq_length} exceeds the config's "
                     f"max_position_embeddings={config.max_position_embeddings}")
