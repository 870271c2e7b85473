"""run_ner end to end on slices of the real CoNLL-2003 and CLUENER files (tiny models), and the
word / window alignment the job trains and predicts on."""

import dataclasses
import functools
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli.runs import run_ner
from albert_tf.data import ner as ner_data
from albert_tf.data import ner_features
from albert_tf.export.tasks import export_task
from albert_tf.metrics.ner import ner_results
from albert_tf.metrics.results import read_results
from albert_tf.tasks.ner import NerOptions, NerTask
from albert_tf.tokenization import FullTokenizer
from albert_tf.training.run import Run
import serving_requests
from conftest import ROOT, SHARED_DATA, float32_atol

SPM = str(SHARED_DATA / "sentencepiece" / "spiece.model")
CONLL = SHARED_DATA / "ner" / "conll2003"
CLUENER = SHARED_DATA / "ner" / "cluener"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"
TINY = dict(max_seq_length=32, doc_stride=12, train_batch_size=16, learning_rate=1e-3,
            train_step=40, warmup_step=4, save_checkpoints_steps=20, iterations_per_loop=10,
            eval_batch_size=64, predict_batch_size=64)


def _sentences(path, first, count):
  """`count` blank-line-separated blocks of a CoNLL file from block `first` on, as text."""
  blocks = path.read_text(encoding="utf-8").split("\n\n")
  return "\n\n".join(blocks[first:first + count]) + "\n\n"


@pytest.fixture(scope="module")
def conll(tmp_path_factory):
  """A softmax run on the first 200 training sentences, scored on 60 dev and predicting 40
  test sentences of CoNLL-2003 (train.txt / valid.txt / test.txt in a data dir). 100 steps: at
  40 the tiny model still predicts all-O for some seeds and machines (0-30 test entities over
  seeds 1-3); at 100 it finds 57-67 for seeds 1-6, with oneDNN on or off."""
  data = tmp_path_factory.mktemp("conll")
  (data / "train.txt").write_text(_sentences(CONLL / "train.txt", 0, 200), encoding="utf-8")
  (data / "valid.txt").write_text(_sentences(CONLL / "valid.txt", 0, 60), encoding="utf-8")
  (data / "test.txt").write_text(_sentences(CONLL / "test.txt", 0, 40), encoding="utf-8")
  out = tmp_path_factory.mktemp("conll_out")
  options = NerOptions(albert_config_file=str(ROOT / "configs" / "tiny.json"),
                       spm_model_file=SPM, data_format="conll", data_dir=str(data),
                       output_dir=str(out), do_train=True, do_eval=True, do_predict=True,
                       **dict(TINY, train_step=100, warmup_step=10, save_checkpoints_steps=50))
  return dict(results=run_ner(options), data=data, out=out, options=options)


def _read_results(path):
  return {k: float(v) for k, v in (line.split(" = ") for line in path.read_text().splitlines())}


