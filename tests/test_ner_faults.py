"""run_ner on the files and flags users get wrong: a BMES character-per-line file (SIGHAN 2006 /
MSRA style) end to end, lines without their NER column, bytes that are not UTF-8, a stray tag
that misleads the scheme detection, rows without text, tag names that are not BIO, --labels and
--word_split that contradict the data, and predicting or exporting without a trained model.
Each one is either handled or refused with the file / line / flag and the cause."""

import dataclasses
import json

import pytest
import tensorflow as tf

from albert_tf.cli.runs import run_ner
from albert_tf.config import MODEL_FLAGS_NAME, AlbertConfig
from albert_tf.data import ner as ner_data
from albert_tf.export.ner_serving import export_ner
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.ner import NerOptions, NerTask
from albert_tf.tokenization import FullTokenizer
from conftest import ROOT, SHARED_DATA

CLUENER = SHARED_DATA / "ner" / "cluener"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"
# CLUENER types as SIGHAN 2006's: person, location, organization.
SIGHAN_TYPES = {"name": "NR", "address": "NS", "organization": "NT", "company": "NT"}


def _bmes_lines(row):
  """One CLUENER row as SIGHAN-style `character<TAB>tag` lines, tagged here by BMES's own
  rule (S- alone; B-, M-..., E-), independently of albert_tf's scheme code."""
  text = row["text"]
  tags = ["O"] * len(text)
  for kind, entities in row["label"].items():
    if kind not in SIGHAN_TYPES:
      continue
    for spans in entities.values():
      for start, end in spans:
        if any(t != "O" for t in tags[start:end + 1]):
          continue  # CLUENER's one nested span: BMES cannot nest either
        kind_tag = SIGHAN_TYPES[kind]
        if start == end:
          tags[start] = "S-" + kind_tag
        else:
          tags[start:end + 1] = (["B-" + kind_tag] + ["M-" + kind_tag] * (end - start - 1)
                                 + ["E-" + kind_tag])
  return [f"{c}\t{t}\n" for c, t in zip(text, tags) if not c.isspace()]


def _write_bmes(path, rows):
  path.write_text("".join("".join(_bmes_lines(r)) + "\n" for r in rows), encoding="utf-8")


def _zh_config(tmp_path):
  config = json.loads((ROOT / "configs" / "tiny.json").read_text())
  config["vocab_size"] = FullTokenizer(vocab_file=str(ZH_VOCAB)).vocab_size
  path = tmp_path / "config.json"
  path.write_text(json.dumps(config))
  return str(path)


@pytest.fixture(scope="module")
def bmes(tmp_path_factory):
  """A softmax run on 160 BMES training sentences, scored on 40 dev and predicting 30 tagged
  test sentences, exported: the run that stopped at its dev evaluation before."""
  tmp = tmp_path_factory.mktemp("bmes")
  rows = [json.loads(line) for line in
          (CLUENER / "train.json").read_text(encoding="utf-8").splitlines()[:230]]
  data = tmp / "data"
  data.mkdir()
  _write_bmes(data / "train.txt", rows[:160])
  _write_bmes(data / "dev.txt", rows[160:200])
  _write_bmes(data / "test.txt", rows[200:230])
  options = NerOptions(
      albert_config_file=_zh_config(tmp), vocab_file=str(ZH_VOCAB), data_format="conll",
      data_dir=str(data), output_dir=str(tmp / "out"), export_dir=str(tmp / "export"),
      do_train=True, do_eval=True, do_predict=True, max_seq_length=48, doc_stride=16,
      train_batch_size=16, learning_rate=1e-3, train_step=30, warmup_step=3,
      save_checkpoints_steps=30, iterations_per_loop=10, eval_batch_size=64,
      predict_batch_size=64)
  return dict(results=run_ner(options), options=options, tmp=tmp, data=data)


