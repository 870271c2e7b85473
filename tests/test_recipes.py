"""--recipe: the original's per-task settings, checked against copies of the lines of its scripts
(tests/fixtures/recipes: run_glue.sh, the README's SQuAD and RACE commands, albert_zh's CLUE and
LCQMC scripts), and the rule that a flag given explicitly beats the recipe."""

import logging
import re

import pytest
from absl import flags

import script_flags
from albert_tf.tasks.classification import ClassifierOptions
from albert_tf.tasks.ner import NerOptions
from albert_tf.tasks.race import RaceOptions
from albert_tf.tasks.recipes import apply_recipe, recipe_values
from albert_tf.tasks.squad import SquadOptions
from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "recipes"
# The settings a recipe is about (the rest of the commands are paths and switches).
TUNED = {"learning_rate", "train_batch_size", "eval_batch_size", "num_train_epochs",
         "warmup_proportion", "train_step", "warmup_step", "max_seq_length", "optimizer",
         "save_checkpoints_steps", "doc_stride", "max_query_length", "n_best_size",
         "max_answer_length", "max_qa_length"}


def _value(text):
  try:
    return float(text)
  except ValueError:
    return text


def _flags(text):
  """{flag: value} of the `--flag=value` words of `text` that name a tuned setting."""
  return {name: _value(value) for name, value in re.findall(r"--(\w+)=([^\s\\\"]+)", text)
          if name in TUNED}


def _shell_function_runs(script):
  """{task: {flag: value}} of a shell script whose `run_task TASK a b ...` lines call a function
  that puts its positional arguments into flags (`--flag=$2`, or `VAR=$2` ... `--flag=$VAR`)."""
  text = (FIXTURES / script).read_text()
  variables = dict(re.findall(r"^\s*(\w+)=\$(\d)\s*$", text, re.M))
  positions, fixed = {}, {}
  for name, value in re.findall(r"--(\w+)=([^\s\\\"]+)", text):
    if name not in TUNED:
      continue
    source = value[1:] if value.startswith("$") else None
    if source and source.isdigit():
      positions[name] = int(source)
    elif source in variables:
      positions[name] = int(variables[source])
    elif source is None:
      fixed[name] = _value(value)
  runs = {}
  for line in re.findall(r"^run_task (.+)$", text, re.M):
    words = line.split()
    runs[words[0].lower()] = dict(fixed, **{name: _value(words[position - 1])
                                            for name, position in positions.items()})
  return runs


def _compare(recipe, original, also=()):
  """The recipe holds exactly the original's tuned values (and `also`, named keys)."""
  assert {k: v for k, v in recipe.items() if k not in also} == pytest.approx(original)


def test_the_glue_recipe_is_the_original_run_glue_sh():
  runs = _shell_function_runs("run_glue.sh")
  assert sorted(runs) == ["cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst-2", "sts-b"]
  assert runs["sst-2"]["learning_rate"] == 1e-5 and runs["sst-2"]["max_seq_length"] == 512
  for task, original in runs.items():
    _compare(recipe_values("albert_paper", "classifier", task), original)
  assert (recipe_values("albert_paper", "classifier", "mnli-mm") ==
          recipe_values("albert_paper", "classifier", "mnli"))


@pytest.mark.parametrize("version,readme", [("v1.1", "README_squad_v1.txt"),
                                            ("v2.0", "README_squad_v2.txt")])
def test_the_squad_recipes_are_the_original_readme_commands(version, readme):
  original = _flags((FIXTURES / readme).read_text())
  assert original["train_batch_size"] == 48 and original["num_train_epochs"] == 2.0
  # dropout_prob is run_squad_v2.py's default, which the command keeps.
  _compare(recipe_values("albert_paper", "squad", version), original, also=("dropout_prob",))


def test_the_race_recipe_is_the_original_readme_command():
  original = _flags((FIXTURES / "README_race.txt").read_text())
  assert original["learning_rate"] == 1e-5 and original["train_step"] == 12000
  recipe = recipe_values("albert_paper", "race", "race")
  _compare(recipe, original, also=("dropout_prob",))
  assert recipe["dropout_prob"] == 0.1  # run_race.py's default


def test_the_albert_zh_recipe_is_brightmarts_clue_and_lcqmc_scripts():
  runs = _shell_function_runs("run_classifier_clue.sh")
  runs["lcqmc"] = _flags((FIXTURES / "run_classifier_lcqmc.sh").read_text())
  del runs["wsc"]  # CLUE's WSC is no task of run_classifier's
  assert runs["cmnli"]["train_batch_size"] == 64 and runs["lcqmc"]["learning_rate"] == 1e-4
  for task, original in runs.items():
    # warm-up: their run_classifier*.py default (0.1), which neither script changes.
    _compare(recipe_values("albert_zh", "classifier", task), original,
             also=("warmup_proportion",))


def _parsed(options_class, *argv):
  flag_values = flags.FlagValues()
  script_flags.define_options_flags(options_class, flag_values)
  flag_values(["script.py", *argv])
  return script_flags.options_from_flags(options_class, flag_values)


def test_a_flag_given_explicitly_beats_the_recipe_even_at_its_default(caplog):
  # 5e-5 is --learning_rate's default: given, it still wins over MRPC's 2e-5.
  options = _parsed(ClassifierOptions, "--task_name=MRPC", "--recipe=albert_paper",
                    "--learning_rate=5e-5", "--train_step=30")
  with caplog.at_level(logging.INFO):
    options = apply_recipe(options, "classifier")
  assert (options.learning_rate, options.train_step) == (5e-5, 30)
  assert (options.train_batch_size, options.warmup_step, options.max_seq_length) == (32, 200, 512)
  assert "--learning_rate=5e-05 (given; the recipe's: 2e-05)" in caplog.text
  assert "--warmup_step=200" in caplog.text  # what the run trains with is in its log
  # Library callers: a field set away from its default is given.
  options = apply_recipe(ClassifierOptions(task_name="rte", recipe="albert_paper",
                                           train_step=3), "classifier")
  assert (options.learning_rate, options.train_step) == (3e-5, 3)


def test_an_explicit_train_step_displaces_a_recipes_epochs():
  options = apply_recipe(_parsed(ClassifierOptions, "--task_name=afqmc", "--recipe=albert_zh",
                                 "--train_step=10"), "classifier")
  assert (options.train_step, options.num_train_epochs, options.learning_rate) == (10, None, 2e-5)


def test_squad_and_race_take_their_recipes_by_version_and_task():
  v2 = apply_recipe(SquadOptions(recipe="albert_paper", version_2_with_negative=True), "squad")
  assert (v2.learning_rate, v2.train_batch_size, v2.num_train_epochs) == (5e-5, 48, 2.0)
  race = apply_recipe(RaceOptions(recipe="albert_paper"), "race")
  assert (race.learning_rate, race.train_batch_size, race.max_qa_length) == (1e-5, 32, 128)


@pytest.mark.parametrize("options,script,words", [
    (ClassifierOptions(task_name="wnli", recipe="albert_paper"), "classifier", "scripts give none"),
    (ClassifierOptions(task_name="tnews", recipe="albert_paper"), "classifier",
     "--recipe=albert_zh has one"),
    (NerOptions(recipe="albert_paper"), "ner", "no recipe for run_ner.py"),
])
def test_a_task_without_a_published_recipe_is_refused_by_name(options, script, words):
  with pytest.raises(ValueError, match=words):
    apply_recipe(options, script)
