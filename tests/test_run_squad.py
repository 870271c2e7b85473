"""run_squad end to end on real SQuAD v1.1 questions (xquad) and a v2.0 fixture, tiny model:
train a few steps, predict, score with the official metrics, export, serve."""

import json
import logging
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import ROOT, SHARED_DATA
from albert_tf.cli.runs import run_squad
from albert_tf.data import squad as squad_data
from albert_tf.metrics import cmrc2018
from albert_tf.metrics import squad as squad_metrics
from albert_tf.tasks.squad import SquadOptions

XQUAD = SHARED_DATA / "squad" / "v1.1_xquad_en" / "xquad.en.json"
SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
SMALL = dict(albert_config_file=str(ROOT / "configs" / "tiny.json"), spm_model_file=str(SPM),
             max_seq_length=64, doc_stride=32, max_query_length=16, train_batch_size=16,
             predict_batch_size=32, seed=1, log_every_seconds=0)
# Enough steps for the tiny model to learn the 30 training questions' answers by heart: over
# seeds, v1 learns 43-57% of them exactly in 400 epochs (150 epochs gave 13-47%); v2 keeps 150
# (25-40% of its answerable ones), where null odds also still follow answerability.
TRAIN = dict(num_train_epochs=400, learning_rate=2e-3, warmup_proportion=0.05, optimizer="lamb",
             iterations_per_loop=50, save_checkpoints_steps=1000)
TRAIN_STEPS = 750  # int(30 questions / 16 * 400 epochs)
V2_EPOCHS = 150


def _questions(data):
  return [(qa["id"], qa["question"], p["context"])
          for a in data for p in a["paragraphs"] for qa in p["qas"]]


def _dataset(tmp, version_2):
  """Predict on 97 xquad questions (long contexts, many windows); train on 30 of them."""
  data = squad_data.load_squad_json(str(XQUAD))[:2]
  if version_2:
    for n, qa in enumerate(qa for a in data for p in a["paragraphs"] for qa in p["qas"]):
      if n % 3 == 0:
        qa["is_impossible"], qa["answers"] = True, []
  train = [{"title": "train", "paragraphs": data[0]["paragraphs"][:2]}]
  version = "2.0" if version_2 else "1.1"
  predict_path, train_path = tmp / "predict.json", tmp / "train.json"
  predict_path.write_text(json.dumps({"version": version, "data": data}))
  train_path.write_text(json.dumps({"version": version, "data": train}))
  return str(train_path), str(predict_path), data, train


def _run(tmp_path_factory, version_2):
  tmp = tmp_path_factory.mktemp("squad_v2" if version_2 else "squad_v1")
  train_path, predict_path, data, train = _dataset(tmp, version_2)
  epochs = V2_EPOCHS if version_2 else TRAIN["num_train_epochs"]
  options = SquadOptions(train_file=train_path, predict_file=predict_path,
                         output_dir=str(tmp / "out"), do_train=True, do_predict=True,
                         export_dir=str(tmp / "export"), version_2_with_negative=version_2,
                         **SMALL, **{**TRAIN, "num_train_epochs": epochs})
  metrics = run_squad(options)
  return dict(options=options, metrics=metrics, data=data, train=train, out=tmp / "out",
              export=str(tmp / "export"))


@pytest.fixture(scope="module")
def v1(tmp_path_factory):
  return _run(tmp_path_factory, False)


@pytest.fixture(scope="module")
def v2(tmp_path_factory):
  return _run(tmp_path_factory, True)


def _read_results(path):
  return {k: float(v) for k, v in (line.split(" = ") for line in path.read_text().splitlines())}


def _serve(export_dir, data):
  ids, questions, contexts = zip(*_questions(data))
  model = tf.saved_model.load(export_dir)
  out = model.signatures["serving_default"](question=tf.constant(questions),
                                            context=tf.constant(contexts))
  answers = [a.decode("utf-8") for a in out["answer"].numpy()]
  return ids, contexts, answers, out


