"""SQuAD data: character alignment, windows, features, TFRecords, post-processing, metrics."""

import json
import logging

import numpy as np
import pytest

from conftest import SHARED_DATA
from albert_tf.data import squad
from albert_tf.data import squad_predictions
from albert_tf.metrics import squad as squad_metrics
from albert_tf.tokenization import FullTokenizer, preprocess_text
from albert_tf.tokenization.offsets import encode_with_offsets, token_for_char

XQUAD = SHARED_DATA / "squad" / "v1.1_xquad_en" / "xquad.en.json"
SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
CMRC_TRIAL = SHARED_DATA / "chinese" / "mrc" / "cmrc2018_trial.json"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(spm_model_file=SPM, do_lower_case=True)


@pytest.fixture(scope="module")
def wordpiece():
  return FullTokenizer(vocab_file=ZH_VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def xquad():
  return squad.load_squad_json(str(XQUAD))


def _pieces_with_text(tokenizer, text):
  ids, starts, ends = encode_with_offsets(tokenizer, text)
  return [(piece, text[s:e + 1]) for piece, s, e in
          zip(tokenizer.convert_ids_to_tokens(ids), starts, ends)]


# --- alignment ---------------------------------------------------------------------------------
def test_offsets_give_the_tokenizer_ids_and_cover_the_context_in_order(tokenizer, xquad):
  for article in xquad:
    for paragraph in article["paragraphs"]:
      context = paragraph["context"]
      ids, starts, ends = encode_with_offsets(tokenizer, context)
      assert ids == tokenizer.encode_ids([context])[0]
      assert starts == sorted(starts) and ends == sorted(ends)
      # The raw characters of each piece normalise to text holding the piece (exactly the
      # piece unless one raw character became several pieces: "½" -> "1⁄2").
      for piece, s, e in zip(tokenizer.convert_ids_to_tokens(ids), starts, ends):
        if piece != "<unk>":
          assert piece.replace("▁", "") in preprocess_text(context[s:e + 1], lower=True)


def test_offsets_through_normalisation_land_on_the_raw_characters(tokenizer):
  text = "Café  naïve ﬁsh, in 1990, ``quoted'' ΟΔΟΣ e\u0301te"
  pieces = _pieces_with_text(tokenizer, text)
  assert ("▁cafe", "Café") in pieces  # accent dropped, span keeps it
  assert ("▁fish", " ﬁsh") in pieces  # one ligature character became two
  assert ("▁1990", " 1990") in pieces and (",", ",") in pieces  # the digit-comma split
  # `` and '' stay as they are, as in the original ("`" is not in the vocab: one <unk>).
  assert ("<unk>", "``") in pieces and pieces.count(("'", "'")) == 2
  assert ("<unk>", "ΟΔΟΣ") in pieces
  # A combining mark that normalisation drops stays with the piece before it.
  assert pieces[-1][1].strip() == "e\u0301te"


def test_a_gold_answer_maps_to_the_pieces_that_cover_it(tokenizer):
  text = "The treaty was signed in 1990, in Paris."
  ids, starts, ends = encode_with_offsets(tokenizer, text)
  first, last = token_for_char(starts, ends, text.index("1990"), text.index("1990") + 3)
  assert text[starts[first]:ends[last] + 1].strip() == "1990"


def test_wordpiece_offsets_land_on_the_raw_characters(wordpiece):
  text = "《泡泡战士》由Nexon开发，É\u0301cole 2V2、ﬁsh a\u200bb ΟΔΟΣ 臺灣"
  ids, starts, ends = encode_with_offsets(wordpiece, text)
  assert ids == wordpiece.convert_tokens_to_ids(wordpiece.tokenize(text))
  pieces = [(p, text[s:e + 1]) for p, s, e in
            zip(wordpiece.convert_ids_to_tokens(ids), starts, ends)]
  assert pieces[:7] == [("《", "《"), ("泡", "泡"), ("泡", "泡"), ("战", "战"), ("士", "士"),
                        ("》", "》"), ("由", "由")]
  assert ("ne", "Ne") in pieces and ("##xon", "xon") in pieces  # "##" pieces: their part
  # Lowercased and accents stripped: the dropped combining mark stays with its piece.
  assert ("eco", "É\u0301co") in pieces and ("##le", "le") in pieces
  assert ("2", "2") in pieces and ("##v", "V") in pieces and ("##2", "2") in pieces
  assert ("[UNK]", "ﬁsh") in pieces  # an unknown word: one [UNK] over the whole word
  assert ("ab", "a\u200bb") in pieces  # a dropped character inside a word joins it
  assert ("##ς", "Σ") in pieces  # the final sigma, lowercased in context
  assert pieces[-2:] == [("臺", "臺"), ("灣", "灣")]


def _cmrc_examples(caplog):
  with caplog.at_level(logging.WARNING):
    examples = squad.read_squad_examples(str(CMRC_TRIAL), is_training=True)
  return examples


def test_cmrc_trial_answers_map_back_to_their_gold_text(wordpiece, caplog):
  """Real data: every CMRC 2018 trial answer whose answer_start points at its text gets the
  pieces that give back exactly that text; the 5 that do not (offsets counted past a
  character outside the BMP) are reported by id and skipped."""
  examples = _cmrc_examples(caplog)
  assert len(examples) == 1002 - 5
  assert "skipped 5 questions whose answer_start" in caplog.text
  assert all(f"TRIAL_210_QUERY_{k}" in caplog.text for k in range(5))
  aligned = {}
  for e in examples:
    if e.paragraph_text not in aligned:
      aligned[e.paragraph_text] = encode_with_offsets(wordpiece, e.paragraph_text)
      assert aligned[e.paragraph_text][0] == wordpiece.encode_ids([e.paragraph_text])[0]
    _, starts, ends = aligned[e.paragraph_text]
    first, last = token_for_char(starts, ends, e.start_position,
                                 e.start_position + len(e.orig_answer_text) - 1)
    # Post-processing strips the outer spaces of a span (3 gold answers have some).
    assert (e.paragraph_text[starts[first]:ends[last] + 1].strip()
            == e.orig_answer_text.strip()), e.qas_id


def _gold_predictions(examples, features, max_seq_length):
  """postprocess_v1 of logits that pick the gold span in every window that holds it."""
  results = {}
  for f in features:
    start, end = np.full(max_seq_length, -10.0), np.full(max_seq_length, -10.0)
    start[f.start_position], end[f.end_position] = 10.0, 10.0
    results[f.unique_id] = (start, end)
  return squad_predictions.postprocess_v1(examples, features, results, 20, max_seq_length)[0]


def test_cmrc_trial_gold_spans_through_features_and_post_processing(wordpiece, caplog):
  """Real data, at the original's 384 / 128 / 64: the gold start/end positions of the
  features give back exactly the gold text, except for the long answers (150+ characters)
  that no window holds where their first piece has its most context (the original's rule
  for a valid span)."""
  examples = _cmrc_examples(caplog)
  features = squad.convert_examples_to_features(examples, wordpiece, 384, 128, 64, True)
  predictions = _gold_predictions(examples, features, 384)
  held = {examples[f.example_index].qas_id for f in features if not f.is_impossible
          and f.token_is_max_context[f.start_position - f.doc_offset]}
  wrong = {e.qas_id for e in examples if predictions[e.qas_id] != e.orig_answer_text.strip()}
  assert wrong == {e.qas_id for e in examples} - held
  assert len(wrong) <= 10  # 7 in the trial set
  assert all(len(e.orig_answer_text) > 150 for e in examples if e.qas_id in wrong)


def test_traditional_chinese_answers_map_back_through_post_processing(wordpiece):
  """A DRCD-like paragraph: traditional characters, full-width punctuation, English,
  digits and a decimal, with answers starting and ending at each kind."""
  context = ("臺北101（Taipei 101）是位於臺灣臺北市信義區的摩天大樓，樓高508公尺，"
             "地上101層。2004年12月31日正式啟用，曾是世界第一高樓。設計者為李祖原，"
             "耗資約新臺幣580億元；阻尼器重達660公噸、直徑5.5公尺。")
  answers = ["臺北101", "Taipei 101", "臺灣臺北市信義區", "508公尺", "2004年12月31日",
             "李祖原", "新臺幣580億元", "5.5公尺", "101"]
  examples = [squad.SquadExample(f"DRCD_{k}", "問題？", context, answer, context.index(answer))
              for k, answer in enumerate(answers)]
  features = squad.convert_examples_to_features(examples, wordpiece, 64, 16, 8, True)
  predictions = _gold_predictions(examples, features, 64)
  assert [predictions[e.qas_id] for e in examples] == answers


# --- windows ----------------------------------------------------------------------------------
def test_doc_spans_and_max_context_follow_the_original():
  # The original's example: "bought" (position 7) has more context in span C than in B.
  spans = [(0, 5), (3, 5), (6, 5)]
  assert squad.doc_spans(13, 5, 3) == [(0, 5), (3, 5), (6, 5), (9, 4)]
  assert squad.is_max_context(spans, 2, 7) and not squad.is_max_context(spans, 1, 7)
  assert squad.doc_spans(4, 5, 3) == [(0, 4)]


def test_every_context_piece_is_scored_in_exactly_one_window(tokenizer, xquad):
  examples = [squad.SquadExample("q", "What is it?", xquad[0]["paragraphs"][0]["context"])]
  features = squad.convert_examples_to_features(examples, tokenizer, 48, 8, 16, False)
  assert len(features) > 10  # a context many windows long
  doc_length = len(encode_with_offsets(tokenizer, examples[0].paragraph_text)[0])
  owners = np.zeros(doc_length, int)
  starts = [0]
  for f in features:
    window_start = starts[-1] if f.doc_span_index == 0 else starts[-1] + 8
    starts.append(window_start)
    for i, is_max in enumerate(f.token_is_max_context):
      owners[window_start + i] += is_max
  assert (owners == 1).all()


def test_features_pack_question_and_window_as_the_original(tokenizer):
  example = squad.SquadExample("q1", "word " * 40, "A short context about Paris.", "Paris", 22)
  feature, = squad.convert_examples_to_features([example], tokenizer, 64, 16, 10, True)
  q = feature.doc_offset - 2
  assert q == 10  # the question is cut to max_query_length pieces
  ids = feature.input_ids
  assert ids[0] == tokenizer.cls_id and ids[q + 1] == tokenizer.sep_id
  n = len(feature.tok_start_to_orig_index)
  assert ids[q + 2 + n] == tokenizer.sep_id and ids[q + 3 + n:] == [0] * (64 - q - 3 - n)
  assert feature.segment_ids == [0] * (q + 2) + [1] * (n + 1) + [0] * (64 - q - 3 - n)
  assert feature.p_mask == [0] + [1] * (q + 1) + [0] * n + [1] * (64 - q - 2 - n)
  start = feature.start_position - feature.doc_offset
  end = feature.end_position - feature.doc_offset
  assert example.paragraph_text[feature.tok_start_to_orig_index[start]:
                                 feature.tok_end_to_orig_index[end] + 1].strip() == "Paris"


def test_training_windows_without_the_answer_point_at_cls(tokenizer, xquad):
  paragraph = xquad[0]["paragraphs"][0]
  qa = paragraph["qas"][0]
  example = squad.SquadExample(qa["id"], qa["question"], paragraph["context"],
                               qa["answers"][0]["text"], qa["answers"][0]["answer_start"])
  features = squad.convert_examples_to_features([example], tokenizer, 48, 8, 16, True)
  with_answer = [f for f in features if not f.is_impossible]
  without = [f for f in features if f.is_impossible]
  assert with_answer and without
  assert all(f.start_position == f.end_position == 0 for f in without)


# --- gold spans through post-processing ---------------------------------------------------------
def _inside_a_piece(tokenizer, context, start, end):
  """Whether an answer boundary falls inside a piece (no piece span can reproduce it)."""
  _, starts, ends = encode_with_offsets(tokenizer, context)
  first_chars = {s + len(context[s:e + 1]) - len(context[s:e + 1].lstrip())
                 for s, e in zip(starts, ends)}
  return start not in first_chars or end not in set(ends)


def test_gold_spans_through_post_processing_give_exact_match_100(tokenizer, xquad):
  examples = squad.read_squad_examples(str(XQUAD), is_training=True)
  assert len(examples) == 1190
  features = squad.convert_examples_to_features(examples, tokenizer, 128, 32, 32, True)
  results = {}
  for f in features:  # logits that pick the gold span in every window that holds it
    start, end = np.full(128, -10.0), np.full(128, -10.0)
    start[f.start_position], end[f.end_position] = 10.0, 10.0
    results[f.unique_id] = (start, end)
  predictions, nbest = squad_predictions.postprocess_v1(examples, features, results, 20, 64)
  wrong = {e.qas_id for e in examples if predictions[e.qas_id] != e.orig_answer_text}
  # Only answers cut inside a piece (one xquad answer ends inside "2,700,000") can differ.
  cut = {e.qas_id for e in examples if _inside_a_piece(
      tokenizer, e.paragraph_text, e.start_position,
      e.start_position + len(e.orig_answer_text) - 1)}
  assert wrong == cut and len(cut) <= 1
  kept = [{"paragraphs": [{"context": p["context"], "qas": [qa for qa in p["qas"]
                                                            if qa["id"] not in cut]}
                          for p in a["paragraphs"]]} for a in xquad]
  metrics = squad_metrics.evaluate(kept, {k: v for k, v in predictions.items() if k not in cut})
  assert metrics == {"exact_match": 100.0, "f1": 100.0}
  entry = nbest[examples[0].qas_id][0]
  context = examples[0].paragraph_text
  assert context[entry["char_start"]:entry["char_end"]] == entry["text"]


def _v2_fixture(xquad, tmp_path):
  """Two xquad articles where every third question is made unanswerable."""
  data = json.loads(json.dumps(xquad[:2]))
  n = 0
  for article in data:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        if n % 3 == 0:
          qa["is_impossible"], qa["answers"] = True, []
        n += 1
  path = tmp_path / "v2.json"
  path.write_text(json.dumps({"version": "v2.0", "data": data}))
  return path, data


def test_gold_spans_and_null_scores_give_v2_exact_match_100(tokenizer, xquad, tmp_path):
  path, data = _v2_fixture(xquad, tmp_path)
  train = squad.read_squad_examples(str(path), is_training=True, version_2=True)
  features = squad.convert_examples_to_features(train, tokenizer, 96, 32, 24, True)
  results = {}
  for f in features:  # the beam puts the gold span first; cls_logits says "no answer"
    start_top = np.array([f.start_position, 1, 2], np.int64)
    end_top = np.array([f.end_position, 3, 4] * 3, np.int64)
    results[f.unique_id] = {
        "start_top_log_probs": np.array([-0.1, -3.0, -4.0]), "start_top_index": start_top,
        "end_top_log_probs": np.array([-0.1, -3.0, -4.0] * 3), "end_top_index": end_top,
        "cls_logits": 5.0 if train[f.example_index].is_impossible else -5.0}
  predictions, _, null_odds = squad_predictions.postprocess_v2(train, features, results, 20, 64,
                                                               null_score_diff_threshold=0.0)
  assert all((predictions[e.qas_id] == "") == e.is_impossible for e in train)
  metrics = squad_metrics.evaluate(data, predictions, null_odds)
  assert metrics["exact"] == 100.0 and metrics["NoAns_exact"] == 100.0
  assert metrics["best_f1"] == 100.0
  assert sorted(null_odds) == sorted(e.qas_id for e in train)


# --- records ----------------------------------------------------------------------------------
def test_features_round_trip_through_tfrecords(tokenizer, xquad, tmp_path):
  examples = squad.read_squad_examples(str(XQUAD), is_training=False)[:6]
  features = squad.convert_examples_to_features(examples, tokenizer, 64, 16, 16, False)
  path = str(tmp_path / "f.tf_record")
  assert squad.write_squad_tfrecord(features, path) == len(features)
  assert squad.read_squad_features(path) == features
  batch = next(iter(squad.squad_dataset(path, 64, 4, is_training=False)))
  assert batch["input_word_ids"].shape == (4, 64)
  assert batch["unique_ids"].numpy().tolist() == [f.unique_id for f in features[:4]]
  assert batch["p_mask"].numpy().tolist() == [f.p_mask for f in features[:4]]


# --- bad input --------------------------------------------------------------------------------
def _write(tmp_path, paragraphs):
  path = tmp_path / "bad.json"
  path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}))
  return str(path)


