"""Tests for albert_tf.data.classification and .reading: readers, features, TFRecords, submissions.

Tests whose names contain "real_data" read ../shared/data (GLUE SST-2, CoLA, STS-B, QNLI, the
CLUE AFQMC, TNEWS, OCNLI and ChnSentiCorp files and ALBERT's spiece.model); the others write
tiny files in the GLUE, CLUE, LCQMC layouts to a temporary folder.
"""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.classification.csv_task import CsvProcessor
from albert_tf.data.classification.features import (PaddingInputExample, classification_dataset,
                                                    convert_examples_to_features,
                                                    write_features_tfrecord)
from albert_tf.data.classification.processor import InputExample
from albert_tf.data.classification.registry import PROCESSORS, get_processor
from albert_tf.data.classification.submissions import write_clue_predictions, write_glue_predictions
from albert_tf.data.reading import DataError, read_json_lines, read_rows
from albert_tf.tokenization import FullTokenizer, encode_pair


def _at(path, pattern=""):
  """A regex for an error message: `path` verbatim, then `pattern`."""
  return re.escape(str(path)) + pattern


def _write(folder, name, lines, raw=None):
  path = folder / name
  if raw is not None:
    path.write_bytes(raw)
  else:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def glue(shared_data):
  return shared_data / "glue"


@pytest.fixture(scope="module")
def spm_tok(shared_data):
  return FullTokenizer(spm_model_file=shared_data / "sentencepiece" / "spiece.model")


# --- Real GLUE files --------------------------------------------------------------------------
def test_real_data_sst2_every_split_has_its_rows_labels_and_test_indexes(glue):
  processor = get_processor("sst-2")
  train = processor.get_train_examples(glue)          # the GLUE root, as the original
  dev = processor.get_dev_examples(glue / "SST-2")    # or the task folder itself
  test = processor.get_test_examples(glue)
  assert (len(train), len(dev), len(test)) == (67349, 872, 1821)
  assert {e.label for e in train} == {e.label for e in dev} == {"0", "1"}
  assert sum(e.label == "1" for e in train) == 37569
  assert train[0] == InputExample("train-1", "hide new secretions from the parental units ",
                                  None, "0")
  assert dev[0].text_a == "it 's a charming and often affecting journey . "
  assert dev[0].label == "1"
  # Test rows: the `index` column is the guid, the label the original's placeholder.
  assert test[0] == InputExample("0", "uneasy mishmash of styles and genres .", None, "0")
  assert [e.guid for e in test] == [str(i) for i in range(1821)]
  assert {e.label for e in test} == {"0"}
  assert "amélie" in dev[17].text_a  # utf-8 text intact


def test_real_data_cola_official_release_reads_train_and_both_dev_files(glue):
  processor = get_processor("cola")
  train = processor.get_train_examples(glue)
  dev = processor.get_dev_examples(glue / "CoLA")
  assert len(train) == 8551 and len(dev) == 527 + 516
  assert {e.label for e in train} == {e.label for e in dev} == {"0", "1"}
  assert sum(e.label == "0" for e in train) == 2528
  assert train[0].text_a.startswith("Our friends won't buy this analysis, let alone")
  assert train[527] == InputExample("train-527", "The box contained the ball to the ground.",
                                    None, "0")
  # Guids number the two dev files as GLUE's concatenated dev.tsv does.
  assert [e.guid for e in dev] == [f"dev-{i}" for i in range(1043)]
  assert dev[527].text_a == "Somebody just left - guess who."
  # out_of_domain_dev.tsv has no final newline; its last row is still read.
  assert dev[-1].text_a == "John talked to Bill about himself."
  assert processor.get_labels() == ["0", "1"] and not processor.is_regression


def test_real_data_cola_official_release_has_no_test_split_and_the_error_names_the_path(glue):
  with pytest.raises(FileNotFoundError, match=r"CoLA/test\.tsv"):
    get_processor("cola").get_test_examples(glue)


def test_real_data_stsb_scores_are_floats_in_0_5_and_test_has_placeholder(glue):
  processor = get_processor("STS-B")
  train = processor.get_train_examples(glue)
  dev = processor.get_dev_examples(glue)
  test = processor.get_test_examples(glue)
  assert (len(train), len(dev), len(test)) == (5749, 1500, 1379)
  assert processor.is_regression and processor.get_labels() is None
  assert train[0] == InputExample("0", "A plane is taking off.", "An air plane is taking off.",
                                  5.0)
  assert dev[1].label == 4.75 and dev[1].text_b == "A child is riding a horse."
  scores = np.array([e.label for e in train + dev])
  assert scores.min() == 0.0 and scores.max() == 5.0
  assert test[-1].guid == "1378" and test[-1].text_a == "South Korea declares end to MERS outbreak"
  assert {e.label for e in test} == {0.0}