def test_v1_writes_predictions_and_the_official_metrics(v1):
  predictions = json.loads((v1["out"] / "predictions.json").read_text())
  nbest = json.loads((v1["out"] / "nbest_predictions.json").read_text())
  ids = [q for q, _, _ in _questions(v1["data"])]
  assert list(predictions) == ids and list(nbest) == ids
  for qid in ids:
    assert 1 <= len(nbest[qid]) <= 20 and nbest[qid][0]["text"] == predictions[qid]
    assert abs(sum(e["probability"] for e in nbest[qid]) - 1) < 1e-6
  results = _read_results(v1["out"] / "eval_results.txt")
  official = squad_metrics.evaluate(v1["data"], predictions)
  assert results["exact_match"] == pytest.approx(official["exact_match"])
  assert results["f1"] == pytest.approx(official["f1"])
  assert results["global_step"] == TRAIN_STEPS
  assert not (v1["out"] / "null_odds.json").exists()
  # The answers of the training questions were learnt (untrained: EM 0).
  learnt = squad_metrics.evaluate(v1["train"], predictions)["exact_match"]
  assert learnt >= 20, learnt


def test_v1_serving_answers_as_run_squad_predicts(v1):
  predictions = json.loads((v1["out"] / "predictions.json").read_text())
  ids, contexts, answers, out = _serve(v1["export"], v1["data"])
  assert answers == [predictions[q] for q in ids]
  for context, answer, start, end in zip(contexts, answers, out["start"].numpy(),
                                         out["end"].numpy()):
    assert context[start:end] == answer


def test_v2_writes_null_odds_and_uses_the_best_threshold(v2):
  out = v2["out"]
  predictions = json.loads((out / "predictions.json").read_text())
  null_odds = json.loads((out / "null_odds.json").read_text())
  results = _read_results(out / "eval_results.txt")
  threshold = results["null_score_diff_threshold"]
  assert list(null_odds) == list(predictions)
  for qid, answer in predictions.items():
    assert (answer == "") == (null_odds[qid] >= threshold)
  official = squad_metrics.evaluate(v2["data"], predictions, null_odds)
  for key in ("exact", "f1", "HasAns_f1", "NoAns_exact", "best_f1"):
    assert results[key] == pytest.approx(official[key])
  # Learnt on the training questions (untrained: EM 0, null odds unrelated to answerability):
  # the best non-empty answers of answerable ones, and higher null odds for the others.
  nbest = json.loads((out / "nbest_predictions.json").read_text())
  train = [qa for p in v2["train"][0]["paragraphs"] for qa in p["qas"]]
  answerable = [qa for qa in train if not qa.get("is_impossible")]
  best = {qa["id"]: nbest[qa["id"]][0]["text"] for qa in answerable}
  answerable_data = [{"paragraphs": [{"context": "", "qas": answerable}]}]
  learnt = squad_metrics.evaluate(answerable_data, best)["exact_match"]
  assert learnt >= 15, learnt
  mean = lambda qas: sum(null_odds[qa["id"]] for qa in qas) / len(qas)
  assert mean([qa for qa in train if qa.get("is_impossible")]) > mean(answerable)


def test_v2_serving_answers_as_run_squad_predicts(v2):
  predictions = json.loads((v2["out"] / "predictions.json").read_text())
  null_odds = json.loads((v2["out"] / "null_odds.json").read_text())
  threshold = _read_results(v2["out"] / "eval_results.txt")["null_score_diff_threshold"]
  ids, _, answers, out = _serve(v2["export"], v2["data"])
  # The best threshold is one question's own null odds, so that question (and any whose odds
  # lie within the null score's tolerance below) sits on the edge: the server's null score (one
  # batch of every window, not batches of 32) may round to either side. Every other answer must
  # be the same.
  edge = [abs(null_odds[q] - threshold) <= 1e-4 * abs(threshold) + 1e-5 for q in ids]
  assert sum(edge) < len(ids) / 4, sum(edge)
  assert ([a for a, e in zip(answers, edge) if not e]
          == [predictions[q] for q, e in zip(ids, edge) if not e])
  assert out["null_score"].numpy().tolist() == pytest.approx([null_odds[q] for q in ids],
                                                            rel=1e-4, abs=1e-5)
  # Blank contexts only, and no rows at all: empty answers (the v2 beam has no window).
  serving = tf.saved_model.load(v2["export"])
  blank = serving.signatures["serving_default"](question=tf.constant(["Who?"] * 2),
                                                context=tf.constant(["", " "]))
  assert blank["answer"].numpy().tolist() == [b"", b""]
  none = serving.signatures["serving_default"](question=tf.constant([], tf.string),
                                               context=tf.constant([], tf.string))
  assert none["answer"].shape == (0,) and none["null_score"].shape == (0,)


