"""NER readers, tag schemes and writers (albert_tf/data/ner.py), on real files and small cases."""

import collections
import json
import logging

import pytest

from albert_tf.data import ner
from conftest import SHARED_DATA

NER_DATA = SHARED_DATA / "ner"
CONLL = NER_DATA / "conll2003"
CLUENER = NER_DATA / "cluener"


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return path


def _raises_at(path, line, fn, *args, match=None):
  """Calls fn(*args), expecting a DataError that names `path` and `line`."""
  with pytest.raises(ner.DataError) as caught:
    fn(*args)
  assert f"{path}, line {line}:" in str(caught.value)
  if match:
    assert match in str(caught.value)


# ---------------------------------------------------------------------------------------------
# Real files: the counts of shared/data/ner/PROVENANCE.md.


@pytest.fixture(scope="module")
def conll():
  return {split: ner.read_conll(CONLL / f"{split}.txt") for split in ("train", "valid", "test")}


@pytest.fixture(scope="module")
def cluener():
  return {split: ner.read_cluener(CLUENER / f"{split}.json") for split in ("train", "dev", "test")}


def test_conll2003_sentences_tokens_and_entities_match_provenance(conll):
  expected = {"train": (14041, 203621, (7140, 3438, 6321, 6600)),
              "valid": (3250, 51362, (1837, 922, 1341, 1842)),
              "test": (3453, 46435, (1668, 702, 1661, 1617))}
  for split, (sentences, tokens, entities) in expected.items():
    examples = conll[split]
    starts = collections.Counter(t for e in examples for t in e.tags if t.startswith("B-"))
    assert len(examples) == sentences
    assert sum(len(e.words) for e in examples) == tokens
    assert [starts[f"B-{k}"] for k in ("LOC", "MISC", "ORG", "PER")] == list(entities)
    assert {e.scheme for e in examples} == {"bio"}
  assert conll["valid"][0].words[:3] == ["CRICKET", "-", "LEICESTERSHIRE"]
  assert conll["valid"][0].source == (str(CONLL / "valid.txt"), 3)


def test_conll2003_labels_are_o_then_b_i_per_type_and_cover_dev_and_test(conll):
  labels = ner.label_list(conll["train"])
  assert labels == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER",
                    "I-PER"]
  ner.check_labels(conll["valid"], labels)
  ner.check_labels(conll["test"], labels)


README_DEV = {"address": 364, "book": 152, "company": 366, "game": 287, "government": 244,
              "movie": 150, "name": 451, "organization": 344, "position": 425, "scene": 199}
README_TRAIN = {"address": 2829, "book": 1131, "company": 2897, "game": 2325,
                "government": 1797, "movie": 1109, "name": 3661, "organization": 3075,
                "position": 3052, "scene": 1462}


def _distinct_entities(examples):
  """CLUENER's README counts each type's distinct entity strings per line."""
  counts = collections.Counter()
  for e in examples:
    found = {(k, e.text[s:x]) for k, s, x in ner.char_spans(e, ner.tags_to_spans(e.tags))}
    counts.update(k for k, _ in found)
  return dict(counts)


def test_cluener_lines_and_entities_per_type_match_the_readme(cluener):
  assert [len(cluener[s]) for s in ("train", "dev", "test")] == [10748, 1343, 1345]
  assert _distinct_entities(cluener["dev"]) == README_DEV
  # Train line 1507 nests two companies in a book title; BIO keeps the outer span only.
  assert _distinct_entities(cluener["train"]) == {**README_TRAIN, "company": 2897 - 2}
  assert sum(len(ner.tags_to_spans(e.tags)) for e in cluener["dev"]) == 3072


def test_cluener_test_file_is_unlabeled_and_keeps_its_ids(cluener):
  test = cluener["test"]
  assert all(e.tags is None for e in test)
  assert [e.guid for e in test[:3]] == [0, 1, 2]
  assert test[2].words == list("销售冠军：辐射3-Bethesda")
  assert test[2].offsets == list(range(len(test[2].text)))


def _gold_spans(path):
  """Per line: the set of (type, start, end) closed spans, straight from the JSON."""
  with open(path, encoding="utf-8") as f:
    return [{(k, s, e) for k, ents in json.loads(line)["label"].items()
             for spans in ents.values() for s, e in spans} for line in f]


