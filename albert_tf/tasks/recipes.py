"""Fine-tuning recipes: the settings the original's own scripts use for each task, under one flag.

    --recipe=albert_paper   run_classifier (GLUE), run_squad (v1.1, v2.0), run_race
    --recipe=albert_zh      run_classifier on CLUE and LCQMC (brightmart's albert_zh scripts)

A recipe fills the options a user did not give: an explicitly given flag always wins
(`FineTuningOptions.given`). `apply_recipe` logs every value it set and every one a flag
overrode, so a run's log says what it trained with.

The tables below are transcriptions of the original's scripts, each entry naming the file and
line it comes from; tests/test_recipes.py parses copies of those lines and checks the tables
against them. Where the original gives no recipe (WNLI, OCNLI, ChnSentiCorp, NER), asking for
one is an error naming what is missing rather than a guess.

What the recipes leave to other places, on purpose:
- The encoder's dropout ("ALBERT DR" in the paper) is the model config's
  `hidden_dropout_prob`: 0 in the v2 models' configs, which is what the original's README
  (line 46) says v2 fine-tuning uses (RACE: "learning rate of 1e-5 and 0 ALBERT DR").
- The classifier's dropout is 0.1 in the original's code (classifier_utils.py line 794,
  `keep_prob=0.9`) as in ours (`modeling/classifier.py`); SQuAD v2's and RACE's are a flag,
  `--dropout_prob`, whose default 0.1 is the original's (run_squad_v2.py line 180, run_race.py
  line 85) and which the recipes set explicitly.
- Model size: the original publishes one set of values for every size (run_glue.sh is written
  for base; the README's SQuAD and RACE commands for any), so the recipes do not vary by size.
  The README (line 46) names one difference between v1 and v2 models, RACE's learning rate
  (1e-5 for v2, which its RACE command uses); v1's value is not in the original's files.
"""

import dataclasses
import logging

logger = logging.getLogger(__name__)

RECIPES = ("albert_paper", "albert_zh")

# SPEC: google-research/albert run_glue.sh line 29 (every task): --max_seq_length=512
# --optimizer=adamw; lines 45-52: `run_task TASK warmup_step learning_rate train_step
# save_checkpoints_steps train_batch_size`.
_GLUE_COMMON = dict(max_seq_length=512, optimizer="adamw")
_GLUE = {
    "sst-2": dict(warmup_step=1256, learning_rate=1e-5, train_step=20935,  # run_glue.sh:45
                  save_checkpoints_steps=100, train_batch_size=32),
    "mnli": dict(warmup_step=1000, learning_rate=3e-5, train_step=10000,  # run_glue.sh:46
                 save_checkpoints_steps=100, train_batch_size=128),
    "cola": dict(warmup_step=320, learning_rate=1e-5, train_step=5336,  # run_glue.sh:47
                 save_checkpoints_steps=100, train_batch_size=16),
    "qnli": dict(warmup_step=1986, learning_rate=1e-5, train_step=33112,  # run_glue.sh:48
                 save_checkpoints_steps=200, train_batch_size=32),
    "qqp": dict(warmup_step=1000, learning_rate=5e-5, train_step=14000,  # run_glue.sh:49
                save_checkpoints_steps=100, train_batch_size=128),
    "rte": dict(warmup_step=200, learning_rate=3e-5, train_step=800,  # run_glue.sh:50
                save_checkpoints_steps=100, train_batch_size=32),
    "sts-b": dict(warmup_step=214, learning_rate=2e-5, train_step=3598,  # run_glue.sh:51
                  save_checkpoints_steps=100, train_batch_size=16),
    "mrpc": dict(warmup_step=200, learning_rate=2e-5, train_step=800,  # run_glue.sh:52
                 save_checkpoints_steps=100, train_batch_size=32),
}
# MNLI's mismatched dev set is the same training as MNLI (run_glue.sh trains MNLI once).
_GLUE["mnli-mm"] = _GLUE["mnli"]

# SPEC: google-research/albert README.md lines 221-233 (run_squad_v1) and 256-268
# (run_squad_v2): the same values for both versions.
_SQUAD = dict(max_seq_length=384, doc_stride=128, max_query_length=64,  # README:221-223
              train_batch_size=48, learning_rate=5e-5,  # README:226,228
              num_train_epochs=2.0, warmup_proportion=0.1,  # README:229-230
              save_checkpoints_steps=5000, n_best_size=20, max_answer_length=30)  # README:231-233
# SPEC: run_squad_v2.py line 180, the dropout of v2's answer-class layer (a default the
# README's command keeps).
_SQUAD_V2 = dict(_SQUAD, dropout_prob=0.1)

# SPEC: google-research/albert README.md lines 290-299 (run_race); run_race.py line 85 for the
# dropout the command keeps at its default.
_RACE = dict(max_seq_length=512, max_qa_length=128,  # README:290-291
             train_batch_size=32, eval_batch_size=8, learning_rate=1e-5,  # README:294-296
             train_step=12000, warmup_step=1000, save_checkpoints_steps=100,  # README:297-299
             dropout_prob=0.1)  # run_race.py:85