def test_a_second_run_resumes_and_reuses_the_cached_features(v1, caplog, tmp_path):
  options = v1["options"]
  with caplog.at_level(logging.INFO):
    run_squad(SquadOptions(**{**options.__dict__, "export_dir": None}))
  assert "Resumed from" in caplog.text and "Using the cached features" in caplog.text
  assert _read_results(v1["out"] / "eval_results.txt")["global_step"] == TRAIN_STEPS
  caplog.clear()
  changed = SquadOptions(**{**options.__dict__, "doc_stride": 20, "do_train": False,
                            "export_dir": None, "output_dir": str(tmp_path),
                            "init_checkpoint": str(v1["out"]),
                            "predict_feature_file": str(v1["out"] / "predict_features.tf_record")})
  with caplog.at_level(logging.INFO):
    run_squad(changed)
  assert "rebuilding it" in caplog.text


def test_script_predicts_from_a_checkpoint(v1, tmp_path):
  path = v1["options"].predict_file
  flags = [f"--{k}={v}" for k, v in SMALL.items() if k != "seed"]
  command = [sys.executable, str(ROOT / "run_squad.py"), f"--predict_file={path}",
             f"--init_checkpoint={v1['out']}", f"--output_dir={tmp_path / 'cli'}",
             "--do_predict"] + flags
  done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert done.returncode == 0, done.stderr[-2000:]
  assert (json.loads((tmp_path / "cli" / "predictions.json").read_text())
          == json.loads((v1["out"] / "predictions.json").read_text()))


def test_missing_files_are_named(tmp_path):
  with pytest.raises(ValueError, match="--do_predict needs --predict_file"):
    run_squad(SquadOptions(output_dir=str(tmp_path), do_predict=True, **SMALL))
  with pytest.raises(FileNotFoundError, match="nowhere.json"):
    run_squad(SquadOptions(output_dir=str(tmp_path), do_predict=True,
                           predict_file=str(tmp_path / "nowhere.json"), **SMALL))


def test_serving_piece_offsets_equal_run_squads(v1):
  """The in-graph alignment gives every xquad context piece the characters that
  tokenization.offsets gives it (spaces aside), so served answers are run_squad's."""
  from albert_tf.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  from albert_tf.tokenization.offsets import encode_with_offsets  # pylint: disable=g-import-not-at-top
  serving = tf.saved_model.load(v1["export"])
  contexts = sorted({c for _, _, c in _questions(squad_data.load_squad_json(str(XQUAD)))})
  contexts.append("Café  naïve ﬁsh, in 1990, ΟΔΟΣ e\u0301te (wójt) 6½ x")
  ids, first, last = serving.context_pieces(tf.constant(contexts))
  tokenizer = FullTokenizer(spm_model_file=SPM)
  for row, context in enumerate(contexts):
    raw = context.encode("utf-8")
    expected = encode_with_offsets(tokenizer, context)
    assert ids[row].numpy().tolist() == expected[0]
    got = [raw[b:e + 1].decode("utf-8").strip()
           for b, e in zip(first[row].numpy(), last[row].numpy())]
    assert got == [context[b:e + 1].strip() for b, e in zip(expected[1], expected[2])]


def _predict_only(tmp_path, qas_edits, version_2=False):
  """Predicts (random weights, no training) the first xquad paragraph's questions after
  `qas_edits(qas)` changed them; returns the metrics and the output folder."""
  data = squad_data.load_squad_json(str(XQUAD))[:1]
  data[0]["paragraphs"] = data[0]["paragraphs"][:1]
  qas_edits(data[0]["paragraphs"][0]["qas"])
  path = tmp_path / "predict.json"
  path.write_text(json.dumps({"version": "2.0" if version_2 else "1.1", "data": data}))
  options = SquadOptions(predict_file=str(path), output_dir=str(tmp_path / "out"),
                         do_predict=True, version_2_with_negative=version_2,
                         allow_untrained=True, **SMALL)
  return run_squad(options), tmp_path / "out", data