def test_a_bmes_file_trains_evaluates_predicts_and_exports(bmes):
  results, out = bmes["results"], bmes["tmp"] / "out"
  assert results["global_step"] == 30
  assert {"f1", "token_accuracy", "NR_f1", "NS_support"} <= set(results)
  # Predictions come back in the file's own scheme: M- inside, no I-.
  given = (bmes["data"] / "test.txt").read_text(encoding="utf-8").splitlines()
  written = (out / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
  assert len(written) == len(given)
  predicted = [line.split("\t")[-1] for line in written if line]
  assert predicted and not any(tag.startswith("I-") for tag in predicted)
  assert (out / "test_results.txt").exists()
  assert json.loads((out / MODEL_FLAGS_NAME).read_text())["word_split"] == "characters"
  served = tf.saved_model.load(str(bmes["tmp"] / "export")).signatures["serving_default"](
      text=tf.constant(["北京大学在海淀区", ""]))
  assert served["num_entities"].shape == (2,)


def test_predicting_or_exporting_without_a_trained_model_is_refused(bmes, tmp_path):
  options = dataclasses.replace(bmes["options"], do_train=False, do_eval=False,
                                output_dir=str(tmp_path / "empty"), export_dir=None)
  with pytest.raises(ValueError, match=r"--do_predict without --do_train need a trained "
                     r"model: .*empty holds no checkpoint.*--allow_untrained"):
    run_ner(options)
  assert not (tmp_path / "empty" / "test_predictions.txt").exists()
  with pytest.raises(ValueError, match="--export_dir without --do_train"):
    run_ner(dataclasses.replace(options, do_predict=False, export_dir=str(tmp_path / "e"),
                                labels=("NR", "NS", "NT")))
  assert not (tmp_path / "e").exists()
  # Said explicitly, it predicts (random tags, one per word).
  run_ner(dataclasses.replace(options, allow_untrained=True))
  written = (tmp_path / "empty" / "test_predictions.txt").read_text(encoding="utf-8")
  assert len(written.splitlines()) == len(
      (bmes["data"] / "test.txt").read_text(encoding="utf-8").splitlines())


def test_a_word_split_that_contradicts_the_model_or_data_is_refused(bmes):
  trained = dataclasses.replace(bmes["options"], do_train=False, do_eval=False,
                                do_predict=False, word_split="whitespace")
  with pytest.raises(ValueError, match=r"--word_split=whitespace contradicts the model "
                     r"trained in .*characters"):
    NerTask(trained).word_split()
  fresh = dataclasses.replace(trained, output_dir=str(bmes["tmp"] / "fresh"), do_train=True)
  with pytest.raises(ValueError, match=r"--word_split=whitespace contradicts .*train\.txt: "
                     "its words are all single characters"):
    NerTask(fresh).word_split()


def test_labels_that_miss_a_type_of_the_training_file_name_its_line(bmes, tmp_path):
  options = dataclasses.replace(bmes["options"], output_dir=str(tmp_path), labels=("NR", "NS"))
  with pytest.raises(ner_data.DataError, match=r"train\.txt, line \d+: tag '[BMES]-NT' is not "
                     r"among the labels .* \(from --labels\)"):
    NerTask(options)


def test_tag_names_that_are_not_bio_are_refused_unless_labels_name_them(bmes, tmp_path):
  """A model converted from a Hugging Face folder without id2label has LABEL_0 ..: its
  entities cannot be read from them, so export and predict refuse them; --labels naming
  each output in order (not sorted into O first) is taken."""
  out = tmp_path / "converted"
  out.mkdir()
  (out / MODEL_FLAGS_NAME).write_text(json.dumps(
      {"task_name": "ner", "labels": [f"LABEL_{i}" for i in range(5)], "use_crf": False}))
  options = dataclasses.replace(bmes["options"], output_dir=str(out), do_train=False,
                                do_eval=False, do_predict=False)
  with pytest.raises(ValueError, match=r"model_flags\.json: the labels \[LABEL_0, .*\] are not "
                     "a tagger's BIO tags.*--labels"):
    NerTask(options)
  named = ("B-NR", "I-NR", "O", "B-NS", "I-NS")
  task = NerTask(dataclasses.replace(options, labels=named))
  assert task.labels == list(named)
  assert task.model_flags()["labels"] == [f"LABEL_{i}" for i in range(5)]  # the same model
  with pytest.raises(ValueError, match=r"--labels=O,B-NR,I-NR contradict the 7 labels"):
    NerTask(dataclasses.replace(options, output_dir=bmes["options"].output_dir,
                                labels=("NR",)))
  # The export refuses them too, whoever calls it.
  model = AlbertTokenClassifier(AlbertConfig.from_json_file(bmes["options"].albert_config_file),
                                [f"LABEL_{i}" for i in range(5)])
  with pytest.raises(ValueError, match="not a tagger's BIO tags"):
    export_ner(model, str(tmp_path / "export"), vocab_file=str(ZH_VOCAB))
  assert not (tmp_path / "export").exists()


# ---------------------------------------------------------------------------------------------
# The readers (no model).


def _raises_at(path, line, match, fn, *args):
  with pytest.raises(ner_data.DataError) as caught:
    fn(*args)
  assert f"{path}, line {line}: " in str(caught.value), str(caught.value)
  assert match in str(caught.value), str(caught.value)


def test_a_conll_line_without_its_ner_column_is_refused(tmp_path):
  """CoNLL-2003's `word POS chunk NER`: a line that lost its NER column would train its chunk
  tag (I-NP) as an entity type."""
  path = tmp_path / "train.txt"
  path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nGerman JJ B-NP B-MISC\n"
                  "call NN I-NP\n", encoding="utf-8")
  _raises_at(path, 5, "3 columns, where 3 of the file's 4 token lines have 4",
             ner_data.read_conll, path)