def test_real_data_qnli_dev_and_test_keep_stray_quotes_as_text(glue):
  processor = get_processor("qnli")
  dev = processor.get_dev_examples(glue)
  test = processor.get_test_examples(glue)
  # csv's default quoting would merge rows at each field opening with '"' (5,399 rows).
  assert len(dev) == len(test) == 5463
  assert {e.label for e in dev} == {"entailment", "not_entailment"}
  assert sum(e.label == "entailment" for e in dev) == 2702
  assert dev[658].guid == "658" and dev[658].text_b.startswith('" This term describes cells')
  assert dev[0].text_a == "What came into force after the new constitution was herald?"
  assert test[0].text_b.count('"') == 4 and {e.label for e in test} == {"entailment"}
  with pytest.raises(FileNotFoundError, match=r"QNLI/train\.tsv"):
    processor.get_train_examples(glue)


# --- Every GLUE layout, in miniature ----------------------------------------------------------
_MNLI_HEAD = ["index", "promptID", "pairID", "genre", "s1_binary_parse", "s2_binary_parse",
              "s1_parse", "s2_parse", "sentence1", "sentence2"]


def _mnli_row(index, a, b, *labels):
  return "\t".join([str(index), "1", "1a", "fiction", "(", "(", "(", "(", a, b, *labels])


# task -> {file: lines}, split -> (count, first example as (guid, text_a, text_b, label)).
GLUE_LAYOUTS = {
    "mnli": ({"MNLI/train.tsv": ["\t".join(_MNLI_HEAD + ["label1", "gold_label"]),
                                 _mnli_row(0, "P0", "H0", "neutral", "neutral")],
              "MNLI/dev_matched.tsv": ["\t".join(_MNLI_HEAD + ["label1", "label2", "label3",
                                                               "label4", "label5",
                                                               "gold_label"]),
                                       _mnli_row(7, "P7", "H7", "entailment", "neutral",
                                                 "entailment", "entailment", "neutral",
                                                 "entailment")],
              "MNLI/test_matched.tsv": ["\t".join(_MNLI_HEAD), _mnli_row(3, "P3", "H3")]},
             {"train": ("0", "P0", "H0", "neutral"), "dev": ("7", "P7", "H7", "entailment"),
              "test": ("3", "P3", "H3", "contradiction")}),
    "mnli-mm": ({"MNLI/train.tsv": ["\t".join(_MNLI_HEAD + ["label1", "gold_label"]),
                                    _mnli_row(0, "P0", "H0", "neutral", "neutral")],
                 "MNLI/dev_mismatched.tsv": ["\t".join(_MNLI_HEAD + ["gold_label"]),
                                             _mnli_row(9, "M9", "N9", "contradiction")],
                 "MNLI/test_mismatched.tsv": ["\t".join(_MNLI_HEAD), _mnli_row(4, "M4", "N4")]},
                {"dev": ("9", "M9", "N9", "contradiction"),
                 "test": ("4", "M4", "N4", "contradiction")}),
    "mrpc": ({"MRPC/train.tsv": ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
                                 "1\t702876\t702977\tAmrozi accused.\tReferring to him."],
              "MRPC/dev.tsv": ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
                               "0\t1\t2\tA dev.\tB dev."],
              "MRPC/test.tsv": ["index\t#1 ID\t#2 ID\t#1 String\t#2 String",
                                "0\t1089874\t1089925\tPCCW's chief.\tCommon Pa."]},
             {"train": ("train-1", "Amrozi accused.", "Referring to him.", "1"),
              "dev": ("dev-1", "A dev.", "B dev.", "0"),
              "test": ("0", "PCCW's chief.", "Common Pa.", "0")}),
    "qqp": ({"QQP/train.tsv": ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
                               "133273\t213221\t213222\tHow is X?\tWhat is X?\t1"],
             "QQP/dev.tsv": ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
                             "40\t1\t2\tQ1?\tQ2?\t0"],
             "QQP/test.tsv": ["id\tquestion1\tquestion2", "0\tWhy?\tHow?"]},
            {"train": ("133273", "How is X?", "What is X?", "1"),
             "dev": ("40", "Q1?", "Q2?", "0"), "test": ("0", "Why?", "How?", "0")}),
    "rte": ({"RTE/train.tsv": ["index\tsentence1\tsentence2\tlabel",
                               "0\tNo weapons.\tWeapons found.\tnot_entailment"],
             "RTE/dev.tsv": ["index\tsentence1\tsentence2\tlabel", "0\tA.\tB.\tentailment"],
             "RTE/test.tsv": ["index\tsentence1\tsentence2", "0\tC.\tD."]},
            {"train": ("0", "No weapons.", "Weapons found.", "not_entailment"),
             "dev": ("0", "A.", "B.", "entailment"), "test": ("0", "C.", "D.", "entailment")}),
    "wnli": ({"WNLI/train.tsv": ["index\tsentence1\tsentence2\tlabel", "0\tI stuck.\tIt.\t1"],
              "WNLI/dev.tsv": ["index\tsentence1\tsentence2\tlabel", "0\tA.\tB.\t0"],
              "WNLI/test.tsv": ["index\tsentence1\tsentence2", "0\tC.\tD."]},
             {"train": ("0", "I stuck.", "It.", "1"), "dev": ("0", "A.", "B.", "0"),
              "test": ("0", "C.", "D.", "0")}),
    "ax": ({"diagnostic/diagnostic.tsv": ["index\tsentence1\tsentence2",
                                          "0\tThe cat sat.\tThe cat did not sit."]},
           {"test": ("0", "The cat sat.", "The cat did not sit.", "contradiction")}),
    "cola": ({"CoLA/train.tsv": ["gj04\t1\t\tOur friends won't buy this."],
              "CoLA/dev.tsv": ["gj04\t0\t*\tThey drank the pub."],
              "CoLA/test.tsv": ["index\tsentence", "0\tBill whistled past the house."]},
             {"train": ("train-0", "Our friends won't buy this.", None, "1"),
              "dev": ("dev-0", "They drank the pub.", None, "0"),
              "test": ("0", "Bill whistled past the house.", None, "0")}),
}