def test_v1_questions_without_answers_are_predicted_but_not_scored(tmp_path, caplog):
  def edit(qas):
    del qas[0]["answers"]
    qas[1]["answers"] = []
  with caplog.at_level(logging.WARNING):
    metrics, out, data = _predict_only(tmp_path, edit)
  qas = data[0]["paragraphs"][0]["qas"]
  predictions = json.loads((out / "predictions.json").read_text())
  assert list(predictions) == [qa["id"] for qa in qas]
  assert (out / "nbest_predictions.json").exists()
  assert f"2 of {len(qas)} questions have no answers" in caplog.text
  results = _read_results(out / "eval_results.txt")
  assert results["skipped_unanswered"] == metrics["skipped_unanswered"] == 2
  answered = [{"paragraphs": [{"context": "", "qas": qas[2:]}]}]
  assert results["exact_match"] == pytest.approx(
      squad_metrics.evaluate(answered, predictions)["exact_match"])


def test_a_predict_file_without_answers_is_predicted_and_not_scored(tmp_path, caplog):
  def edit(qas):
    for qa in qas:
      qa.pop("answers")
  with caplog.at_level(logging.INFO):
    metrics, out, data = _predict_only(tmp_path, edit)
  assert metrics is None and not (out / "eval_results.txt").exists()
  predictions = json.loads((out / "predictions.json").read_text())
  assert len(predictions) == len(data[0]["paragraphs"][0]["qas"])
  assert "has no answers to score" in caplog.text


def test_v2_answerable_questions_without_answers_are_not_scored(tmp_path):
  def edit(qas):
    qas[0]["is_impossible"] = True  # unanswerable, no 'answers' key: scored as usual
    del qas[0]["answers"]
    qas[1]["is_impossible"], qas[1]["answers"] = False, []  # answerable without answers
  metrics, out, data = _predict_only(tmp_path, edit, version_2=True)
  qas = data[0]["paragraphs"][0]["qas"]
  predictions = json.loads((out / "predictions.json").read_text())
  null_odds = json.loads((out / "null_odds.json").read_text())
  assert list(predictions) == list(null_odds) == [qa["id"] for qa in qas]
  results = _read_results(out / "eval_results.txt")
  assert results["skipped_unanswered"] == 1
  assert results["NoAns_total"] == 1 and results["HasAns_total"] == len(qas) - 2
  assert metrics["exact"] == pytest.approx(results["exact"])


# --- Chinese: WordPiece (albert_zh) and the CMRC 2018 metric -----------------------------------
CMRC_TRAIN = SHARED_DATA / "chinese" / "mrc" / "cmrc2018_train_sample.json"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"


def _zh_options(tmp_path, **changes):
  """tiny.json with albert_zh's 21128-entry vocabulary, WordPiece, run_squad's small windows."""
  config = json.loads((ROOT / "configs" / "tiny.json").read_text())
  config["vocab_size"] = 21128
  config_path = tmp_path / "albert_config.json"
  config_path.write_text(json.dumps(config))
  small = {**SMALL, "spm_model_file": None, "albert_config_file": str(config_path)}
  small.update(changes)
  return SquadOptions(**{"vocab_file": str(ZH_VOCAB), "output_dir": str(tmp_path / "out"),
                         **small})


@pytest.fixture(scope="module")
def zh(tmp_path_factory, brightmart_tiny_zh):
  """A few training steps on real CMRC 2018 questions and prediction on them, started as
  brightmart's users start: their albert_tiny_zh release's config, checkpoint and vocab."""
  tmp = tmp_path_factory.mktemp("squad_zh")
  d = brightmart_tiny_zh
  options = _zh_options(tmp, train_file=str(CMRC_TRAIN), predict_file=str(CMRC_TRAIN),
                        do_train=True, do_predict=True, num_train_epochs=2,
                        albert_config_file=str(d / "albert_config_tiny.json"),
                        init_checkpoint=str(d / "albert_model.ckpt"),
                        vocab_file=str(d / "vocab.txt"))
  return dict(metrics=run_squad(options), out=tmp / "out", options=options,
              data=squad_data.load_squad_json(str(CMRC_TRAIN)))