def test_answers_that_miss_the_context_are_reported_and_skipped(tmp_path, caplog):
  path = _write(tmp_path, [{"context": "Paris is in France.", "qas": [
      {"id": "good", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]},
      {"id": "bad1", "question": "Where?", "answers": [{"text": "France", "answer_start": 3}]},
  ]}, {"context": "   ", "qas": [
      {"id": "empty", "question": "What?", "answers": [{"text": "x", "answer_start": 0}]}]}])
  with caplog.at_level(logging.WARNING):
    examples = squad.read_squad_examples(path, is_training=True)
  assert [e.qas_id for e in examples] == ["good"]
  assert "skipped 1 questions whose answer_start" in caplog.text and "bad1" in caplog.text
  assert "empty context" in caplog.text and "empty" in caplog.text
  # Prediction keeps every question; an empty context gets the empty answer.
  examples = squad.read_squad_examples(path, is_training=False)
  assert [e.qas_id for e in examples] == ["good", "bad1", "empty"]


def test_unanswerable_questions_need_version_2(tmp_path):
  path = _write(tmp_path, [{"context": "c", "qas": [
      {"id": "x", "question": "q", "answers": [], "is_impossible": True}]}])
  with pytest.raises(ValueError, match="version_2_with_negative"):
    squad.read_squad_examples(path, is_training=True)
  assert squad.read_squad_examples(path, True, version_2=True)[0].start_position == -1