@pytest.mark.parametrize("task", sorted(GLUE_LAYOUTS))
def test_each_glue_task_reads_its_real_columns_and_test_index(tmp_path, task):
  files, expected = GLUE_LAYOUTS[task]
  for name, lines in files.items():
    (tmp_path / os.path.dirname(name)).mkdir(exist_ok=True)
    _write(tmp_path, name, lines)
  processor = get_processor(task)
  for split, (guid, text_a, text_b, label) in expected.items():
    (example,) = getattr(processor, f"get_{split}_examples")(tmp_path)
    assert example == InputExample(guid, text_a, text_b, label), (task, split)


def test_ax_has_only_a_test_split_with_mnli_labels():
  processor = get_processor("ax")
  assert processor.get_labels() == ["contradiction", "entailment", "neutral"]
  with pytest.raises(ValueError, match="no train split"):
    processor.get_train_examples("unused")


def test_get_processor_is_case_insensitive_and_knows_the_original_names():
  assert get_processor("SST-2").name == "sst-2"
  assert get_processor("MNLI-MM").get_labels() == ["contradiction", "entailment", "neutral"]
  assert get_processor("mismnli").name == "mnli-mm"
  assert get_processor(" CoLA ").metric_names == ("matthews_corr", "accuracy")
  assert set(PROCESSORS) >= {"cola", "mnli", "mnli-mm", "mrpc", "qnli", "qqp", "rte", "sst-2",
                             "sts-b", "wnli", "ax", "csv"}


def test_get_processor_unknown_task_lists_the_valid_ones():
  with pytest.raises(ValueError, match=r"unknown task 'imdb'.*cola.*sst-2.*sts-b.*csv"):
    get_processor("imdb")


def test_get_processor_rejects_csv_options_for_a_glue_task():
  with pytest.raises(ValueError, match="only to the csv task"):
    get_processor("sst-2", text_a_column="sentence")


# --- Encodings and quoting --------------------------------------------------------------------
def test_bom_crlf_and_latin1_lines_are_read(tmp_path):
  raw = ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n".encode("utf-8")
         + "1\t1\t2\tCafé au lait.\tA \"quoted\" one.\r\n".encode("latin-1")
         + "0\t3\t4\tNaïve résumé.\tPlain.\r\n".encode("utf-8"))
  _write(tmp_path, "train.tsv", None, raw=raw)
  examples = get_processor("mrpc").get_train_examples(tmp_path)
  assert [e.text_a for e in examples] == ["Café au lait.", "Naïve résumé."]
  assert examples[0].text_b == 'A "quoted" one.' and examples[1].text_b == "Plain."
  assert [e.label for e in examples] == ["1", "0"]


def test_tsv_rows_split_only_at_tabs_so_a_lone_quote_is_text(tmp_path):
  path = _write(tmp_path, "train.tsv", ["sentence\tlabel", '"it is open\t1', 'ok "\t0', "",
                                        "last\t1"])
  rows = read_rows(path)
  assert [number for number, _ in rows] == [1, 2, 3, 5]  # blank lines skipped, lines kept
  assert rows[1][1] == ['"it is open', "1"]


# --- Bad input: each error names the file and the 1-based line --------------------------------
def test_row_with_too_few_columns_names_file_and_line(tmp_path):
  path = _write(tmp_path, "train.tsv", ["sentence\tlabel", "fine\t1", "no label here"])
  with pytest.raises(DataError, match=_at(path, r", line 3: expected at least 2 .* found 1")):
    get_processor("sst-2").get_train_examples(tmp_path)