# SPEC: brightmart/albert_zh run_classifier_clue.sh lines 95-99: `run_task TASK max_seq_length
# train_batch_size learning_rate num_train_epochs save_checkpoints_steps` (line 100, wsc, is no
# task of ours); warm-up is run_classifier_clue.py's default --warmup_proportion=0.1 (line 97).
_CLUE = {
    "afqmc": dict(max_seq_length=128, train_batch_size=16, learning_rate=2e-5,  # clue.sh:95
                  num_train_epochs=3.0, save_checkpoints_steps=300),
    "cmnli": dict(max_seq_length=128, train_batch_size=64, learning_rate=3e-5,  # clue.sh:96
                  num_train_epochs=2.0, save_checkpoints_steps=300),
    "csl": dict(max_seq_length=128, train_batch_size=16, learning_rate=1e-5,  # clue.sh:97
                num_train_epochs=5.0, save_checkpoints_steps=100),
    "iflytek": dict(max_seq_length=128, train_batch_size=32, learning_rate=2e-5,  # clue.sh:98
                    num_train_epochs=3.0, save_checkpoints_steps=300),
    "tnews": dict(max_seq_length=128, train_batch_size=16, learning_rate=2e-5,  # clue.sh:99
                  num_train_epochs=3.0, save_checkpoints_steps=300),
    # SPEC: brightmart/albert_zh run_classifier_lcqmc.sh lines 62-65; run_classifier.py line 91
    # for the warm-up.
    "lcqmc": dict(max_seq_length=128, train_batch_size=64, learning_rate=1e-4,
                  num_train_epochs=5.0),
}
for _values in _CLUE.values():
  _values.setdefault("warmup_proportion", 0.1)

# {recipe: {script: {task: values}}}; a script's task is `task_key`'s.
TABLE = {
    "albert_paper": {
        "classifier": {task: dict(_GLUE_COMMON, **values) for task, values in _GLUE.items()},
        "squad": {"v1.1": _SQUAD, "v2.0": _SQUAD_V2},
        "race": {"race": _RACE},
    },
    "albert_zh": {"classifier": _CLUE},
}

# What each script calls its tasks, for the messages.
_NO_RECIPE = {
    "ner": "neither the original nor albert_zh publishes NER fine-tuning settings",
}

# A recipe's value that an explicit flag makes moot: the recipe's epochs say the length, which
# an explicit --train_step says otherwise (the epochs would win in the task).
_DISPLACED_BY = {"num_train_epochs": ("train_step",), "warmup_proportion": ("train_step",)}


def task_key(script, options):
  """The task a recipe is looked up by: the classifier's --task_name, SQuAD's version, RACE."""
  if script == "classifier":
    return (options.task_name or "").lower()
  if script == "squad":
    return "v2.0" if options.version_2_with_negative else "v1.1"
  return script


def recipe_values(recipe, script, task):
  """The recipe's {field: value} for `task` of `script`; ValueError naming what exists when it
  has none."""
  if script in _NO_RECIPE:
    raise ValueError(f"--recipe={recipe}: no recipe for run_{script}.py: {_NO_RECIPE[script]}; "
                     "give the settings as flags")
  tasks = TABLE[recipe].get(script, {})
  if task in tasks:
    return dict(tasks[task])
  other = [name for name in RECIPES if task in TABLE[name].get(script, {})]
  hint = (f"--recipe={other[0]} has one" if other else
          "the original's scripts give none; give the settings as flags")
  known = ", ".join(sorted(tasks)) or "none"
  raise ValueError(f"--recipe={recipe} has no settings for {task!r} (it has: {known}): {hint}")


def given_fields(options):
  """The fields of `options` the user gave: those a script saw as flags (`options.given`), and
  for library callers any field that differs from its default."""
  given = set(options.given)
  for field in dataclasses.fields(options):
    if field.default is not dataclasses.MISSING and field.name != "given":
      if getattr(options, field.name) != field.default:
        given.add(field.name)
  return given


def apply_recipe(options, script):
  """`options` with `options.recipe`'s values for its task wherever no flag gave the value;
  unchanged without --recipe. Logs the values set and the ones a given flag overrode."""
  if not options.recipe:
    return options
  task = task_key(script, options)
  values = recipe_values(options.recipe, script, task)
  given = given_fields(options)
  kept, applied = {}, {}
  for name, value in values.items():
    displaced = [flag for flag in _DISPLACED_BY.get(name, ()) if flag in given]
    if name in given or displaced:
      kept[name] = (getattr(options, name), value)
    else:
      applied[name] = value
  lines = [f"--recipe={options.recipe} for {task} (run_{script}.py):"]
  lines += [f"  --{name}={value}" for name, value in applied.items()]
  lines += [f"  --{name}={now} (given; the recipe's: {value})"
            for name, (now, value) in kept.items()]
  logger.info("\n".join(lines))
  return dataclasses.replace(options, **applied)
