"""Fine-tuning batches computed at their longest real row (`--trim_batches`, the default): the
same examples in the same order, less padding, and the fixed-length run's losses and metrics to
float32 rounding."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.batch_length import trim_batch, trimmed_length
from albert_tf.data import squad as squad_data
from albert_tf.data.classification.features import classification_dataset
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.tasks.ner import NerOptions, NerTask
from albert_tf.tasks.race import RaceOptions, RaceTask
from albert_tf.tasks.squad import SquadOptions, SquadTask
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, float32_atol

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
SST2 = SHARED_DATA / "glue" / "SST-2"
XQUAD = SHARED_DATA / "squad" / "v1.1_xquad_en" / "xquad.en.json"
CONLL = SHARED_DATA / "ner" / "conll2003"


def test_a_batch_is_cut_to_its_longest_row_rounded_up_to_the_multiple():
  mask = tf.constant([[1] * 5 + [0] * 27, [1] * 18 + [0] * 14])
  batch = {"input_mask": mask, "input_word_ids": mask * 7, "label_ids": tf.constant([0, 1])}
  trimmed = trim_batch(batch, ("input_mask", "input_word_ids"), 32, multiple=8)
  assert trimmed["input_mask"].shape == [2, 24]  # 18 real pieces -> 24
  np.testing.assert_array_equal(trimmed["input_word_ids"], batch["input_word_ids"][:, :24])
  np.testing.assert_array_equal(trimmed["label_ids"], [0, 1])  # not a sequence: as it was
  # Never past max_seq_length, never empty; RACE's [batch, choices, seq] by its longest choice.
  assert int(trimmed_length(tf.ones([2, 30], tf.int32), 30, multiple=16)) == 30
  assert int(trimmed_length(tf.zeros([2, 30], tf.int32), 30, multiple=16)) == 16
  assert int(trimmed_length(tf.constant([[[1, 1, 0, 0], [1, 1, 1, 0]]]), 4, multiple=1)) == 3


def _options(out, cache, trim, config):
  return ClassifierOptions(
      task_name="sst-2", data_dir=str(SST2), output_dir=str(out), albert_config_file=str(config),
      spm_model_file=str(SPM), max_seq_length=64, do_train=True, do_eval=True,
      train_batch_size=8, eval_batch_size=64, train_step=6, save_checkpoints_steps=6,
      iterations_per_loop=1, learning_rate=1e-3, cached_dir=str(cache), seed=1,
      log_every_seconds=0, trim_batches=trim)


@pytest.fixture(scope="module")
def no_encoder_dropout(tmp_path_factory):
  """configs/tiny.json with the encoder's dropout at 0, as in the v2 configs: the classifier's
  own dropout (on the pooled output, whose shape trimming keeps) stays 0.1."""
  config = json.loads((ROOT / "configs" / "tiny.json").read_text())
  config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  path = tmp_path_factory.mktemp("config") / "tiny_no_dropout.json"
  path.write_text(json.dumps(config))
  return path


def test_trimmed_sst2_training_and_evaluation_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  cache = tmp_path / "features"
  results = {}
  for trim in (False, True):
    history = []
    task = ClassificationTask(_options(tmp_path / f"trim-{trim}", cache, trim,
                                       no_encoder_dropout))
    _, evaluated, _ = Run(task).run_phases(history)
    results[trim] = [h["loss"] for h in history], evaluated
  # The trimmed run really computed shorter batches.
  _, dev = task.records("dev")
  lengths = {int(b["input_mask"].shape[1])
             for b in classification_dataset(dev, 64, 64, False, False, trim=True)}
  assert min(lengths) < 64, lengths
  (fixed_losses, fixed_eval), (trimmed_losses, trimmed_eval) = results[False], results[True]
  assert len(fixed_losses) == 6
  # Each loss sums over up to 64 positions in attention, per layer and step.
  np.testing.assert_allclose(trimmed_losses, fixed_losses,
                             atol=float32_atol(fixed_losses, 64 * 2 * 6))
  assert trimmed_eval["accuracy"] == fixed_eval["accuracy"]
  np.testing.assert_allclose(trimmed_eval["loss"], fixed_eval["loss"],
                             atol=float32_atol(fixed_eval["loss"], 64 * 2 * 6))


def test_trimmed_multiple_choice_training_and_evaluation_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  colours = ["red", "blue", "green", "black"]
  rows = ["passage,question,a,b,c,d,answer"] + [
      f"The {'old ' * (i % 5)}car is {colours[i % 4]}.,What colour is the car?,"
      f"{','.join(colours)},{i % 4}" for i in range(16)]
  for split in ("train", "dev"):
    (tmp_path / f"{split}.csv").write_text("\n".join(rows) + "\n")
  results = {}
  for trim in (False, True):
    options = RaceOptions(
        task_name="csv", data_dir=str(tmp_path), output_dir=str(tmp_path / f"trim-{trim}"),
        context_column="passage", question_column="question", label_column="answer",
        option_columns=("a", "b", "c", "d"), albert_config_file=str(no_encoder_dropout),
        spm_model_file=str(SPM), max_seq_length=48, max_qa_length=16, train_batch_size=4,
        eval_batch_size=8, learning_rate=1e-3, train_step=4, warmup_step=0,
        save_checkpoints_steps=4, iterations_per_loop=1, seed=1, log_every_seconds=0,
        cached_dir=str(tmp_path / "features"), trim_batches=trim)
    history, task = [], RaceTask(options)
    _, evaluated, _ = Run(task).run_phases(history)
    results[trim] = [h["loss"] for h in history], evaluated
  _, dev = task.records("dev")
  lengths = {int(b["input_mask"].shape[-1]) for b in task._dataset(dev, 8, False)}
  assert max(lengths) < 48, lengths  # the trimmed run really computed shorter batches
  (fixed_losses, fixed_eval), (trimmed_losses, trimmed_eval) = results[False], results[True]
  assert len(fixed_losses) == 4
  # Each loss sums over up to 48 positions in attention, per layer and step.
  np.testing.assert_allclose(trimmed_losses, fixed_losses,
                             atol=float32_atol(fixed_losses, 48 * 2 * 4))
  assert trimmed_eval["accuracy"] == fixed_eval["accuracy"]
  np.testing.assert_allclose(trimmed_eval["loss"], fixed_eval["loss"],
                             atol=float32_atol(fixed_eval["loss"], 48 * 2 * 4))


def test_trimmed_batches_under_xla_accumulation_and_loops_of_steps_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  """XLA compiles one program per length (a multiple of 16: few), the loop of 3 steps traces
  once, and micro-batches are cut from the trimmed batch. The head's dropout is off: under XLA
  its draws differ between compiled programs, a different draw of the same dropout."""
  losses = {}
  for trim in (False, True):
    options = _options(tmp_path / f"trim-{trim}", tmp_path / "features", trim,
                       no_encoder_dropout)
    options.do_eval, options.jit_compile, options.gradient_accumulation_steps = False, True, 2
    options.iterations_per_loop = 3
    run, history = Run(ClassificationTask(options)), []
    run.loop.model.head.dropout.rate = 0.0
    run.run_phases(history)
    losses[trim] = [h["loss"] for h in history]
  assert len(losses[False]) == 2  # two loops of 3 steps: each loop's mean loss
  np.testing.assert_allclose(losses[True], losses[False],
                             atol=float32_atol(losses[False], 64 * 2 * 6))


def _squad_files(tmp_path):
  """24 xquad questions as SQuAD v2.0, each with its paragraph cut around its answer
  (windows of many lengths), every third made unanswerable; for training and prediction."""
  paragraphs = []
  questions = ((p["context"], qa) for p in squad_data.load_squad_json(str(XQUAD))[0]["paragraphs"]
               for qa in p["qas"])
  for n, (context, qa) in enumerate(questions):
    answer = qa["answers"][0]
    start = context.rfind(". ", 0, answer["answer_start"]) + 2 if n % 2 else 0
    start = start if start >= 2 else 0  # from the answer's sentence, or the paragraph's start
    end = answer["answer_start"] + len(answer["text"]) + n * 37 % 100
    qa["answers"] = [dict(answer, answer_start=answer["answer_start"] - start)]
    paragraphs.append({"context": context[start:end], "qas": [qa]})
    if n % 3 == 0:
      qa["is_impossible"], qa["answers"] = True, []
    if len(paragraphs) == 24:
      break
  path = tmp_path / "squad_v2.json"
  path.write_text(json.dumps({"version": "2.0",
                              "data": [{"title": "xquad", "paragraphs": paragraphs}]}))
  return str(path)


def _squad_run(tmp_path, config, trim, version_2=True):
  squad = _squad_files(tmp_path)
  options = SquadOptions(
      train_file=squad, predict_file=squad, output_dir=str(tmp_path / f"v2-{version_2}-{trim}"),
      albert_config_file=str(config), spm_model_file=str(SPM), max_seq_length=64,
      doc_stride=32, max_query_length=16, train_batch_size=4, predict_batch_size=4,
      num_train_epochs=0.5, learning_rate=1e-3, iterations_per_loop=1, seed=1,
      log_every_seconds=0, do_train=True, do_predict=True, version_2_with_negative=version_2,
      trim_batches=trim)
  history, task = [], SquadTask(options)
  Run(task).run_phases(history)
  return task, [h["loss"] for h in history], tmp_path / options.output_dir


def test_trimmed_squad_v2_training_and_predictions_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path):
  """v2.0 masks padding out of its softmaxes and candidates (p_mask): the same losses, answers
  and null odds. v1.1's loss and n-best range over padding, as the original's: never trimmed."""
  runs = {trim: _squad_run(tmp_path, no_encoder_dropout, trim) for trim in (False, True)}
  _, fixed_losses, fixed_out = runs[False]
  task, trimmed_losses, trimmed_out = runs[True]
  assert len(fixed_losses) >= 3
  # Each loss sums over up to 64 positions in attention and the softmaxes, per layer and step.
  np.testing.assert_allclose(trimmed_losses, fixed_losses,
                             atol=float32_atol(fixed_losses, 64 * 3 * len(fixed_losses)))
  read = lambda out, name: json.loads((out / name).read_text())
  assert read(trimmed_out, "predictions.json") == read(fixed_out, "predictions.json")
  fixed_odds, trimmed_odds = (read(out, "null_odds.json") for out in (fixed_out, trimmed_out))
  assert trimmed_odds.keys() == fixed_odds.keys()
  np.testing.assert_allclose([trimmed_odds[k] for k in fixed_odds], list(fixed_odds.values()),
                             atol=float32_atol(list(fixed_odds.values()), 64 * 3 * 2))
  path = str(fixed_out / "predict_features.tf_record")
  lengths = {int(b["input_mask"].shape[1])
             for b in squad_data.squad_dataset(path, 64, 4, False, trim=True)}
  assert min(lengths) < 64, lengths  # the trimmed run really computed shorter batches
  v1 = SquadTask(dataclasses.replace(task.options, version_2_with_negative=False,
                                     do_train=False, do_predict=False))
  assert task.trim and not v1.trim


def _ner_run(tmp_path, config, trim, use_crf):
  data = tmp_path / "conll"
  if not data.exists():
    data.mkdir()
    for split, source, count in (("train", "train", 48), ("valid", "valid", 40)):
      blocks = (CONLL / f"{source}.txt").read_text(encoding="utf-8").split("\n\n")
      (data / f"{split}.txt").write_text("\n\n".join(blocks[:count]) + "\n",
                                         encoding="utf-8")
  options = NerOptions(
      albert_config_file=str(config), spm_model_file=str(SPM), data_format="conll",
      data_dir=str(data), output_dir=str(tmp_path / f"ner-{use_crf}-{trim}"), do_train=True,
      do_eval=True, use_crf=use_crf, max_seq_length=64, doc_stride=32, train_batch_size=8,
      eval_batch_size=8, learning_rate=1e-3, train_step=4, warmup_step=0,
      save_checkpoints_steps=4, iterations_per_loop=1, seed=1, log_every_seconds=0,
      dropout_prob=0.0, trim_batches=trim)
  history, task = [], NerTask(options)
  run = Run(task)
  _, evaluated, _ = run.run_phases(history)
  _, tags = task.predicted_tags(run.loop.model, "dev", 8)
  return task, [h["loss"] for h in history], evaluated, tags


@pytest.mark.parametrize("use_crf", [False, True], ids=["softmax", "crf"])
def test_trimmed_ner_training_and_evaluation_equal_the_fixed_length_run(
    no_encoder_dropout, tmp_path, use_crf):
  """Words are read at their first pieces and scored where `label_mask` says, the CRF runs
  over those words only: cutting the windows' padding changes no loss, tag or F1."""
  runs = {trim: _ner_run(tmp_path, no_encoder_dropout, trim, use_crf) for trim in (False, True)}
  (_, fixed_losses, fixed_eval, fixed_tags) = runs[False]
  (task, trimmed_losses, trimmed_eval, trimmed_tags) = runs[True]
  assert len(fixed_losses) == 4
  # Each loss sums over up to 64 positions in attention and the windows' words, per step.
  np.testing.assert_allclose(trimmed_losses, fixed_losses,
                             atol=float32_atol(fixed_losses, 64 * 3 * 4))
  assert trimmed_tags == fixed_tags  # every dev word's tag
  assert trimmed_eval == fixed_eval
  dataset = task._trimmed(tf.data.Dataset.from_tensor_slices(task.features("dev")[2]).batch(8))
  lengths = {int(b["word_positions"].shape[1]) for b in dataset}
  assert min(lengths) < 64, lengths  # the trimmed run really computed shorter windows