def test_label_outside_the_label_set_names_file_and_line(tmp_path):
  path = _write(tmp_path, "dev.tsv", ["sentence\tlabel", "fine\t1", "odd\t2"])
  with pytest.raises(DataError, match=_at(path, r", line 3: label '2' is not one of \['0', '1'\]")):
    get_processor("sst-2").get_dev_examples(tmp_path)


def test_stsb_score_that_is_not_a_number_or_outside_0_5_names_file_and_line(tmp_path):
  head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
  row = "0\tg\tf\t2012\t0\tnone\tnone\tA.\tB.\t"
  path = _write(tmp_path, "train.tsv", [head, row + "4.5", row + "high"])
  with pytest.raises(DataError, match=_at(path, r", line 3: label 'high' is not a number")):
    get_processor("sts-b").get_train_examples(tmp_path)
  path = _write(tmp_path, "dev.tsv", [head, row + "5.5"])
  with pytest.raises(DataError, match=_at(path, r", line 2: score 5.5 is outside")):
    get_processor("sts-b").get_dev_examples(tmp_path)


def test_empty_file_names_the_file(tmp_path):
  path = _write(tmp_path, "train.tsv", None, raw=b"\xef\xbb\xbf\r\n")
  with pytest.raises(DataError, match=_at(path, r": the file is empty")):
    get_processor("sst-2").get_train_examples(tmp_path)


def test_header_without_rows_names_the_file(tmp_path):
  path = _write(tmp_path, "dev.tsv", ["sentence\tlabel"])
  with pytest.raises(DataError, match=_at(path, r": no rows after the header \(line 1\)")):
    get_processor("sst-2").get_dev_examples(tmp_path)


def test_missing_file_names_the_path(tmp_path):
  with pytest.raises(FileNotFoundError, match=_at(tmp_path / "test.tsv", r".*folder is empty")):
    get_processor("sst-2").get_test_examples(tmp_path)
  _write(tmp_path, "train.tsv", ["sentence\tlabel", "a\t1"])
  with pytest.raises(FileNotFoundError,
                     match="expected " + _at(tmp_path / "dev.tsv", "; data_dir is the task")):
    get_processor("sst-2").get_dev_examples(tmp_path)


def test_missing_or_unset_data_dir_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="data_dir does not exist.*" + _at(tmp_path / "nope")):
    get_processor("qnli").get_dev_examples(tmp_path / "nope")
  with pytest.raises(ValueError, match="data_dir must name a folder"):
    get_processor("qnli").get_dev_examples("")


def test_qqp_skips_rows_with_too_few_columns_as_the_original(tmp_path, caplog):
  path = _write(tmp_path, "train.tsv", ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
                                        "1\t1\t2\tA?\tB?\t0", "2\t3\t4\tbroken",
                                        "3\t5\t6\tC?\tD?\t1"])
  examples = get_processor("qqp").get_train_examples(tmp_path)
  assert [e.guid for e in examples] == ["1", "3"]
  assert f"{path}: skipped 1 row(s)" in caplog.text and "[3]" in caplog.text
  # A test row is never skipped: the submission needs a line for each.
  test = _write(tmp_path, "test.tsv", ["id\tquestion1\tquestion2", "0\tA?\tB?", "1\tbroken"])
  with pytest.raises(DataError,
                     match=_at(test, ", line 3: expected at least 3 .* never skipped")):
    get_processor("qqp").get_test_examples(tmp_path)


# --- The generic csv task ---------------------------------------------------------------------
def test_csv_task_reads_columns_by_name_and_infers_sorted_labels(tmp_path):
  _write(tmp_path, "train.csv", ["id,review,stars", '1,"Good, really good",10', "2,Bad,2",
                                 '3,"Two\nlines",2'])
  _write(tmp_path, "dev.csv", ["stars,review,id", "10,Fine,7"])
  _write(tmp_path, "test.csv", ["id,review", "9,Unseen"])
  processor = get_processor("CSV", text_a_column="review", label_column="stars",
                            guid_column="id")
  train = processor.get_train_examples(tmp_path)
  assert processor.get_labels() == ["2", "10"]  # numeric order when every label is an integer
  assert train == [InputExample("1", "Good, really good", None, "10"),
                   InputExample("2", "Bad", None, "2"),
                   InputExample("3", "Two\nlines", None, "2")]
  assert processor.get_dev_examples(tmp_path) == [InputExample("7", "Fine", None, "10")]
  assert processor.get_test_examples(tmp_path) == [InputExample("9", "Unseen", None, "2")]
  assert processor.metric_names == ("accuracy",) and not processor.is_regression


def test_csv_task_tsv_pairs_with_given_labels_and_regression(tmp_path):
  _write(tmp_path, "train.tsv", ["premise\thypothesis\tlabel", 'He said "hi\tHi.\tyes'])
  processor = CsvProcessor("premise", "hypothesis", labels=["no", "yes"])
  assert processor.get_train_examples(tmp_path) == [
      InputExample("train-0", 'He said "hi', "Hi.", "yes")]
  _write(tmp_path, "dev.tsv", ["premise\thypothesis\tlabel", "a\tb\t0.25"])
  regression = CsvProcessor("premise", "hypothesis", regression=True)
  assert regression.get_dev_examples(tmp_path)[0].label == 0.25
  assert regression.get_labels() is None
  assert regression.metric_names == ("pearson", "spearman", "corr")


