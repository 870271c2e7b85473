"""How an options dataclass declares a field that is a command-line flag: its default beside the
flag's help, choices, bound and name, held as plain data (the field's metadata).

    @dataclasses.dataclass
    class SquadOptions(FineTuningOptions):
      doc_stride: int = option(128, "Pieces between window starts.", bound=">= 1")
      eval_metric: str = option("auto", "Metric of --do_predict: ...", choices=EVAL_METRICS)
      max_seq_length: int = sequence_length(384, "Pieces per window, all included.", at_least=5)

Each flag is written once, there: the library reads the bounds (`training.options.check_options`)
and the flag names (its messages name the flag), and the top-level scripts generate their absl
flags from the same fields (script_flags.py). The flag's type is the field's annotation: str,
int, float, bool, or tuple (a comma-separated list). A field declared without help is not a flag
(a setting for library callers only). A subclass that changes only a default writes it plainly
(`train_batch_size: int = 4096`): the flag keeps the help, choices and bound of the declaration
it overrides (`declaration`).

This module sits on the bottom floor (albert_tf/jobs/) so that every options dataclass can use
it, from data/pretraining's CreationOptions up to export's BundleOptions.
"""

import dataclasses


def option(default=None, help=None, *, choices=None, bound=None, flag=None):
  """A dataclass field holding `default`, set by the flag `--<flag, else the field's name>`.

  help: the flag's help text (none: the field is not a flag).
  choices: the values the flag takes (an enum flag).
  bound: what a value must be to mean anything: ">= 1", "> 0", "in [0, 1]", "in [0, 1)" or
    VERSION; None, "not given", always passes (`check_options`).
  flag: the flag's name where it differs from the field's (distillation's `temperature` is
    --distill_temperature).
  """
  metadata = dict(help=help, choices=tuple(choices) if choices else None, bound=bound, flag=flag)
  return dataclasses.field(default=default,
                           metadata={k: v for k, v in metadata.items() if v is not None})


# The bound of a TF Serving version flag (`--export_version`).
VERSION = "a positive integer or auto"


def is_version(value):
  """Whether `value` names a TF Serving version folder: a positive integer, or "auto" (the next
  after the highest present)."""
  text = str(value).strip()
  return text == "auto" or (text.isdigit() and int(text) >= 1)


def sequence_length(default, help, at_least=None):
  """The `max_seq_length` field (pieces per sequence, all included), with a script's own default
  and help and the shortest length its inputs fit in. That it fits the model's position table is
  checked once the config is read (`training.options.check_sequence_length`)."""
  return option(default, help, bound=None if at_least is None else f">= {at_least}")


def trim_batches(where=""):
  """The `trim_batches` field of a fine-tuning job whose batches can be cut to their longest row
  (`data.batch_length`): on by default, since the results are the fixed-length run's. `where`
  ends the help with the job's own limits."""
  return option(
      True, "Compute each training and evaluation batch at its longest real row (rounded up to "
      "a multiple of 16) instead of max_seq_length: the same examples, losses and metrics to "
      "float32 rounding, less padding computed. --notrim_batches computes every batch at "
      "max_seq_length, as the original's fixed-length input does." + where)


def declaration(options_class, name):
  """The metadata of field `name` as declared with `option`: in `options_class`, or else in the
  nearest base class that declares it ({} when none does: the field is no flag)."""
  for klass in options_class.__mro__:
    field = vars(klass).get("__dataclass_fields__", {}).get(name)
    if field is not None and field.metadata:
      return field.metadata
  return {}


def is_flag(options_class, name):
  """Whether field `name` of `options_class` is a flag: declared with help."""
  return bool(declaration(options_class, name).get("help"))


def flag_name(options_class, name):
  """The flag that sets field `name` of `options_class`."""
  return declaration(options_class, name).get("flag", name)