@pytest.fixture(scope="module")
def zh_serving(zh):
  """The serving module of `zh`'s trained weights, in process: what `--export_dir` saves
  (saving and loading it, as the English tests do, would double this test's time)."""
  # pylint: disable=g-import-not-at-top
  from albert_tf.interop.checkpoints import load_checkpoint
  from albert_tf.config import AlbertConfig
  from albert_tf.export.squad_serving import SquadServing
  from albert_tf.modeling.squad import AlbertSquad
  from albert_tf.tokenization import FullTokenizer
  from albert_tf.tokenization.in_graph import InGraphTokenizer
  # pylint: enable=g-import-not-at-top
  o = zh["options"]
  model = AlbertSquad(AlbertConfig.from_json_file(o.albert_config_file))
  load_checkpoint(model, o.output_dir)
  return SquadServing(model, InGraphTokenizer(vocab_file=ZH_VOCAB),
                      FullTokenizer(vocab_file=ZH_VOCAB), o.max_seq_length, o.doc_stride,
                      o.max_query_length, o.n_best_size, o.max_answer_length)


def test_cmrc_trains_and_predicts_with_wordpiece_and_scores_with_the_cmrc_metric(zh):
  """Predictions whose character spans are their text, scored (auto: WordPiece over Chinese
  contexts) by the CMRC 2018 metric."""
  out, data, metrics = zh["out"], zh["data"], zh["metrics"]
  predictions = json.loads((out / "predictions.json").read_text())
  nbest = json.loads((out / "nbest_predictions.json").read_text())
  contexts = {qid: c for qid, _, c in _questions(data)}
  assert list(predictions) == list(contexts) and len(predictions) == 25
  for qid, context in contexts.items():
    for entry in nbest[qid]:
      assert context[entry["char_start"]:entry["char_end"]] == entry["text"] != ""
  results = _read_results(out / "eval_results.txt")
  assert set(results) == {"EM", "F1", "AVERAGE", "TOTAL", "SKIP", "global_step"}
  expected = cmrc2018.evaluate(data, predictions)
  for key in ("EM", "F1", "AVERAGE"):
    assert results[key] == pytest.approx(expected[key]) == pytest.approx(metrics[key])
  assert results["TOTAL"] == 25 and results["global_step"] == 3  # int(25 / 16 * 2)


def test_cmrc_flags_that_cannot_work_fail_before_training(tmp_path):
  with pytest.raises(ValueError, match="--spm_model_file .* or --vocab_file"):
    run_squad(SquadOptions(output_dir=str(tmp_path), do_predict=True,
                           **{**SMALL, "spm_model_file": None}))
  with pytest.raises(ValueError, match="cmrc2018 .* --version_2_with_negative"):
    run_squad(_zh_options(tmp_path, do_predict=True, predict_file=str(CMRC_TRAIN),
                          eval_metric="cmrc2018", version_2_with_negative=True))


def test_cmrc_serving_answers_raw_chinese_as_run_squad_predicts(zh, zh_serving):
  predictions = json.loads((zh["out"] / "predictions.json").read_text())
  ids, questions, contexts = zip(*_questions(zh["data"]))
  out = zh_serving(tf.constant(questions), tf.constant(contexts))
  answers = [a.decode("utf-8") for a in out["answer"].numpy()]
  assert answers == [predictions[q] for q in ids]
  for context, answer, start, end in zip(contexts, answers, out["start"].numpy(),
                                         out["end"].numpy()):
    assert context[start:end] == answer


def test_cmrc_serving_piece_offsets_equal_run_squads(zh_serving):
  """Real CMRC trial contexts and a traditional / mixed-script string: the in-graph WordPiece
  alignment gives every piece the characters tokenization.offsets gives it."""
  # pylint: disable=g-import-not-at-top
  from albert_tf.tokenization import FullTokenizer
  from albert_tf.tokenization.offsets import encode_with_offsets
  # pylint: enable=g-import-not-at-top
  trial = SHARED_DATA / "chinese" / "mrc" / "cmrc2018_trial.json"
  contexts = sorted({c for _, _, c in _questions(squad_data.load_squad_json(str(trial)))})
  contexts.append("臺北101（Taipei 101）É\u0301cole ﬁsh a\u200bb ΟΔΟΣ 中\x00文 中\u0301 한국 ½")
  ids, first, last = (t.to_list() for t in zh_serving.context_pieces(tf.constant(contexts)))
  tokenizer = FullTokenizer(vocab_file=ZH_VOCAB)
  for row, context in enumerate(contexts):
    raw = context.encode("utf-8")
    expected = encode_with_offsets(tokenizer, context)
    assert ids[row] == expected[0]
    got = [raw[b:e + 1].decode("utf-8") for b, e in zip(first[row], last[row])]
    assert got == [context[b:e + 1] for b, e in zip(expected[1], expected[2])]