def test_csv_task_labels_are_inferred_on_demand_from_train(tmp_path):
  _write(tmp_path, "train.csv", ["text,label", "a,neg", "b,pos"])
  processor = CsvProcessor("text")
  with pytest.raises(ValueError, match="inferred from the train file"):
    processor.get_labels()
  assert processor.get_labels(tmp_path) == ["neg", "pos"]


def test_csv_task_errors_name_file_and_line(tmp_path):
  path = _write(tmp_path, "train.csv", ["text,label", "a,neg", "b,pos"])
  _write(tmp_path, "dev.csv", ["text,label", "c,neg", "d,maybe"])
  with pytest.raises(DataError, match=_at(tmp_path / "dev.csv", r", line 3: label 'maybe'")):
    CsvProcessor("text").get_dev_examples(tmp_path)
  with pytest.raises(DataError, match=_at(path, r", line 1: the header has no column 'review'")):
    CsvProcessor("review").get_train_examples(tmp_path)
  _write(tmp_path, "test.csv", ["a,text", "1,x", "2"])
  with pytest.raises(DataError, match=_at(tmp_path / "test.csv", r", line 3: expected at least 2")):
    CsvProcessor("text").get_test_examples(tmp_path)
  _write(tmp_path, "train.tsv", ["text\tlabel", "a\tneg"])
  with pytest.raises(ValueError, match="both .*train.tsv and .*train.csv exist"):
    CsvProcessor("text").get_train_examples(tmp_path)


def test_csv_task_needs_a_text_column():
  with pytest.raises(ValueError, match="text_a_column"):
    get_processor("csv")


# --- Features and TFRecords -------------------------------------------------------------------
def test_real_data_features_are_encode_pair_with_label_ids(glue, spm_tok):
  processor = get_processor("sst-2")
  examples = processor.get_dev_examples(glue)[:4]
  features = convert_examples_to_features(examples, processor.get_labels(), 16, spm_tok)
  assert features[0] == {
      # [CLS] ▁it ▁ ' s ▁a ▁charming ▁and ▁often ▁affecting ▁journey ▁ . [SEP]
      "input_ids": [2, 32, 13, 22, 18, 21, 13275, 17, 478, 13808, 2998, 13, 9, 3, 0, 0],
      "input_mask": [1] * 14 + [0] * 2, "segment_ids": [0] * 16, "label_id": 1,
      "is_real_example": True}
  for example, feature in zip(examples, features):
    packed = encode_pair(spm_tok, example.text_a, None, 16)
    assert feature["input_ids"] == packed["input_ids"]
    assert feature["label_id"] == int(example.label)


def test_real_data_pair_features_mark_segment_b(glue, spm_tok):
  processor = get_processor("qnli")
  example = processor.get_dev_examples(glue)[0]
  (feature,) = convert_examples_to_features([example], processor.get_labels(), 64, spm_tok)
  packed = encode_pair(spm_tok, example.text_a, example.text_b, 64)
  assert feature["input_ids"] == packed["input_ids"] and feature["label_id"] == 0
  sep = feature["input_ids"].index(3)
  assert feature["segment_ids"][:sep + 1] == [0] * (sep + 1)
  assert feature["segment_ids"][sep + 1] == 1


def test_features_reject_a_label_outside_label_list_and_pad_with_fake_examples(spm_tok):
  with pytest.raises(ValueError, match="example x-1: label '7' is not one of"):
    convert_examples_to_features([InputExample("x-1", "a", label="7")], ["0", "1"], 8, spm_tok)
  (pad,) = convert_examples_to_features([PaddingInputExample()], None, 4, spm_tok)
  assert pad == {"input_ids": [0] * 4, "input_mask": [0] * 4, "segment_ids": [0] * 4,
                 "label_id": 0.0, "is_real_example": False}


