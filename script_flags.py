"""The scripts' absl flags, generated from the options dataclasses, and how a script runs a job.

Each flag is written once, as a field of an options dataclass (`albert_tf.jobs.option_fields`:
its default beside its help, choices and name); here the fields become absl flags, and the parsed
flags the options again:

    define_job_flags(ClassifierOptions)          # when the script starts
    options = job_options(ClassifierOptions)     # in its main

The flags are the scripts' key flags (`--help` lists them): this module disclaims the ones it
defines for them.
"""

import dataclasses
import logging

from absl import app
from absl import flags

from albert_tf.interop import starts
from albert_tf.jobs.option_fields import declaration, flag_name, is_flag
from albert_tf.training.preemption import Preempted, sigterm_raises

FLAGS = flags.FLAGS
flags.disclaim_key_flags()

# The absl flag of each field type (tuple: a comma-separated list).
_DEFINE = {str: flags.DEFINE_string, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           bool: flags.DEFINE_bool, tuple: flags.DEFINE_list}


def _is_options(field):
  """Whether `field` holds a nested options dataclass (ClassifierOptions.distill)."""
  return isinstance(field.type, type) and dataclasses.is_dataclass(field.type)


def _one_or_many(parser_class):
  """An absl parser of one value, or of a comma-separated list of them (a tuple): the flags a
  fine-tuning sweep takes as a grid (`FineTuningOptions.SWEPT`). The flag's type stays the
  value's (`parser_class`'s)."""

  class OneOrMany(parser_class):
    def parse(self, argument):  # pylint: disable=missing-function-docstring
      one = super().parse
      if isinstance(argument, str) and "," in argument:
        return tuple(one(part.strip()) for part in argument.split(","))
      return one(argument)
  return OneOrMany()


_PARSERS = {float: flags.FloatParser, int: flags.IntegerParser}
_GRID_HELP = " A comma-separated list: one run each (a grid with --seeds; docs/fine-tuning.md)."


def define_options_flags(options_class, flag_values=FLAGS):
  """Defines a flag for each field of `options_class` declared with help, with the field's
  default (and the flags of a nested options dataclass)."""
  swept = getattr(options_class, "SWEPT", ())
  for field in dataclasses.fields(options_class):
    if _is_options(field):
      define_options_flags(field.type, flag_values)
    elif is_flag(options_class, field.name):
      declared = declaration(options_class, field.name)
      name = flag_name(options_class, field.name)
      if field.name in swept:
        flags.DEFINE(_one_or_many(_PARSERS[field.type]), name, field.default,
                     declared["help"] + _GRID_HELP, flag_values=flag_values,
                     serializer=flags.ArgumentSerializer())
      elif "choices" in declared:
        flags.DEFINE_enum(name, field.default, list(declared["choices"]), declared["help"],
                          flag_values=flag_values)
      else:
        default = list(field.default) if isinstance(field.default, tuple) else field.default
        _DEFINE[field.type](name, default, declared["help"], flag_values=flag_values)


def _strategy_options():
  """StrategyOptions, imported by the training scripts only: it loads TensorFlow, which
  create_pretraining_data.py and its worker processes (which import the script) do without."""
  from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel
  return distribute.StrategyOptions


def define_job_flags(options_class, flag_values=FLAGS):
  """A training script's flags: its options' and where the job runs (StrategyOptions')."""
  define_options_flags(options_class, flag_values)
  define_options_flags(_strategy_options(), flag_values)


def options_from_flags(options_class, flag_values=FLAGS, **extra):
  """`options_class` filled from its flags (and `extra`, by field name)."""
  return options_class(**_values(options_class, flag_values, extra))


def _values(options_class, flag_values, extra):
  """{field name: value} of `options_class` from its flags, or from `extra`; with the fields
  given on the command line (`given`) and a swept flag's list of values (`grid`) where the
  class holds those."""
  values, given, grid = {}, [], {}
  names = {field.name for field in dataclasses.fields(options_class)}
  for field in dataclasses.fields(options_class):
    if field.name in extra:
      values[field.name] = extra[field.name]
    elif _is_options(field):
      values[field.name] = options_from_flags(field.type, flag_values)
    elif is_flag(options_class, field.name):
      flag = flag_values[flag_name(options_class, field.name)]
      value = flag.value
      if flag.present:
        given.append(field.name)
      if isinstance(value, tuple) and field.type is not tuple:  # a swept flag's list
        grid[field.name], value = value, value[0]
      values[field.name] = tuple(value) if isinstance(value, list) else value
  for name, value in (("given", tuple(given)), ("grid", grid)):
    if name in names and name not in extra:
      values[name] = value
  return values


def job_options(options_class, **extra):
  """A training job's options from the flags: `options_from_flags`, with a Hugging Face
  --init_checkpoint's config and tokenizer files where those flags are not given."""
  given = "do_lower_case" in FLAGS and FLAGS["do_lower_case"].present
  try:
    values = starts.start_defaults(_values(options_class, FLAGS, extra),
                                        do_lower_case_given=given)
  except (OSError, ValueError) as e:
    # The starting point is read before run_job: a web address, a damaged artifact is one line
    # and exit 1 here too, not absl's traceback.
    _log_setup()
    logging.error("%s", e)
    raise SystemExit(1) from None
  if not values["albert_config_file"]:
    raise app.UsageError("--albert_config_file is required (unless --init_checkpoint is a "
                         "Hugging Face directory, whose config.json is then used)")
  return options_class(**values)


def _log_setup():
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  logging.getLogger().setLevel(logging.INFO)


def run_job(job, options):
  """Runs `job(options, strategy)` and returns the exit code: 0 when done or preempted
  (SIGTERM: a checkpoint was saved; the same command resumes), 1 with one line on bad input.

  SIGTERM outside the training loop (building features, evaluating, predicting, exporting)
  stops at once and exits 0 too: those outputs appear only whole, and the same command
  does that work again.
  """
  _log_setup()
  where = options_from_flags(_strategy_options())
  try:
    with sigterm_raises("the job, outside its training loop"):
      strategy = where.create_strategy()
      job(options, strategy)
  except Preempted as e:
    logging.warning("%s", e)
    return 0
  except (OSError, ValueError, FloatingPointError) as e:
    logging.error("%s", e)
    return 1
  return 0