def test_bucketed_training_batches_hold_examples_of_one_length_bucket(tmp_path):
  """--bucket_by_length: every training batch's real lengths share one bucket of 16 (1-16,
  17-32, ...), so the trimmed batch is its bucket's width; refused without trimming."""
  from albert_tf.data.classification.features import (  # pylint: disable=g-import-not-at-top
      convert_examples_to_features, write_features_tfrecord)
  from albert_tf.data.classification.processor import InputExample  # pylint: disable=g-import-not-at-top
  from albert_tf.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  words = "the film is a gripping tale of love loss and hope told with care".split()
  examples = [InputExample(guid=str(i), text_a=" ".join(words[:1 + i % 14] * (1 + i % 5)),
                           label=str(i % 2)) for i in range(120)]
  path = str(tmp_path / "train.tf_record")
  write_features_tfrecord(convert_examples_to_features(
      examples, ["0", "1"], 64, FullTokenizer(spm_model_file=str(SPM))), path)
  dataset = classification_dataset(path, 64, 8, True, False, seed=1, trim=True, bucket=True)
  assert dataset.element_spec["input_mask"].shape.as_list() == [8, None]  # a static batch
  buckets = []
  for batch in dataset.take(20):
    lengths = batch["input_mask"].numpy().sum(-1)
    bucket = set((lengths - 1) // 16)
    assert len(bucket) == 1, lengths
    buckets.append(bucket.pop())
    assert batch["input_mask"].shape[1] == 16 * (buckets[-1] + 1)
  assert len(set(buckets)) >= 3, buckets  # the data's lengths span several buckets
  with pytest.raises(ValueError, match="trimmed"):
    classification_dataset(path, 64, 8, True, False, trim=False, bucket=True)
  with pytest.raises(ValueError, match="--bucket_by_length needs --trim_batches"):
    ClassificationTask(ClassifierOptions(
        task_name="sst-2", data_dir=str(SST2), output_dir=str(tmp_path / "out"),
        albert_config_file=str(ROOT / "configs" / "tiny.json"), spm_model_file=str(SPM),
        max_seq_length=64, trim_batches=False, bucket_by_length=True))