@pytest.mark.parametrize("split", ["dev", "train"])
def test_every_gold_cluener_span_round_trips_through_bio_tags(cluener, split):
  nested = {(1506, ("company", 16, 19)), (1506, ("company", 23, 26))}  # train line 1507
  for i, (example, gold) in enumerate(zip(cluener[split], _gold_spans(CLUENER / f"{split}.json"))):
    back = {(k, s, e - 1) for k, s, e in ner.char_spans(example, ner.tags_to_spans(example.tags))}
    assert back == {g for g in gold if (i, g) not in nested}, example.source
    label = ner.spans_to_cluener_label(example.text, [(k, s, e + 1) for k, s, e in back])
    for kind, entities in label.items():
      for entity, spans in entities.items():
        assert all(example.text[s:e + 1] == entity for s, e in spans)


def test_cluener_nested_span_is_dropped_with_a_warning_naming_the_line(tmp_path, caplog):
  row = {"text": "《招商银行年报》", "label": {"book": {"《招商银行年报》": [[0, 7]]},
                                            "company": {"招商银行": [[1, 4]]}}}
  path = _write(tmp_path, "train.json", json.dumps(row, ensure_ascii=False) + "\n")
  with caplog.at_level(logging.WARNING, logger="albert_tf.data.ner"):
    [example] = ner.read_cluener(path)
  assert ner.tags_to_spans(example.tags) == [("book", 0, 8)]
  assert f"{path}, line 1" in caplog.text


# ---------------------------------------------------------------------------------------------
# Tag schemes.


def test_iob1_is_read_as_conlleval_reads_it():
  convert = lambda tags: ner.convert_tags(tags.split(), "iob1", "bio")
  assert convert("I-PER I-PER B-PER") == ["B-PER", "I-PER", "B-PER"]  # two entities
  assert convert("I-LOC I-PER") == ["B-LOC", "B-PER"]  # two entities
  assert convert("O I-ORG I-ORG O B-ORG") == ["O", "B-ORG", "I-ORG", "O", "B-ORG"]


def test_bio_is_written_back_as_iob1_with_b_only_between_adjacent_same_type_entities():
  bio = "B-PER I-PER B-PER O B-LOC B-PER".split()
  assert ner.convert_tags(bio, "bio", "iob1") == "I-PER I-PER B-PER O I-LOC I-PER".split()


@pytest.mark.parametrize("scheme, tags", [
    ("bioes", "S-PER O B-LOC I-LOC E-LOC B-ORG E-ORG S-ORG"),
    ("bmes", "S-NR O B-NS M-NS E-NS B-NT E-NT S-NT"),
    ("bio", "B-PER O B-LOC I-LOC I-LOC B-ORG I-ORG B-ORG"),
    ("iob1", "I-PER O I-LOC I-LOC I-LOC I-ORG I-ORG B-ORG"),
])
def test_each_scheme_round_trips_through_bio(scheme, tags):
  tags = tags.split()
  bio = ner.convert_tags(tags, scheme, "bio")
  assert ner.convert_tags(bio, "bio", scheme) == tags
  assert [(s, e) for _, s, e in ner.tags_to_spans(bio)] == [(0, 1), (2, 5), (5, 7), (7, 8)]


@pytest.mark.parametrize("tags, scheme", [
    (["O", "B-PER", "I-PER"], "bio"),
    (["O", "O"], "bio"),
    (["O", "I-PER", "I-PER"], "iob1"),
    (["B-PER", "I-LOC"], "iob1"),
    (["B-PER", "E-PER", "O"], "bioes"),
    (["S-PER", "O", "I-PER"], "bioes"),
    (["B-NR", "M-NR", "E-NR", "S-NS"], "bmes"),
])
def test_auto_detects_the_scheme(tags, scheme):
  assert ner.detect_scheme([["O"], tags]) == scheme


def test_spans_and_tags_convert_both_ways():
  tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]
  spans = [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5)]
  assert ner.tags_to_spans(tags) == spans
  assert ner.spans_to_tags(spans, 5) == tags
  assert ner.tags_to_spans(["O", "I-PER", "B-PER"]) == [("PER", 1, 2), ("PER", 2, 3)]
  with pytest.raises(ValueError, match="overlaps"):
    ner.spans_to_tags([("PER", 0, 2), ("LOC", 1, 3)], 4)


def test_spans_to_cluener_label_writes_closed_intervals_grouped_by_entity():
  text = "北京去北京大学北京"
  spans = [("address", 7, 9), ("organization", 3, 7), ("address", 0, 2)]
  assert ner.spans_to_cluener_label(text, spans) == {"address": {"北京": [[0, 1], [7, 8]]},
                                                     "organization": {"北京大学": [[3, 6]]}}


