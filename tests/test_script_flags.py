"""The scripts' absl flags, generated from the options dataclasses, are the flags the scripts had
when each was written out by hand (commit e45fe7a): the same names, types, defaults, help and
enum values. And parsed flags become the options they came from."""

import dataclasses
import importlib
import json
import os
import subprocess
import sys

import pytest
from absl import flags

import script_flags
from albert_tf.tasks.classification import ClassifierOptions
from albert_tf.tasks.distillation import DistillOptions
from conftest import ROOT

SCRIPTS = ("run_pretraining", "run_classifier", "run_squad", "run_race", "run_ner",
           "create_pretraining_data", "export_savedmodel")
FIXTURE = ROOT / "tests" / "fixtures" / "script_flags_e45fe7a.json"


def described(flag_values):
  """{name: {type, default, help, enum_values, short_name}} of every flag in `flag_values` that
  absl itself does not define (as the fixture was made: /tmp/refactor/dump_flags.py)."""
  out = {}
  for module, defined in flag_values.flags_by_module_dict().items():
    if module.startswith("absl."):
      continue
    for flag in defined:
      enum = getattr(flag.parser, "enum_values", None)
      out[flag.name] = {"type": flag.flag_type(), "default": flag.default, "help": flag.help,
                        "enum_values": list(enum) if enum else None,
                        "short_name": flag.short_name}
  return out


def dump():
  """Each script's flags, defined by its `define_flags` into a FlagValues of its own, and the
  flags TensorFlow defines in absl's global FLAGS on import (not the scripts'), as JSON."""
  scripts = {}
  for script in SCRIPTS:
    flag_values = flags.FlagValues()
    importlib.import_module(script).define_flags(flag_values)
    scripts[script] = described(flag_values)
  return json.dumps({"scripts": scripts, "tensorflow": sorted(described(flags.FLAGS))},
                    default=str)


@pytest.fixture(scope="module")
def dumped():
  """One process imports all seven scripts (absl's global FLAGS and TensorFlow stay there)."""
  run = subprocess.run([sys.executable, __file__], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
  assert run.returncode == 0, run.stderr[-3000:]
  return json.loads(run.stdout.splitlines()[-1])


# Flags added since e45fe7a, by the scripts that have them (each option of TrainingOptions is a
# flag of every training script).
TRAINING_SCRIPTS = ("run_pretraining", "run_classifier", "run_squad", "run_race", "run_ner")
FINE_TUNING_SCRIPTS = TRAINING_SCRIPTS[1:]
ADDED = {"allow_untrained": TRAINING_SCRIPTS,  # issue 43
         "export_version": FINE_TUNING_SCRIPTS + ("export_savedmodel",),  # issue 45
         "recipe": FINE_TUNING_SCRIPTS, "seeds": FINE_TUNING_SCRIPTS,  # issue 47
         "early_stopping_patience": FINE_TUNING_SCRIPTS,
         "onnx": FINE_TUNING_SCRIPTS + ("export_savedmodel",),  # issue 46
         "onnx_quantize": FINE_TUNING_SCRIPTS + ("export_savedmodel",),
         "trim_batches": ("run_classifier", "run_race", "run_squad", "run_ner"),  # issue 58
         "bucket_by_length": ("run_classifier",)}
# Flags whose help changed since, with words the new help must hold (the rest must not change).
HELP_CHANGED = {"init_checkpoint": (FINE_TUNING_SCRIPTS, "keras-hub"),  # issue 44
                "albert_hub_module_handle": (FINE_TUNING_SCRIPTS, "TF1 Hub module"),
                # issue 47: a comma-separated list makes a sweep's grid
                "learning_rate": (FINE_TUNING_SCRIPTS, "comma-separated"),
                "train_batch_size": (FINE_TUNING_SCRIPTS, "comma-separated"),
                "serving_dtype": (("export_savedmodel",), "float16 for GPUs")}  # issue 46
# Enum flags with choices added since (the others must stay as they were).
CHOICES_ADDED = {"serving_dtype": (("export_savedmodel",), ["float16"])}  # issue 46


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_scripts_flags_are_the_ones_it_had_before_they_were_generated(dumped, script):
  before = {name: flag for name, flag in json.loads(FIXTURE.read_text())[script].items()
            if name not in dumped["tensorflow"]}
  now = dict(dumped["scripts"][script])
  for name, scripts in ADDED.items():
    assert (name in now) == (script in scripts), name
    now.pop(name, None)
  for name, (scripts, words) in HELP_CHANGED.items():
    if script in scripts:
      assert words in now[name]["help"], name
      now[name] = dict(now[name], help=before[name]["help"])
  for name, (scripts, choices) in CHOICES_ADDED.items():
    if script in scripts:
      assert now[name]["enum_values"] == before[name]["enum_values"] + choices, name
      now[name] = dict(now[name], enum_values=before[name]["enum_values"])
  assert now == before


def test_parsed_flags_become_the_options_they_came_from():
  """Defaults stay the dataclass's, lists become tuples, a flag named otherwise than its field
  (--distill_temperature) sets that field, nested options (distillation's) are built too."""
  flag_values = flags.FlagValues()
  script_flags.define_options_flags(ClassifierOptions, flag_values)
  flag_values(["run_classifier.py", "--task_name=sst-2", "--freeze=embeddings,pooler",
               "--distill_temperature=2", "--nodo_lower_case"])
  options = script_flags.options_from_flags(ClassifierOptions, flag_values,
                                            csv_options={"text_a_column": "review"})
  assert options == dataclasses.replace(
      ClassifierOptions(), task_name="sst-2", freeze=("embeddings", "pooler"),
      do_lower_case=False, csv_options={"text_a_column": "review"},
      distill=DistillOptions(temperature=2.0))


def test_a_comma_separated_swept_flag_is_a_grid_and_given_flags_are_named():
  """--learning_rate=1e-5,2e-5 holds the first value and the grid; `given` names the flags on
  the command line (what wins over --recipe), not the defaults."""
  flag_values = flags.FlagValues()
  script_flags.define_options_flags(ClassifierOptions, flag_values)
  flag_values(["run_classifier.py", "--task_name=sst-2", "--learning_rate=1e-5,2e-5",
               "--train_batch_size=16", "--seeds=1,2"])
  options = script_flags.options_from_flags(ClassifierOptions, flag_values)
  assert (options.learning_rate, options.train_batch_size) == (1e-5, 16)
  assert options.grid == {"learning_rate": (1e-5, 2e-5)} and options.seeds == ("1", "2")
  assert set(options.given) == {"task_name", "learning_rate", "train_batch_size", "seeds"}


if __name__ == "__main__":
  print(dump())