def test_real_data_tfrecord_round_trip_through_classification_dataset(glue, spm_tok, tmp_path):
  processor = get_processor("sst-2")
  examples = processor.get_dev_examples(glue)[:5] + [PaddingInputExample()]
  features = convert_examples_to_features(examples, processor.get_labels(), 32, spm_tok)
  path = str(tmp_path / "dev.tf_record")
  assert write_features_tfrecord(features, path) == 6
  assert os.listdir(tmp_path) == ["dev.tf_record"]  # no temporary file left behind
  batches = list(classification_dataset(path, 32, 4, is_training=False, regression=False))
  assert [len(b["label_ids"]) for b in batches] == [4, 2]  # eval keeps every record
  batch = {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}
  assert batch["input_word_ids"].dtype == np.int32 and batch["input_word_ids"].shape == (6, 32)
  np.testing.assert_array_equal(batch["input_word_ids"], [f["input_ids"] for f in features])
  np.testing.assert_array_equal(batch["input_mask"], [f["input_mask"] for f in features])
  np.testing.assert_array_equal(batch["input_type_ids"], [f["segment_ids"] for f in features])
  np.testing.assert_array_equal(batch["label_ids"], [1, 0, 1, 1, 0, 0])
  np.testing.assert_array_equal(batch["is_real_example"], [1, 1, 1, 1, 1, 0])
  train = next(iter(classification_dataset(path, 32, 8, is_training=True, regression=False,
                                           seed=1)))
  assert train["input_word_ids"].shape == (8, 32)  # repeated, full static batches


def test_real_data_regression_labels_round_trip_as_floats(glue, spm_tok, tmp_path):
  examples = get_processor("sts-b").get_dev_examples(glue)[:3]
  features = convert_examples_to_features(examples, None, 24, spm_tok)
  path = tmp_path / "stsb.tf_record"
  write_features_tfrecord(features, str(path))
  (batch,) = classification_dataset(path, 24, 3, is_training=False, regression=True)
  assert batch["label_ids"].dtype == tf.float32
  np.testing.assert_allclose(batch["label_ids"].numpy(), [e.label for e in examples])
  assert batch["input_type_ids"].numpy()[0].max() == 1


def test_classification_dataset_names_a_length_mismatch_and_a_missing_file(spm_tok, tmp_path):
  features = convert_examples_to_features([InputExample("a", "hi", label="1")], ["0", "1"], 8,
                                          spm_tok)
  path = str(tmp_path / "x.tf_record")
  write_features_tfrecord(features, path)
  with pytest.raises(ValueError, match="input_ids of length 8 but max_seq_length is 16"):
    classification_dataset(path, 16, 1, is_training=False, regression=False)
  with pytest.raises(FileNotFoundError, match="missing.tf_record"):
    classification_dataset(str(tmp_path / "missing.tf_record"), 8, 1, False, False)


# --- GLUE submission files --------------------------------------------------------------------
def test_glue_predictions_file_has_index_and_label_names(tmp_path):
  path = tmp_path / "QNLI.tsv"
  path.write_text("stale")
  assert write_glue_predictions("qnli", [1, 0, 1], path, guids=["0", "1", "2"]) == 3
  assert path.read_text() == "index\tprediction\n0\tnot_entailment\n1\tentailment\n" \
                             "2\tnot_entailment\n"
  write_glue_predictions("mnli", np.array([[0.1, 0.7, 0.2], [0.9, 0.0, 0.1]]), path)
  assert path.read_text() == "index\tprediction\n0\tentailment\n1\tcontradiction\n"
  assert os.listdir(tmp_path) == ["QNLI.tsv"]


def test_glue_predictions_file_for_stsb_holds_scores(tmp_path):
  path = tmp_path / "STS-B.tsv"
  write_glue_predictions("sts-b", np.array([[4.25], [0.5]], np.float32), path)
  assert path.read_text() == "index\tprediction\n0\t4.250000\n1\t0.500000\n"


def test_glue_predictions_reject_ids_outside_the_labels(tmp_path):
  with pytest.raises(ValueError, match=r"label ids in \[0, 2\)"):
    write_glue_predictions("sst-2", [0, 2], tmp_path / "SST-2.tsv")
  assert not os.listdir(tmp_path)


# --- Chinese tasks: CLUE, LCQMC, ChnSentiCorp -------------------------------------------------
@pytest.fixture(scope="module")
def clue(shared_data):
  return shared_data / "chinese" / "clue"


def _json_lines(folder, name, rows, newline="\n", bom=False, final_newline=True):
  text = newline.join(json.dumps(r, ensure_ascii=False) for r in rows)
  data = ("\ufeff" if bom else "") + text + (newline if final_newline else "")
  return _write(folder, name, None, raw=data.encode("utf-8"))


def test_get_processor_knows_the_chinese_tasks_and_their_label_sets():
  labels = {task: get_processor(task).get_labels() for task in (
      "afqmc", "tnews", "iflytek", "ocnli", "cmnli", "csl", "lcqmc", "chnsenticorp")}
  assert labels["afqmc"] == labels["csl"] == labels["lcqmc"] == labels["chnsenticorp"] == [
      "0", "1"]
  assert labels["iflytek"] == [str(i) for i in range(119)]
  assert labels["ocnli"] == labels["cmnli"] == ["contradiction", "entailment", "neutral"]
  assert len(labels["tnews"]) == 15 and "105" not in labels["tnews"]
  assert all(get_processor(task).metric_names == ("accuracy",) for task in labels)


