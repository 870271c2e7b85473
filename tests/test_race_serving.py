"""The RACE serving SavedModel packs raw strings as data.race does in Python, and scores them
as the Keras model does on the Python-packed ids."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.race import (MultipleChoiceExample, convert_example, process_text, qa_text,
                                 read_race_examples)
from albert_tf import AlbertConfig
from albert_tf.export.race_serving import MultipleChoiceServing, export_multiple_choice
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.tokenization import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer
from conftest import ROOT, SHARED_DATA, float32_atol
from serving_requests import assert_rejected

SPM = str(SHARED_DATA / "sentencepiece" / "spiece.model")
VOCAB = str(SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt")
RACE = SHARED_DATA / "race"
# tiny.json has 64 positions; 16 qa tokens make long questions lose their start.
MAX_SEQ_LENGTH, MAX_QA_LENGTH = 64, 16
# 14 questions, 8 with a blank "_"; every article is longer than 64 tokens.
ARTICLES = ["dev/middle/13.txt", "dev/middle/73.txt", "dev/high/63.txt", "dev/high/107.txt"]
PACKED = {"input_word_ids": "input_ids", "input_mask": "input_mask",
          "input_type_ids": "segment_ids"}


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(spm_model_file=SPM)


# conftest.py's race_export: a tiny 4-choice model exported at MAX_SEQ_LENGTH, MAX_QA_LENGTH.
# Its rank, dtype, empty batch and empty text requests are test_serving_requests.py's.
@pytest.fixture(scope="module")
def model(race_export):
  return race_export[0]


@pytest.fixture(scope="module")
def export_dir(race_export):
  return race_export[1]


@pytest.fixture(scope="module")
def served(race_export):
  return race_export[2]


def _python_inputs(examples, tokenizer, max_seq_length=MAX_SEQ_LENGTH,
                   max_qa_length=MAX_QA_LENGTH):
  """convert_example's packing, named as the model's inputs: int32 [examples, choices, seq]."""
  packed = [convert_example(e, tokenizer, max_seq_length, max_qa_length) for e in examples]
  return {name: np.array([p[key] for p in packed], np.int32) for name, key in PACKED.items()}


def _python_examples(articles, questions, options, tokenizer):
  """Examples as data.race builds them from raw texts."""
  examples = []
  for article, question, choices in zip(articles, questions, options):
    question = process_text(question, tokenizer)
    examples.append(MultipleChoiceExample(
        "edge", 0, "", process_text(article, tokenizer),
        [qa_text(question, process_text(o, tokenizer)) for o in choices]))
  return examples


def _check_served(served, model, tokenizer, examples, articles, questions, options):
  """Served ids equal convert_example's; served probabilities equal the model's on them."""
  inputs = (tf.constant(articles), tf.constant(questions), tf.constant(options))
  expected = _python_inputs(examples, tokenizer)
  got = served.pack(*inputs)
  for name in PACKED:
    np.testing.assert_array_equal(got[name].numpy(), expected[name], err_msg=name)
  out = served.signatures["serving_default"](article=inputs[0], question=inputs[1],
                                             options=inputs[2])
  logits = model({k: tf.constant(v) for k, v in expected.items()}, training=False).numpy()
  probabilities = tf.nn.softmax(logits).numpy()
  # As below: 16 attention terms per layer, then the 4 choices' exponentials.
  np.testing.assert_allclose(out["probabilities"].numpy(), probabilities, rtol=0,
                             atol=float32_atol(probabilities, 16 * 2 + 4))
  assert out["answer_index"].dtype == tf.int32
  # The served choice has the top logit; equal options ("" and "  ") tie, and which of the
  # tied indices an argmax returns is not specified.
  chosen = np.take_along_axis(logits, out["answer_index"].numpy()[:, None], -1)[:, 0]
  np.testing.assert_allclose(chosen, logits.max(-1), rtol=0,
                             atol=float32_atol(logits, 16 * 2))
  return expected


def test_real_race_questions_are_packed_and_scored_as_the_python_path(served, model,
                                                                       tokenizer):
  python = {(e.example_id, e.question_index): e
            for e in read_race_examples(str(RACE), "dev", tokenizer)}
  examples, articles, questions, options = [], [], [], []
  for name in ARTICLES:
    raw = json.loads((RACE / "RACE" / name).read_text(encoding="utf-8"))
    for i, question in enumerate(raw["questions"]):
      examples.append(python[(raw["id"], i)])
      articles.append(raw["article"])
      questions.append(question)
      options.append(raw["options"][i])
  assert len(examples) == 14 and sum("_" in q for q in questions) == 8
  expected = _check_served(served, model, tokenizer, examples, articles, questions, options)
  # Both cuts happen: the article always, the qa text's start for some choices.
  assert expected["input_mask"].min(axis=-1).tolist() == [[1] * 4] * 14
  assert any(len(tokenizer.tokenize(ending)) > MAX_QA_LENGTH
             for e in examples for ending in e.endings)


EDGE_CASES = [
    # (article, question, options, Python's choice texts)
    ("Tom and Ann had tea.", "_ and _ had tea.", ["Tom", "Ann", "We", "They"],
     ["tom and tom had tea.", "ann and ann had tea.", "we and we had tea.",
      "they and they had tea."]),
    ("Café  Noir\tis in   Paris.", "Where is Café Noir?", ["In PARIS", "À Lyon", "", "  "],
     ["where is cafe noir? in paris", "where is cafe noir? a lyon", "where is cafe noir? ",
      "where is cafe noir? "]),
    # NFKD turns the fullwidth low line into "_": a blank, in Python too.
    ("She likes green tea.", "She likes ＿ tea.", ["green", "black", "", "_"],
     ["she likes green tea.", "she likes black tea.", "she likes  tea.", "she likes _ tea."]),
    ("", "", ["a", "", "Ｂ", "c d"], [" a", " ", " b", " c d"]),
]


def test_hand_written_edge_cases_are_packed_and_scored_as_the_python_path(served, model,
                                                                          tokenizer):
  articles, questions, options, endings = (list(c) for c in zip(*EDGE_CASES))
  examples = _python_examples(articles, questions, options, tokenizer)
  assert [e.endings for e in examples] == endings
  _check_served(served, model, tokenizer, examples, articles, questions, options)


def test_wordpiece_mode_keeps_texts_as_they_are_and_packs_as_the_python_path(model):
  # No preprocess_text: "＿" is no blank, "Café" keeps its case until the basic tokenizer.
  articles = ["小明去了公园。 Tom went to the PARK, in 1990.", ""]
  questions = ["小明去了＿。", "Where _ he  go _?"]
  options = [["公园", "学校", "", "Café"], ["a", "B b", "", "_"]]
  python = FullTokenizer(vocab_file=VOCAB)
  examples = _python_examples(articles, questions, options, python)
  assert examples[0].endings[3] == "小明去了＿。 Café"
  assert examples[1].endings[1] == "Where B b he  go B b?"
  module = MultipleChoiceServing(model, InGraphTokenizer(vocab_file=VOCAB), max_seq_length=16,
                                 max_qa_length=8)
  got = module.pack(tf.constant(articles), tf.constant(questions), tf.constant(options))
  expected = _python_inputs(examples, python, max_seq_length=16, max_qa_length=8)
  for name in PACKED:
    np.testing.assert_array_equal(got[name].numpy(), expected[name], err_msg=name)


def test_a_request_is_computed_at_its_longest_packed_choice(tokenizer):
  """Requests are cut to their longest packed choice: a model with 16 positions answers short
  questions under max_seq_length=64 (it could not run 64 columns), with the probabilities of
  the same choices packed at 16, to float32 rounding."""
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      max_position_embeddings=16)
  model = AlbertMultipleChoice(config).build_for(4)
  module = MultipleChoiceServing(model, InGraphTokenizer(spm_model_file=SPM), max_seq_length=64,
                                 max_qa_length=16)
  articles, questions = ["Tom had tea.", "Ann ran."], ["Who had tea?", "_ ran."]
  options = [["Tom", "Ann", "We", "They"], ["Ann", "Tom", "", "It"]]
  out = module.serve(tf.constant(articles), tf.constant(questions), tf.constant(options))
  examples = _python_examples(articles, questions, options, tokenizer)
  at_16 = _python_inputs(examples, tokenizer, max_seq_length=16, max_qa_length=13)
  assert at_16["input_mask"][..., -1].max() == 0  # nothing cut: the same texts as at 64
  logits = model({k: tf.constant(v) for k, v in at_16.items()}, training=False).numpy()
  probabilities = tf.nn.softmax(logits).numpy()
  # A probability sums 16 attention terms per layer, then the 4 choices' exponentials.
  np.testing.assert_allclose(out["probabilities"], probabilities, rtol=0,
                             atol=float32_atol(probabilities, 16 * 2 + 4))


def test_max_qa_length_must_leave_room_for_the_special_tokens(tmp_path, model):
  with pytest.raises(ValueError, match="max_qa_length"):
    export_multiple_choice(model, str(tmp_path / "x"), spm_model_file=SPM, max_seq_length=16,
                           max_qa_length=14)


def test_malformed_requests_are_invalid_arguments_naming_the_input(export_dir, served):
  ok = {"article": ["Tom went to the park."], "question": ["Where did Tom go?"],
        "options": [["park", "zoo", "school", "shop"]]}
  for request, pattern in [
      (dict(ok, question=["a", "b"]), "question has 2 rows but article has 1"),
      (dict(ok, options=[["park", "zoo"]] * 1), "options has 2 choices per row; this model "
                                                r"takes 4 \(num_choices\)"),
      (dict(ok, options=[["a"] * 5] * 2), "options has 2 rows but article has 1")]:
    assert_rejected(export_dir, served, "serving_default", request, pattern)