def test_broken_files_and_flags_fail_with_clear_errors(tmp_path, tokenizer):
  broken = tmp_path / "broken.json"
  broken.write_text("{not json")
  with pytest.raises(ValueError, match="broken.json is not valid JSON"):
    squad.read_squad_examples(str(broken), False)
  with pytest.raises(FileNotFoundError, match="missing.json"):
    squad.read_squad_examples(str(tmp_path / "missing.json"), False)
  example = squad.SquadExample("q", "question", "context")
  with pytest.raises(ValueError, match="max_seq_length=20 leaves no room"):
    squad.convert_examples_to_features([example], tokenizer, 20, 8, 17, False)


@pytest.mark.parametrize("is_training", [True, False])
def test_an_answer_start_that_is_not_an_integer_is_a_clear_error(tmp_path, is_training):
  path = _write(tmp_path, [{"context": "Paris is in France.", "qas": [
      {"id": "good", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]},
      {"id": "q-str", "question": "Where?", "answers": [{"text": "France",
                                                         "answer_start": "12"}]}]}])
  with pytest.raises(ValueError, match=r"bad.json: .*question q-str: answers\[0\]"
                                       r"\.answer_start is '12', not an integer"):
    squad.read_squad_examples(path, is_training)


def test_questions_without_answers_are_left_out_of_scoring():
  qas = [{"id": "answered", "question": "Where?",
          "answers": [{"text": "France", "answer_start": 12}]},
         {"id": "no_key", "question": "Where?"},
         {"id": "empty", "question": "Where?", "answers": []},
         {"id": "impossible", "question": "Who?", "is_impossible": True}]
  dataset = lambda questions: [{"paragraphs": [{"context": "Paris is in France.",
                                                "qas": questions}]}]
  # v1.1: the official evaluator fails on a question without answers; it is left out.
  scored, skipped = squad_metrics.scored_questions(dataset(qas[:3]))
  assert skipped == ["no_key", "empty"]
  predictions = {"answered": "France", "no_key": "x", "empty": "x"}
  assert squad_metrics.evaluate(scored, predictions) == {"exact_match": 100.0, "f1": 100.0}
  # v2.0: unanswerable questions are scored (the empty answer is right); answerable ones
  # without answers are left out.
  scored, skipped = squad_metrics.scored_questions(dataset(qas), version_2=True)
  assert skipped == ["no_key", "empty"]
  predictions["impossible"] = ""
  metrics = squad_metrics.evaluate(scored, predictions, {k: 0.0 for k in predictions})
  assert metrics["exact"] == 100.0 and metrics["HasAns_total"] == metrics["NoAns_total"] == 1