def test_real_data_afqmc_reads_crlf_lines_without_a_final_newline_and_test_ids(clue):
  raw = (clue / "afqmc" / "dev.json").read_bytes()
  assert raw.count(b"\r\n") == 4315 and not raw.endswith(b"\n")  # the quirks under test
  processor = get_processor("afqmc")
  dev = processor.get_dev_examples(clue / "afqmc")
  test = processor.get_test_examples(clue)  # CLUE's root holding afqmc/ also works
  assert len(dev) == 4316 and sum(e.label == "1" for e in dev) == 1338
  assert dev[0] == InputExample("dev-0", "双十一花呗提额在哪", "里可以提花呗额度", "0")
  assert not dev[-1].text_b.endswith("\r")
  assert [e.guid for e in test] == list(range(3861))  # the rows' own int ids
  assert test[0] == InputExample(0, "借呗什么时候会取消", "蚂蚁借呗什么时候可以恢复***个月", "0")


def test_real_data_tnews_dev_and_fewclue_train_use_the_clue_label_codes(clue, tmp_path):
  processor = get_processor("tnews")
  released = [json.loads(line)["label"] for line in
              (clue / "tnews" / "labels.json").read_text(encoding="utf-8").splitlines()]
  assert processor.get_labels() == released
  dev = processor.get_dev_examples(clue / "tnews")
  assert len(dev) == 10000 and {e.label for e in dev} == set(released)
  assert dev[0] == InputExample("dev-0", "江疏影甜甜圈自拍，迷之角度竟这么好看，美吸引一切事物",
                                None, "102")
  # FewCLUE writes the labels as numbers (100, not "100"); read as the same codes.
  (tmp_path / "train.json").symlink_to(clue / "tnews" / "fewclue_train_few_all.json")
  train = processor.get_train_examples(tmp_path)
  assert len(train) == 1185 and {e.label for e in train} == set(released)
  assert len({e.text_a for e in train} & {e.text_a for e in dev}) == 22


def test_real_data_ocnli_skips_and_counts_unlabeled_rows_and_keeps_test_ids(clue, caplog):
  processor = get_processor("ocnli")
  train = processor.get_train_examples(clue / "ocnli")  # the release's train.3k.json
  dev = processor.get_dev_examples(clue / "ocnli")
  test = processor.get_test_examples(clue / "ocnli")
  assert (len(train), len(dev), len(test)) == (3000 - 6, 3000 - 50, 3000)
  assert {e.label for e in train} == {e.label for e in dev} == {
      "entailment", "neutral", "contradiction"}
  assert f"{clue / 'ocnli' / 'dev.json'}: skipped 50 row(s) labelled '-'" in caplog.text
  assert f"{clue / 'ocnli' / 'train.3k.json'}: skipped 6 row(s) labelled '-'" in caplog.text
  assert [e.guid for e in test] == list(range(3000))
  assert test[1].text_a == "这个就被这门功课给卡下来了." and test[1].text_b == "这门功课挂科了"


def test_real_data_chnsenticorp_reads_its_header_and_numbers_test_rows(clue):
  processor = get_processor("chnsenticorp")
  split = {s: getattr(processor, f"get_{s}_examples")(clue / "chnsenticorp")
           for s in ("train", "dev", "test")}
  assert [len(split[s]) for s in ("train", "dev", "test")] == [9600, 1200, 1200]
  assert sum(e.label == "1" for e in split["train"]) == 4799
  assert sum(e.label == "1" for e in split["dev"]) == 593
  assert split["dev"][0].text_a.startswith("這間酒店環境和服務態度亦算不錯")
  assert split["train"][0].text_b is None
  assert [e.guid for e in split["test"]] == list(range(1200))


def test_iflytek_layout_with_bom_crlf_and_no_final_newline(tmp_path):
  rows = [{"label": "110", "label_des": "社区超市", "sentence": "朴朴快送超市"},
          {"label": "0", "label_des": "打车", "sentence": "滴滴出行"}]
  _json_lines(tmp_path, "train.json", rows, newline="\r\n", bom=True, final_newline=False)
  _json_lines(tmp_path, "test.json", [{"id": 7, "sentence": "高德地图"},
                                       {"id": 9, "sentence": "美团"}])
  processor = get_processor("iflytek")
  assert processor.get_train_examples(tmp_path) == [
      InputExample("train-0", "朴朴快送超市", None, "110"),
      InputExample("train-1", "滴滴出行", None, "0")]
  assert processor.get_test_examples(tmp_path) == [InputExample(7, "高德地图", None, "0"),
                                                   InputExample(9, "美团", None, "0")]
  _json_lines(tmp_path, "dev.json", [{"label": "119", "sentence": "不存在"}])
  with pytest.raises(DataError, match=_at(tmp_path / "dev.json", r", line 1: label '119'")):
    processor.get_dev_examples(tmp_path)