def test_cluener_writer_turns_gold_dev_tags_back_into_the_dev_labels(cluener, tmp_path):
  output = tmp_path / "cluener_predict.json"
  dev = cluener["dev"]
  ner.write_cluener_predictions(output, dev, [e.tags for e in dev])
  sort = lambda label: {k: {x: sorted(s) for x, s in v.items()} for k, v in label.items()}
  with open(CLUENER / "dev.json", encoding="utf-8") as gold, open(output, encoding="utf-8") as f:
    for i, (line, written) in enumerate(zip(gold, f)):
      assert json.loads(written) == {"id": i, "label": sort(json.loads(line)["label"])}


# ---------------------------------------------------------------------------------------------
# Character-per-line Chinese files, JSON lines, files and labels.


def test_chinese_char_per_line_files_read_bmes_with_tabs_and_bio_with_spaces(tmp_path):
  bmes = _write(tmp_path, "resume.txt",
                "张\tB-NAME\n小\tM-NAME\n三\tE-NAME\n在\tO\n\n京\tS-LOC\n")
  bio = _write(tmp_path, "msra.txt", "张 B-PER\n小 I-PER\n三 I-PER\n在 O\n\n京 B-LOC\n")
  for path, scheme in ((bmes, "bmes"), (bio, "bio")):
    first, second = ner.read_conll(path)
    assert first.words == ["张", "小", "三", "在"] and second.words == ["京"]
    assert first.scheme == scheme
    assert [(s, e) for _, s, e in ner.tags_to_spans(first.tags)] == [(0, 3)]
    assert second.tags == ["B-LOC"]
    assert second.source == (str(path), 6)


def test_conll_file_without_tag_column_reads_as_unlabeled(tmp_path):
  path = _write(tmp_path, "test.txt", "-DOCSTART-\n\n上\n海\n\n\n好\n")
  examples = ner.read_conll(path)
  assert [e.words for e in examples] == [["上", "海"], ["好"]]
  assert all(e.tags is None for e in examples)