def _squad(*qas, context="The Eiffel Tower is in Paris, France."):
  return [{"paragraphs": [{"context": context, "qas": list(qas)}]}]


def test_v1_1_leaves_unanswerable_questions_out_and_articles_need_no_paragraphs():
  impossible = {"id": "impossible", "question": "Who?", "is_impossible": True}
  assert squad_metrics.scored_questions(_squad(impossible)) == ([], ["impossible"])
  assert squad_metrics.scored_questions([{"title": "empty"}], version_2=True) == ([], [])


def test_v1_1_scores_are_the_official_normalised_em_and_token_f1_as_percentages():
  dataset = _squad({"id": "tower", "answers": [{"text": "Eiffel Tower", "answer_start": 4}]},
                   {"id": "city", "answers": [{"text": "in Paris, France", "answer_start": 19}]})
  # The official normalisation drops case, punctuation and articles: "the Eiffel tower!" is
  # exact. "Paris" against "in Paris, France": precision 1, recall 1/3, F1 1/2, EM 0.
  predictions = {"tower": "the Eiffel tower!", "city": "Paris"}
  assert squad_metrics.evaluate(dataset, predictions) == {"exact_match": 50.0, "f1": 75.0}


def test_v2_best_threshold_answers_each_question_whose_null_odds_are_at_most_it():
  dataset = _squad({"id": "answered", "answers": [{"text": "France", "answer_start": 30}]},
                   {"id": "impossible", "answers": []})
  predictions = {"answered": "France", "impossible": "Paris"}
  # Null odds above 1.0 predict no answer: "answered" is then wrong, "impossible" right.
  # The official search walks the questions by rising odds from "all null" (1 right):
  # answering "answered" (odds 1.5) makes 2 right, answering "impossible" too makes 1.
  # An id that is not a scored question is no candidate threshold.
  null_odds = {"answered": 1.5, "impossible": 2.0, "not_scored": 1.7}
  result = squad_metrics.evaluate(dataset, predictions, null_odds)
  assert (result["exact"], result["f1"]) == (50.0, 50.0)
  assert (result["best_exact"], result["best_exact_thresh"]) == (100.0, 1.5)
  assert (result["best_f1"], result["best_f1_thresh"]) == (100.0, 1.5)
  assert not [key for key in result if key.startswith("final_")]
  assert all(type(value) is float for value in result.values())