def test_cmnli_layout_skips_unlabeled_pairs_and_counts_them(tmp_path, caplog):
  path = _json_lines(tmp_path, "dev.json", [
      {"sentence1": "他在跑步", "sentence2": "他在运动", "label": "entailment"},
      {"sentence1": "甲", "sentence2": "乙", "label": "-"},
      {"sentence1": "天在下雨", "sentence2": "天很晴朗", "label": "contradiction"}])
  examples = get_processor("cmnli").get_dev_examples(tmp_path)
  assert examples == [InputExample("dev-0", "他在跑步", "他在运动", "entailment"),
                      InputExample("dev-2", "天在下雨", "天很晴朗", "contradiction")]
  assert f"{path}: skipped 1 row(s) labelled '-' (no gold label); read 2" in caplog.text


def test_csl_layout_joins_the_keywords_as_text_a_and_the_abstract_as_text_b(tmp_path):
  _json_lines(tmp_path, "train.json", [
      {"id": 1, "abst": "本文提出一种方法。", "keyword": ["水声", "信号"], "label": "1"}])
  _json_lines(tmp_path, "test.json", [{"id": 2, "abst": "摘要", "keyword": ["关键词"]}])
  processor = get_processor("csl")
  assert processor.get_train_examples(tmp_path) == [
      InputExample("train-0", "水声 信号", "本文提出一种方法。", "1")]
  assert processor.get_test_examples(tmp_path) == [InputExample(2, "关键词", "摘要", "0")]
  _json_lines(tmp_path, "dev.json", [{"abst": "摘要", "keyword": "水声", "label": "0"}])
  with pytest.raises(DataError, match=_at(tmp_path / "dev.json", ", line 1: field 'keyword' "
                                          "must be a list")):
    processor.get_dev_examples(tmp_path)


def test_lcqmc_layout_keeps_the_first_row_unless_it_is_a_header(tmp_path):
  _write(tmp_path, "train.txt", ["喜欢打篮球的男生喜欢什么样的女生\t爱打篮球的男生喜欢什么样的女生\t1",
                                 "我手机丢了\t求个好听的名字\t0"])
  _write(tmp_path, "dev.txt", ["text_a\ttext_b\tlabel", "开初婚未育证明\t初婚未育情况证明\t1"])
  _write(tmp_path, "test.txt", ["谁有狂三\t谁有狂三的图片", "英语怎么说\t用英语说"])
  processor = get_processor("lcqmc")
  train = processor.get_train_examples(tmp_path)
  assert [e.label for e in train] == ["1", "0"] and train[0].text_b.startswith("爱打篮球")
  assert processor.get_dev_examples(tmp_path) == [
      InputExample("dev-0", "开初婚未育证明", "初婚未育情况证明", "1")]
  assert [(e.guid, e.text_a) for e in processor.get_test_examples(tmp_path)] == [
      (0, "谁有狂三"), (1, "英语怎么说")]
  _write(tmp_path, "dev.txt", ["甲\t乙\t1", "丙\t丁"])
  with pytest.raises(DataError, match=_at(tmp_path / "dev.txt", ", line 2: expected text_a")):
    processor.get_dev_examples(tmp_path)


def test_clue_file_that_is_not_json_or_lacks_a_field_names_file_and_line(tmp_path):
  path = _write(tmp_path, "dev.json", ['{"sentence1": "甲", "sentence2": "乙", "label": "0"}',
                                       '{"sentence1": "丙", "label": "1"}'])
  with pytest.raises(DataError, match=_at(path, ", line 2: no field 'sentence2'")):
    get_processor("afqmc").get_dev_examples(tmp_path)
  path = _write(tmp_path, "test.json", ['{"id": 0, "sentence1": "甲", "sentence2": "乙"}', "",
                                        "not json"])
  with pytest.raises(DataError, match=_at(path, ", line 3: not valid JSON")):
    read_json_lines(path)


def test_clue_predictions_file_has_each_rows_id_and_label_string(tmp_path):
  path = tmp_path / "ocnli_predict.json"
  path.write_text("stale")
  assert write_clue_predictions("ocnli", np.array([[0.1, 0.7, 0.2], [0.0, 0.1, 0.9]]), path,
                                ids=[12, 3]) == 2
  assert path.read_text(encoding="utf-8") == ('{"id": 12, "label": "entailment"}\n'
                                              '{"id": 3, "label": "neutral"}\n')
  write_clue_predictions("tnews", [0, 14], path)  # no ids: the row index
  assert [json.loads(line) for line in path.read_text().splitlines()] == [
      {"id": 0, "label": "100"}, {"id": 1, "label": "116"}]
  assert os.listdir(tmp_path) == ["ocnli_predict.json"]
  with pytest.raises(ValueError, match=r"label ids in \[0, 2\)"):
    write_clue_predictions("afqmc", [0, 2], tmp_path / "afqmc_predict.json")
  with pytest.raises(ValueError, match="1 ids for 2 predictions"):
    write_clue_predictions("afqmc", [0, 1], tmp_path / "afqmc_predict.json", ids=[5])