def test_bytes_that_are_not_utf8_name_the_file_line_and_byte(tmp_path):
  path = tmp_path / "train.txt"
  path.write_bytes("张\tB-NR\n三\tE-NR\n".encode("utf-8") + "在\tO\n".encode("gbk"))
  _raises_at(path, 3, "byte 0xd4 at column 1 is not UTF-8", ner_data.read_conll, path)


def test_a_stray_tag_is_named_when_it_made_auto_pick_the_scheme(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("John B-PER\nSmith I-PER\n\nin O\nParis S-LOC\n", encoding="utf-8")
  _raises_at(path, 5, "tag 'S-LOC' made --tag_scheme=auto read this file as bioes, under "
             "which line 2: entity PER", ner_data.read_conll, path)


def test_rows_without_text_keep_their_line_in_the_submission(tmp_path):
  rows = [{"id": 0, "text": "北京"}, {"id": 1, "text": ""}, {"id": 2, "text": "上海"}]
  path = tmp_path / "test.json"
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
  examples = ner_data.read_cluener(path)
  assert [e.guid for e in examples] == [0, 1, 2]
  target = tmp_path / "cluener_predict.json"
  ner_data.write_cluener_predictions(target, examples, [["B-LOC", "I-LOC"], [], ["O", "O"]])
  assert [json.loads(line) for line in target.read_text("utf-8").splitlines()] == [
      {"id": 0, "label": {"LOC": {"北京": [[0, 1]]}}}, {"id": 1, "label": {}},
      {"id": 2, "label": {}}]
  jsonl = tmp_path / "test.jsonl"
  jsonl.write_text('{"tokens": ["a"]}\n{"tokens": []}\n{"tokens": ["b"]}\n', "utf-8")
  assert [e.words for e in ner_data.read_jsonl(jsonl)] == [["a"], [], ["b"]]


def test_label_sets_keep_a_whole_bio_set_in_its_order_and_refuse_other_names():
  assert ner_data.label_list([], given=["B-PER", "I-PER", "O"]) == ["B-PER", "I-PER", "O"]
  assert ner_data.label_list([], given="O,S-PER") == ["O", "B-PER", "I-PER"]
  for names in (["LABEL_0", "LABEL_1", "LABEL_2"], ["O", "B-PER"], ["O", "O", "B-X", "I-X"]):
    with pytest.raises(ValueError, match="not a tagger's BIO tags"):
      ner_data.check_tag_set(names, "config.json")