def test_conll_run_writes_entity_f1_and_predictions_conlleval_reads(conll):
  out, data = conll["out"], conll["data"]
  results = _read_results(out / "eval_results.txt")
  assert results["global_step"] == 100
  for key in ("precision", "recall", "f1", "token_accuracy", "PER_f1", "LOC_support"):
    assert key in results, key
  assert (out / "best" / "best_results.txt").exists()
  # The predictions file is the test file with one more column, blank lines kept; scoring its
  # last two columns gives test_results.txt.
  given = (data / "test.txt").read_text(encoding="utf-8").splitlines()
  written = (out / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
  assert len(written) == len(given)
  gold, predicted, g, p = [], [], [], []
  for before, after in zip(given, written):
    if not before.strip() or before.startswith("-DOCSTART-"):
      assert after == before
      if g:
        gold.append(g), predicted.append(p)
        g, p = [], []
      continue
    assert after.rsplit(" ", 1)[0] == before
    g.append(before.split()[-1]), p.append(after.split()[-1])
  if g:
    gold.append(g), predicted.append(p)
  assert len(gold) == 37  # 40 blocks, 3 of them -DOCSTART-
  want = ner_results(gold, predicted)
  got = _read_results(out / "test_results.txt")
  for key in ("precision", "recall", "f1", "token_accuracy"):
    assert got[key] == pytest.approx(want[key]), key


@functools.lru_cache(maxsize=None)
def _loaded(export_dir):
  return tf.saved_model.load(export_dir)


def _served(export_dir, texts):
  """The export's entities of each text: [(type, start, end, text, score)] per text."""
  out = _loaded(str(export_dir)).signatures["serving_default"](text=tf.constant(texts, tf.string))
  out = {k: v.numpy() for k, v in out.items()}
  assert out["start"].shape == out["entity_text"].shape == (len(texts), out["start"].shape[1])
  rows = []
  for i, n in enumerate(out["num_entities"]):
    assert (out["start"][i, n:] == -1).all() and (out["entity_text"][i, n:] == b"").all()
    rows.append([(out["entity_type"][i, j].decode(), int(out["start"][i, j]),
                  int(out["end"][i, j]), out["entity_text"][i, j].decode("utf-8"),
                  float(out["score"][i, j])) for j in range(n)])
  return rows


def test_the_export_tags_raw_text_as_do_predict_tagged_the_words(conll, tmp_path):
  """--export_dir alone on the trained output_dir (no data: the labels and the word split come
  from model_flags.json): the test sentences as text, the words joined by spaces, give the
  entities of test_predictions.txt at their exact character offsets."""
  o = conll["options"]
  export = tmp_path / "export"
  run_ner(NerOptions(albert_config_file=o.albert_config_file, spm_model_file=SPM,
                     output_dir=o.output_dir, export_dir=str(export),
                     max_seq_length=o.max_seq_length, doc_stride=o.doc_stride))
  sentences = ner_data.read_conll(conll["data"] / "test.txt")
  lines = iter(line.split()[-1] for line in
               (conll["out"] / "test_predictions.txt").read_text("utf-8").splitlines()
               if line.strip() and not line.startswith("-DOCSTART-"))
  texts = [" ".join(e.words) for e in sentences]
  served = _served(export, texts + ["", " \t "])
  assert served[-2:] == [[], []] and _served(export, []) == []
  # saved_model_cli's and TF Serving's path (a Session over the MetaGraph) answers the same.
  session = serving_requests.session_run(str(export), "serving_default",
                                         {"text": np.array(texts[:3], object)})
  assert [len(r) for r in served[:3]] == session["num_entities"].tolist()
  assert session["entity_text"].tolist() == [
      [e[3].encode() for e in r] + [b""] * (session["entity_text"].shape[1] - len(r))
      for r in served[:3]]
  # A text with a NUL byte, which the whitespace split cannot read past, is refused by name both
  # ways (export/requests.py), not tagged up to the NUL.
  serving_requests.assert_rejected(
      str(export), _loaded(str(export)), "serving_default",
      {"text": ["EU rejects German call", "EU\x00 rejects German call"]},
      "text row 1 holds a NUL byte")
  # A request is computed at its longest window, not at max_seq_length: short sentences
  # alone (narrow calls) tag as in the batch, which has windows of the full width.
  short = sorted(range(len(texts)), key=lambda i: len(texts[i]))[len(texts) // 2:][:12]
  pairs = list(zip(short, _served(export, [texts[i] for i in short])))
  for i, alone in pairs + [(short[0], _served(export, [texts[short[0]]])[0])]:
    assert [g[:4] for g in alone] == [g[:4] for g in served[i]], texts[i]
    # A score is a mean over the entity's words of a softmax over CoNLL's 9 tags of emissions
    # at the end of tiny.json's chain (the E-term projection, 2 layers' I and H, the tagger's
    # H): float32 rounding of that many additions, the batch's other widths apart.
    words = max([len(g[3].split()) for g in alone], default=0)
    want = [g[4] for g in served[i]]
    np.testing.assert_allclose([g[4] for g in alone], want, rtol=0,
                               atol=float32_atol(want, 16 + 2 * (64 + 32) + 32 + 9 + words))
  entities = 0
  for sentence, text, got in zip(sentences, texts, served):
    starts = np.cumsum([0] + [len(w) + 1 for w in sentence.words])
    predicted = ner_data.decode_tags([next(lines) for _ in sentence.words], sentence.scheme)
    want = [(kind, starts[s], starts[e - 1] + len(sentence.words[e - 1]))
            for kind, s, e in predicted]
    assert [g[:3] for g in got] == want, text
    for kind, start, end, entity, score in got:
      assert entity == text[start:end] and 0.0 < score <= 1.0
    entities += len(want)
  assert entities >= 10, entities  # the trained model does find entities
  tokenizer = FullTokenizer(spm_model_file=SPM)
  assert max(sum(map(len, ner_features.word_pieces(tokenizer, e.words))) for e in sentences) > \
      2 * o.max_seq_length  # and words came from different windows


def test_convert_reads_a_run_ner_checkpoint_as_a_tagger_with_its_labels(conll):
  """A trained run_ner output_dir converts as a token classifier (not a sentence classifier
  under the same names) and carries its tags; the encoder alone still converts."""
  from albert_tf.interop import convert  # pylint: disable=g-import-not-at-top
  o = conll["options"]
  config = str(conll["out"] / "albert_config.json")
  converted = convert.read("native", o.output_dir, config)
  labels = json.loads((conll["out"] / "model_flags.json").read_text())["labels"]
  assert converted.head == "token_classification" and converted.labels == labels
  assert convert.read("native", o.output_dir, config, head="encoder").head == "encoder"


def test_a_rerun_predicts_with_the_saved_labels_and_the_same_tags(conll, tmp_path):
  """--do_predict alone on the trained output_dir: the labels come from its model_flags.json
  and the predictions are the training run's."""
  o = conll["options"]
  out = conll["out"]
  before = (out / "test_predictions.txt").read_text(encoding="utf-8")
  (out / "test_predictions.txt").unlink()
  run_ner(NerOptions(**{**o.__dict__, "do_train": False, "do_eval": False}))
  assert (out / "test_predictions.txt").read_text(encoding="utf-8") == before
  # The same sentences as users' own JSON lines (tokens + BIOES tags): the same predictions,
  # written back in the file's scheme.
  sentences = ner_data.read_conll(conll["data"] / "test.txt")
  jsonl = tmp_path / "test.jsonl"
  jsonl.write_text("".join(json.dumps({"id": f"s{i}", "tokens": e.words, "tags": ner_data.
                                       encode_spans(ner_data.tags_to_spans(e.tags),
                                                    len(e.tags), "bioes")}) + "\n"
                           for i, e in enumerate(sentences)), encoding="utf-8")
  run_ner(NerOptions(**{**o.__dict__, "do_train": False, "do_eval": False,
                        "data_format": "jsonl", "test_file": str(jsonl)}))
  rows = [json.loads(line) for line in
          (out / "test_predictions.jsonl").read_text("utf-8").splitlines()]
  flat = iter(line.split()[-1] for line in before.splitlines()
              if line.strip() and not line.startswith("-DOCSTART-"))
  conll_tags = [[next(flat) for _ in e.words] for e in sentences]
  assert [r["id"] for r in rows] == [f"s{i}" for i in range(len(sentences))]
  for row, tags in zip(rows, conll_tags):
    assert ner_data.decode_tags(row["tags"], "bioes") == ner_data.tags_to_spans(tags)


def test_cluener_with_a_crf_from_albert_tiny_zh_writes_clues_submission(brightmart_tiny_zh,
                                                                      tmp_path):
  """Chinese per character from brightmart's albert_tiny_zh release, CRF head: the submission
  has one line per test id, every span inside its text, and no decoded I-X that continues
  nothing (the CRF's constraint)."""
  data = tmp_path / "cluener"
  data.mkdir()
  for split, count in (("train", 96), ("dev", 32), ("test", 24)):
    lines = (CLUENER / f"{split}.json").read_text(encoding="utf-8").splitlines()[:count]
    (data / f"{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
  d = brightmart_tiny_zh
  out = tmp_path / "out"
  options = NerOptions(
      albert_config_file=str(d / "albert_config_tiny.json"),
      init_checkpoint=str(d / "albert_model.ckpt"), vocab_file=str(d / "vocab.txt"),
      data_format="cluener", data_dir=str(data), output_dir=str(out), use_crf=True,
      do_train=True, do_eval=True, do_predict=True, **dict(TINY, max_seq_length=48))
  results = run_ner(options)
  assert results["global_step"] == 40
  tests = [json.loads(line) for line in (data / "test.json").read_text("utf-8").splitlines()]
  rows = [json.loads(line) for line in
          (out / "cluener_predict.json").read_text("utf-8").splitlines()]
  assert [r["id"] for r in rows] == [t["id"] for t in tests]
  for row, test in zip(rows, tests):
    for kind, entities in row["label"].items():
      for entity, spans in entities.items():
        for start, end in spans:
          assert test["text"][start:end + 1] == entity, (kind, entity)
  assert not (out / "test_results.txt").exists()  # CLUENER's test file has no labels
  # Resumed from the checkpoint (the CRF's transitions with it), then the kept best checkpoint's
  # weights, which the submission was made from: the same submission.
  submission = (out / "cluener_predict.json").read_bytes()
  runner = Run(NerTask(dataclasses.replace(options, do_train=False, do_eval=False)))
  runner.loop.restore_or_initialize()
  saved = tf.train.load_checkpoint(str(out))
  np.testing.assert_array_equal(
      saved.get_tensor("crf/transitions/.ATTRIBUTES/VARIABLE_VALUE"),
      runner.loop.model.crf.transitions.numpy())
  runner.use_best_weights()
  runner.predict()
  assert (out / "cluener_predict.json").read_bytes() == submission
  _, predicted = runner.task.predicted_tags(runner.loop.model, "test", 64)
  for tags in predicted:
    for before, tag in zip(["O"] + tags, tags):
      assert not tag.startswith("I-") or before[2:] == tag[2:], (before, tag)
  # The kept best checkpoint's dev scores are those of the entities it writes for the dev
  # sentences (given as a test file, with ids), counted against their labels, exactly: the
  # same counts in the same formulas, conlleval's micro f1 over (sentence, type, start, end)
  # and the share of characters whose BIO tag is right (40 steps find few entities, so f1
  # may well be 0; token accuracy is not).
  dev = [json.loads(line) for line in (data / "dev.json").read_text("utf-8").splitlines()]
  as_test = tmp_path / "dev_as_test.json"
  as_test.write_text("".join(json.dumps(dict(row, id=f"d{i}"), ensure_ascii=False) + "\n"
                             for i, row in enumerate(dev)), encoding="utf-8")
  run_ner(dataclasses.replace(options, do_train=False, do_eval=False, do_predict=True,
                              test_file=str(as_test)))
  written = [json.loads(line) for line in
             (out / "cluener_predict.json").read_text("utf-8").splitlines()]
  assert [row["id"] for row in written] == [f"d{i}" for i in range(len(dev))]
  gold, found = ([_cluener_spans(row["label"]) for row in rows] for rows in (dev, written))
  correct = sum(len(g & f) for g, f in zip(gold, found))
  precision = correct / sum(map(len, found)) if any(found) else 0.0
  recall = correct / sum(map(len, gold))
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  tags = [(_bio(len(row["text"]), g), _bio(len(row["text"]), f))
          for row, g, f in zip(dev, gold, found)]
  token_accuracy = (sum(a == b for g, f in tags for a, b in zip(g, f))
                    / sum(len(g) for g, _ in tags))
  best = read_results(str(out / "best" / "best_results.txt"))
  assert (f1, token_accuracy) == (best["f1"], best["token_accuracy"])
  assert results["f1"] <= best["f1"]  # the last evaluation's: the best's or below


def _cluener_spans(label):
  """{(type, start, end)} of a CLUENER `label` (closed character intervals)."""
  return {(kind, start, end) for kind, entities in label.items()
          for spans in entities.values() for start, end in spans}


def _bio(length, spans):
  """The BIO tags of `length` characters with the entities `spans`."""
  tags = ["O"] * length
  for kind, start, end in spans:
    tags[start:end + 1] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start)
  return tags


def test_the_chinese_export_gives_the_cluener_submissions_entities(tmp_path):
  """One word per character, WordPiece, windows of 16 pieces and CRF decoding in the graph:
  the export finds the entities --do_predict wrote to cluener_predict.json, at its offsets
  (CLUE's intervals are closed). A random model with a sharpened head, so there are many."""
  data = tmp_path / "cluener"
  data.mkdir()
  lines = (CLUENER / "test.json").read_text(encoding="utf-8").splitlines()[:24]
  (data / "test.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
  config = json.loads((ROOT / "configs" / "tiny.json").read_text())
  config["vocab_size"] = FullTokenizer(vocab_file=str(ZH_VOCAB)).vocab_size
  (tmp_path / "config.json").write_text(json.dumps(config))
  options = NerOptions(albert_config_file=str(tmp_path / "config.json"),
                       vocab_file=str(ZH_VOCAB), data_format="cluener", data_dir=str(data),
                       output_dir=str(tmp_path / "out"), export_dir=str(tmp_path / "export"),
                       labels=("name", "address", "company"), use_crf=True, do_predict=True,
                       max_seq_length=16, doc_stride=6, predict_batch_size=64)
  tf.random.set_seed(3)
  runner = Run(NerTask(options))
  runner.loop.restore_or_initialize()
  head = runner.loop.model.token_head
  head.output_weights.assign(head.output_weights * 50.0)
  runner.predict()
  export_task(runner.task, runner.loop.model)
  rows = [json.loads(line) for line in
          (tmp_path / "out" / "cluener_predict.json").read_text("utf-8").splitlines()]
  texts = [json.loads(line)["text"] for line in lines]
  served = _served(tmp_path / "export", texts)
  assert sum(map(len, served)) >= 50
  for row, text, got in zip(rows, texts, served):
    want = sorted((kind, start, end + 1, entity) for kind, entities in row["label"].items()
                  for entity, spans in entities.items() for start, end in spans)
    assert sorted(g[:4] for g in got) == want, text
    assert all(text[start:end] == entity for _, start, end, entity, _ in got)


def test_every_cluener_dev_word_has_one_first_piece_in_some_window():
  """Alignment on the real dev file with albert_zh's vocabulary, in windows of 16 pieces: each
  character is tagged at one piece that is its own first piece, each window holds whole
  words, and the windows together cover every word; the gold entities' tags travel with
  their words."""
  tokenizer = FullTokenizer(vocab_file=str(ZH_VOCAB))
  examples = ner_data.read_cluener(CLUENER / "dev.json")[:300]
  labels = ner_data.label_list(examples)
  windows, arrays = ner_features.convert_examples(examples, tokenizer, labels, 16, 6)
  covered = [np.zeros(len(e.words), bool) for e in examples]
  for i, window in enumerate(windows):
    example = examples[window.example_index]
    pieces = ner_features.word_pieces(tokenizer, example.words[window.start:window.end])
    n = window.end - window.start
    positions = arrays["word_positions"][i][:n]
    assert arrays["label_mask"][i].sum() == n
    for k, (position, word_pieces) in enumerate(zip(positions, pieces)):
      assert arrays["input_word_ids"][i][position] == word_pieces[0]
      assert labels[arrays["label_ids"][i][k]] == example.tags[window.start + k]
    covered[window.example_index][window.start:window.end] = True
  assert all(c.all() for c in covered)
  assert len(windows) > len(examples)  # the long sentences were windowed


def test_long_sentences_take_each_words_tag_from_its_window_with_most_context():
  # 10 one-piece words, windows of 4 words every 2: [0,4) [2,6) [4,8) [6,10).
  bounds = ner_features.window_bounds([1] * 10, room=4, doc_stride=2)
  assert bounds == [(0, 4), (2, 6), (4, 8), (6, 10)]
  windows = [ner_features.Window(0, s, e, {}) for s, e in bounds]
  # Window k predicts tag k for all its words: each word keeps the window where it sits most
  # centrally (ties: the earlier window, as for SQuAD's answer starts).
  merged = ner_features.merge_windows(windows, [[k] * 4 for k in range(4)], [10])
  assert merged[0].tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
  # A sentence without words (an empty CLUENER text) has no window and merges to no tags.
  assert ner_features.window_bounds([], room=4, doc_stride=2) == []
  assert ner_features.merge_windows([], [], [0])[0].tolist() == []
  # A word longer than a window gets a window of its own, cut to the room.
  assert ner_features.window_bounds([2, 9, 1], room=4, doc_stride=1) == [(0, 1), (1, 2),
                                                                         (2, 3)]