def test_jsonl_reads_tokens_and_tags_in_the_files_scheme(tmp_path):
  rows = [{"tokens": ["John", "lives", "in", "New", "York"],
           "tags": ["S-PER", "O", "O", "B-LOC", "E-LOC"]}, {"tokens": [], "tags": []}]
  path = _write(tmp_path, "train.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
  example, empty = ner.read_examples("jsonl", path, "auto")
  assert empty.words == empty.tags == []  # kept: its predictions line is written too
  assert example.tags == ["B-PER", "O", "O", "B-LOC", "I-LOC"]
  assert example.scheme == "bioes"


def test_default_files_use_each_formats_names_and_name_the_missing_split(tmp_path):
  assert ner.default_file("conll", CONLL, "dev") == str(CONLL / "valid.txt")
  assert ner.default_file("cluener", CLUENER, "test") == str(CLUENER / "test.json")
  _write(tmp_path, "dev.txt", "a O\n")
  assert ner.default_file("conll", tmp_path, "dev") == str(tmp_path / "dev.txt")
  with pytest.raises(FileNotFoundError, match=r"--do_predict.*test\.jsonl"):
    ner.default_file("jsonl", tmp_path, "test")


def test_given_labels_keep_their_order_and_accept_any_scheme():
  assert ner.label_list([], given="O,S-PER,B-PER,E-LOC") == ["O", "B-PER", "I-PER", "B-LOC",
                                                             "I-LOC"]
  assert ner.label_list([], given=["name", "book"]) == ["O", "B-name", "I-name", "B-book",
                                                        "I-book"]


# ---------------------------------------------------------------------------------------------
# Errors name the file and the line.


def test_unknown_dev_tag_is_an_error_naming_file_line_and_tag(tmp_path):
  train = ner.read_conll(_write(tmp_path, "train.txt", "a B-PER\nb O\n"))
  dev_path = _write(tmp_path, "valid.txt", "a O\n\nb O\nc B-LOC\n")
  _raises_at(dev_path, 4, ner.check_labels, ner.read_conll(dev_path), ner.label_list(train),
             match="'B-LOC'")


def test_overlapping_cluener_spans_are_an_error_naming_file_and_line(tmp_path):
  rows = [{"text": "北京", "label": {}},
          {"text": "北京大学", "label": {"address": {"北京大": [[0, 2]]},
                                     "organization": {"京大学": [[1, 3]]}}}]
  path = _write(tmp_path, "dev.json", "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                             for r in rows))
  _raises_at(path, 2, ner.read_cluener, path, match="overlaps")


@pytest.mark.parametrize("reader, name, text, line, match", [
    (ner.read_cluener, "dev.json", '{"text": "北京", "label": {"address": {"上海": [[0, 1]]}}}',
     1, "[0, 1] of address '上海' is '北京'"),
    (ner.read_cluener, "dev.json", '{"text": "北京", "label": {"address": {"京": [[1, 2]]}}}',
     1, "outside"),
    (ner.read_cluener, "dev.json", '{"text": "好"}\n\n{"text": ', 3, "not valid JSON"),
    (ner.read_cluener, "dev.json", '{"text": ["好"]}', 1, '"text" must be a string'),
    (ner.read_jsonl, "dev.jsonl", '{"tokens": ["a"], "tags": ["O"]}\n{"tokens": "a b"}', 2,
     "'tokens'"),
    (ner.read_jsonl, "dev.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}', 1,
     "2 tokens but 1 tags"),
    (ner.read_conll, "train.txt", "张 B-PER\n三 I-PER\n\n在", 4, "no tag column"),
])
def test_bad_content_is_an_error_naming_file_and_line(tmp_path, reader, name, text, line, match):
  path = _write(tmp_path, name, text + "\n")
  _raises_at(path, line, reader, path, match=match)


@pytest.mark.parametrize("scheme, text, line, match", [
    ("bioes", "a O\n\nb E-PER\n", 3, "continues no entity"),
    ("bioes", "a B-PER\nb O\n", 2, "not closed with E-"),
    ("bmes", "a B-NR\nb I-NR\nc E-NR\n", 2, "is not O or B-/M-/E-/S-TYPE"),
    ("bio", "a O\nb I-PER\n", 2, "continues no entity"),
])
def test_invalid_sequence_under_an_explicit_scheme_names_file_and_line(
    tmp_path, scheme, text, line, match):
  path = _write(tmp_path, "train.txt", text)
  _raises_at(path, line, ner.read_conll, path, scheme, match=match)


# ---------------------------------------------------------------------------------------------
# The CoNLL prediction writer.


def test_conll_writer_reproduces_valid_txt_plus_a_predicted_column(conll, tmp_path):
  output = tmp_path / "predictions.txt"
  ner.write_conll_predictions(output, CONLL / "valid.txt", [e.tags for e in conll["valid"]])
  original = (CONLL / "valid.txt").read_bytes().split(b"\n")
  written = output.read_bytes().split(b"\n")
  assert len(written) == len(original)
  for before, after in zip(original, written):
    if before and not before.startswith(b"-DOCSTART-"):
      assert after == before + b" " + before.rsplit(b" ", 1)[1]
    else:
      assert after == before
  assert not list(tmp_path.glob("*.tmp-*"))


@pytest.mark.parametrize("scheme, text", [
    ("bmes", "张\tB-NR\n三\tE-NR\n\n京\tS-NS\n"),
    ("iob1", "-DOCSTART- -X- O\n\nJohn NNP I-PER\nMary NNP B-PER\nin IN O\n"),
    ("bioes", "a B-X\r\nb E-X\r\nc O\r\n"),
])
def test_conll_writer_writes_the_inputs_own_scheme(tmp_path, scheme, text):
  source = _write(tmp_path, "valid.txt", text)
  examples = ner.read_conll(source)
  output = tmp_path / "out.txt"
  ner.write_conll_predictions(output, source, [e.tags for e in examples])
  for line in output.read_bytes().decode("utf-8").splitlines():
    columns = line.split()
    assert not columns or columns[0] == "-DOCSTART-" or columns[-1] == columns[-2]
  assert output.read_bytes().count(b"\r\n") == text.count("\r\n")


def test_conll_writer_refuses_predictions_that_do_not_fit(tmp_path):
  source = _write(tmp_path, "test.txt", "a\nb\n\nc\n")
  with pytest.raises(ValueError, match="line 1: 1 predicted tags for 2 tokens"):
    ner.write_conll_predictions(tmp_path / "out.txt", source, [["O"], ["O"]])
  ner.write_conll_predictions(tmp_path / "out.txt", source, [["I-X", "I-X"], ["O"]])
  assert (tmp_path / "out.txt").read_text() == "a B-X\nb I-X\n\nc O\n"
