"""Sentence(-pair) classification data: GLUE/CSV rows -> examples -> features -> TFRecords.

  processor = get_processor("sst-2")
  examples = processor.get_train_examples("glue/SST-2")   # or the GLUE root that holds SST-2/
  tok = FullTokenizer(spm_model_file="spiece.model")
  features = convert_examples_to_features(examples, processor.get_labels(), 128, tok)
  write_features_tfrecord(features, "train.tf_record")
  dataset = classification_dataset("train.tf_record", 128, 32, is_training=True,
                                   regression=processor.is_regression)

The GLUE processors read the files of the GLUE download with the original's columns, labels
and guids (google-research/albert classifier_utils.py); test rows get the original's
placeholder label (the first label, or 0.0 for STS-B) and their `index` as guid, which the
submission file needs. `data_dir` is the task's folder or, as in the original, the GLUE root
that holds it. Files are read as the original reads them (TSV, csv.QUOTE_NONE, so a stray
quote is text), but BOMs, CRLF and Latin-1 lines are tolerated; bad content is a `DataError`
naming the file and its 1-based line, a missing folder or file a FileNotFoundError naming the
path. TensorFlow is imported only by the TFRecord functions. See SPEC.md, "Fine-tuning
(original defaults)".

The Chinese tasks read their released layouts (SPEC.md, "Chinese (albert_zh) practice"): the
CLUE tasks `afqmc`, `tnews`, `iflytek`, `ocnli`, `cmnli`, `csl` (JSON lines), albert_zh's
`lcqmc` (TSV train/dev/test.txt) and `chnsenticorp` (TSV with a header); their test guids are
the rows' own `id`s (or row indexes), which `write_clue_predictions` writes to the CLUE
submission file.
"""

import codecs
import csv
import dataclasses
import json
import logging
import math
import os

from albert_tf import files
from albert_tf.data.tfrecords import write_tfrecord_atomically
from albert_tf.tokenization.tokenizer import encode_pair

logger = logging.getLogger(__name__)


class DataError(ValueError):
  """Classification data that cannot be read; the message names the file and line."""


@dataclasses.dataclass
class InputExample:
  """One example: `text_b` is None for single-sentence tasks, `label` a str or a float.

  `guid` is a str, except for the test rows of a Chinese task: there it is the row's own `id`
  as the file has it (an int in CLUE's files) or its 0-based index, the submission's `id`.
  """
  guid: object
  text_a: str
  text_b: str = None
  label: object = None


class PaddingInputExample:
  """A fake example that pads an eval/predict set to a whole number of batches.

  It becomes an all-zero feature with `is_real_example` False, as in the original, so a TPU
  (static batch shapes) sees every real example and the metrics can ignore the padding.
  """


# --- Reading files ----------------------------------------------------------------------------
def _decode_lines(path):
  """Lines of `path` as str: utf-8 (BOM dropped), Latin-1 for a line that is not utf-8."""
  with open(path, "rb") as f:
    data = f.read()
  if data.startswith(codecs.BOM_UTF8):
    data = data[len(codecs.BOM_UTF8):]
  if not data.strip():
    raise DataError(f"{path}: the file is empty")
  # Split on "\n" only: str.splitlines would also break at \x0b, \x1c, \u2028 inside a text.
  latin1 = []
  try:
    lines = data.decode("utf-8").split("\n")
  except UnicodeDecodeError:
    lines = []
    for number, raw in enumerate(data.split(b"\n"), 1):
      try:
        lines.append(raw.decode("utf-8"))
      except UnicodeDecodeError:
        lines.append(raw.decode("latin-1"))
        latin1.append(number)
  lines = [line[:-1] if line.endswith("\r") else line for line in lines]
  if latin1:
    logger.warning("%s: %d line(s) are not utf-8 and were read as Latin-1 (first: line %d)",
                   path, len(latin1), latin1[0])
  if lines and not lines[-1]:
    lines.pop()  # the final newline
  return lines


def read_rows(path, delimiter="\t", quoting=csv.QUOTE_NONE):
  """`(line_number, fields)` of every non-blank row of a TSV/CSV file (1-based lines).

  With QUOTE_NONE (TSV, the original's `_read_tsv`) a row is one line split at `delimiter`
  and quotes are ordinary text. Other quoting (CSV files) follows the csv module, so a quoted
  field may hold the delimiter or span lines; its row number is the line where it starts.
  """
  lines = _decode_lines(path)
  if quoting == csv.QUOTE_NONE:
    return [(number, line.split(delimiter)) for number, line in enumerate(lines, 1)
            if line.strip()]
  rows = []
  reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, quoting=quoting,
                      strict=True)
  start = 1
  while True:
    try:
      fields = next(reader)
    except StopIteration:
      break
    except csv.Error as e:
      raise DataError(f"{path}, line {start}: cannot parse the row: {e}") from e
    if any(field.strip() for field in fields):
      rows.append((start, fields))
    start = reader.line_num + 1
  return rows


def _check_data_dir(data_dir):
  if not data_dir:
    raise ValueError(f"data_dir must name a folder, got {data_dir!r}")
  data_dir = os.fspath(data_dir)
  if not os.path.isdir(data_dir):
    raise FileNotFoundError(f"data_dir does not exist or is not a folder: {data_dir}")
  return data_dir


def _find_files(folder, alternatives, what, hint=""):
  """The first alternative (a tuple of file names) whose files all exist in `folder`."""
  for names in alternatives:
    paths = [os.path.join(folder, name) for name in names]
    if all(os.path.isfile(p) for p in paths):
      return paths
  tried = " or ".join(" + ".join(os.path.join(folder, n) for n in names)
                      for names in alternatives)
  empty = " (the folder is empty)" if not os.listdir(folder) else ""
  raise FileNotFoundError(f"{what} not found: expected {tried}{empty}{hint}")


def _placeholder_label(labels):
  # The original labels unlabeled test rows with its first label (0 for STS-B).
  return 0.0 if labels is None else labels[0]


def _parse_label(raw, labels, path, number):
  """A str label checked against `labels`, or (labels None) a float score."""
  text = raw.strip()
  if labels is not None:
    if text not in labels:
      raise DataError(f"{path}, line {number}: label {text!r} is not one of {list(labels)}")
    return text
  try:
    score = float(text)
  except ValueError:
    score = math.nan
  if not math.isfinite(score):
    raise DataError(f"{path}, line {number}: label {text!r} is not a number (this task is "
                    "a regression)")
  return score


# --- GLUE processors --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Split:
  """Where a split of a GLUE task lives and which 0-based columns hold what.

  `files` lists alternatives, each a tuple of files read one after another (CoLA's official
  release splits dev in two). `label` None means unlabeled (test): the placeholder label.
  -1 means the last column, as the original's `line[-1]`. `guid` None: "<split>-<row>", the
  row counted from 0 at the file's first line (header included) as in the original.
  """
  files: tuple
  text_a: int
  text_b: int = None
  label: int = None
  guid: int = None
  header: bool = True

  @property
  def min_columns(self):
    columns = [c for c in (self.text_a, self.text_b, self.label, self.guid) if c is not None]
    needed = max(c for c in columns if c >= 0) + 1
    return needed + 1 if any(c < 0 for c in columns) else needed


class DataProcessor:
  """A task's splits, labels and metrics; GLUE tasks describe theirs in class attributes."""
  name = None
  folders = ()          # the task's folder under the GLUE root, e.g. ("SST-2",)
  labels = None         # tuple of str; None for a regression task
  metric_names = ("accuracy",)
  splits = {}           # "train" / "dev" / "test" -> Split
  # Rows with too few columns are errors, except where the original skips them (QQP).
  skip_malformed_rows = False
  score_range = None    # (low, high) of a regression task's labels
  # The submission file of --do_predict: "glue" (<TASK>.tsv, write_glue_predictions) or
  # "clue" (<task>_predict.json, write_clue_predictions).
  submission = "glue"

  @property
  def is_regression(self):
    return self.labels is None

  def get_labels(self):
    """The label strings in id order; None for regression."""
    return None if self.labels is None else list(self.labels)

  def get_train_examples(self, data_dir):
    return self._read_split("train", data_dir)

  def get_dev_examples(self, data_dir):
    return self._read_split("dev", data_dir)

  def get_test_examples(self, data_dir):
    return self._read_split("test", data_dir)

  def task_dir(self, data_dir):
    """`data_dir` itself, or its task folder when given the GLUE root (the original's way)."""
    data_dir = _check_data_dir(data_dir)
    for folder in self.folders:
      if os.path.isdir(os.path.join(data_dir, folder)):
        return os.path.join(data_dir, folder)
    return data_dir

  def _read_split(self, split_name, data_dir):
    if split_name not in self.splits:
      raise ValueError(f"task {self.name!r} has no {split_name} split "
                       f"(it has: {', '.join(self.splits)})")
    split = self.splits[split_name]
    folder = self.task_dir(data_dir)
    hint = ""
    if folder == os.fspath(data_dir) and self.folders:
      hint = f"; data_dir is the task folder or the GLUE root holding {self.folders[0]}/"
    paths = _find_files(folder, split.files, f"{self.name} {split_name} data", hint)
    examples = []
    offset = 0  # CoLA's two dev files number their rows as GLUE's single dev.tsv does
    for path in paths:
      rows = read_rows(path)
      if split.header:
        header_line = rows[0][0]
        rows = rows[1:]
        if not rows:
          raise DataError(f"{path}: no rows after the header (line {header_line})")
      skipped = []
      for number, fields in rows:
        if len(fields) < split.min_columns:
          if self.skip_malformed_rows:
            skipped.append(number)
            continue
          raise DataError(f"{path}, line {number}: expected at least {split.min_columns} "
                          f"tab-separated columns, found {len(fields)}")
        examples.append(self._example(split_name, split, fields, offset + number - 1,
                                      path, number))
      if skipped:
        logger.warning("%s: skipped %d row(s) with too few columns, as the original does "
                       "(lines %s)", path, len(skipped), skipped[:10])
      offset += rows[-1][0]
    return examples

  def _example(self, split_name, split, fields, row, path, number):
    guid = fields[split.guid].strip() if split.guid is not None else f"{split_name}-{row}"
    text_b = fields[split.text_b] if split.text_b is not None else None
    if split.label is None:
      label = _placeholder_label(self.labels)
    else:
      label = _parse_label(fields[split.label], self.labels, path, number)
      if self.score_range and not self.score_range[0] <= label <= self.score_range[1]:
        raise DataError(f"{path}, line {number}: score {label} is outside "
                        f"{list(self.score_range)}")
    return InputExample(guid=guid, text_a=fields[split.text_a], text_b=text_b, label=label)


_MNLI_LABELS = ("contradiction", "entailment", "neutral")


class ColaProcessor(DataProcessor):
  """CoLA: is a sentence acceptable (1) or not (0)? GLUE's files or the official release.

  GLUE's train.tsv/dev.tsv are the official in_domain_train.tsv and in_domain_dev.tsv +
  out_of_domain_dev.tsv: no header; columns source, label, original mark, sentence.
  """
  name = "cola"
  folders = ("CoLA",)
  labels = ("0", "1")
  metric_names = ("matthews_corr", "accuracy")
  splits = {
      "train": Split(files=(("train.tsv",), ("in_domain_train.tsv",)),
                     header=False, text_a=3, label=1),
      "dev": Split(files=(("dev.tsv",), ("in_domain_dev.tsv", "out_of_domain_dev.tsv")),
                   header=False, text_a=3, label=1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1),
  }


class MnliProcessor(DataProcessor):
  """MNLI, dev = the matched set (genres seen in training)."""
  name = "mnli"
  folders = ("MNLI",)
  labels = _MNLI_LABELS
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=8, text_b=9, label=-1),
      "dev": Split(files=(("dev_matched.tsv",),), guid=0, text_a=8, text_b=9, label=-1),
      "test": Split(files=(("test_matched.tsv",),), guid=0, text_a=8, text_b=9),
  }


class MisMnliProcessor(MnliProcessor):
  """MNLI with the mismatched dev and test sets (genres unseen in training)."""
  name = "mnli-mm"
  splits = {
      "train": MnliProcessor.splits["train"],
      "dev": Split(files=(("dev_mismatched.tsv",),), guid=0, text_a=8, text_b=9, label=-1),
      "test": Split(files=(("test_mismatched.tsv",),), guid=0, text_a=8, text_b=9),
  }


class MrpcProcessor(DataProcessor):
  """MRPC: are two sentences paraphrases? Columns Quality, #1 ID, #2 ID, #1 String, #2 String."""
  name = "mrpc"
  folders = ("MRPC",)
  labels = ("0", "1")
  metric_names = ("f1", "accuracy")
  splits = {
      "train": Split(files=(("train.tsv",),), text_a=3, text_b=4, label=0),
      "dev": Split(files=(("dev.tsv",),), text_a=3, text_b=4, label=0),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=3, text_b=4),
  }


class QnliProcessor(DataProcessor):
  """QNLI: does the sentence answer the question? Columns index, question, sentence, label."""
  name = "qnli"
  folders = ("QNLI",)
  labels = ("entailment", "not_entailment")
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=1, text_b=2, label=-1),
      "dev": Split(files=(("dev.tsv",),), guid=0, text_a=1, text_b=2, label=-1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1, text_b=2),
  }


class QqpProcessor(DataProcessor):
  """QQP: are two questions duplicates? Columns id, qid1, qid2, question1, question2, label."""
  name = "qqp"
  folders = ("QQP",)
  labels = ("0", "1")
  metric_names = ("f1", "accuracy")
  skip_malformed_rows = True  # the original's `except IndexError: continue`
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=3, text_b=4, label=5),
      "dev": Split(files=(("dev.tsv",),), guid=0, text_a=3, text_b=4, label=5),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1, text_b=2),
  }


class RteProcessor(QnliProcessor):
  """RTE: does sentence1 entail sentence2? Columns index, sentence1, sentence2, label."""
  name = "rte"
  folders = ("RTE",)


class Sst2Processor(DataProcessor):
  """SST-2: is a movie-review phrase positive (1) or negative (0)? Columns sentence, label."""
  name = "sst-2"
  folders = ("SST-2",)
  labels = ("0", "1")
  splits = {
      "train": Split(files=(("train.tsv",),), text_a=0, label=1),
      "dev": Split(files=(("dev.tsv",),), text_a=0, label=1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1),
  }


class StsbProcessor(DataProcessor):
  """STS-B: similarity score 0-5 of a sentence pair (regression); 10 columns, score last."""
  name = "sts-b"
  folders = ("STS-B",)
  labels = None
  score_range = (0.0, 5.0)
  metric_names = ("pearson", "spearman", "corr")
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=7, text_b=8, label=-1),
      "dev": Split(files=(("dev.tsv",),), guid=0, text_a=7, text_b=8, label=-1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=7, text_b=8),
  }


class WnliProcessor(QnliProcessor):
  """WNLI: does sentence2 follow from sentence1 (1) or not (0)? RTE's columns."""
  name = "wnli"
  folders = ("WNLI",)
  labels = ("0", "1")


class AxProcessor(DataProcessor):
  """GLUE's diagnostic set: test only, scored by GLUE with MNLI's labels (R3 = Matthews corr.)."""
  name = "ax"
  folders = ("AX", "diagnostic")
  labels = _MNLI_LABELS
  metric_names = ("matthews_corr",)
  splits = {
      "test": Split(files=(("test.tsv",), ("diagnostic.tsv",), ("AX.tsv",)),
                    guid=0, text_a=1, text_b=2),
  }


# --- Users' own CSV/TSV files -----------------------------------------------------------------
def _label_sort_key(label):
  try:
    return (0, int(label), "")  # "2" before "10"
  except ValueError:
    return (1, 0, label)


class CsvProcessor(DataProcessor):
  """The `csv` task: train/dev/test.{tsv,csv} with a header row; columns chosen by name.

    processor = CsvProcessor("review", label_column="stars")
    processor.get_train_examples("my_data")   # my_data/train.csv (or train.tsv)

  Args:
    text_a_column, text_b_column: header names of the text column(s).
    label_column: header name of the label (ignored in test files, as for GLUE).
    delimiter: None picks it from the extension (.tsv tab, .csv comma). TSV is read with
      QUOTE_NONE as GLUE; CSV with the csv module's quoting, so fields may hold commas.
    labels: the label strings in id order; None infers the sorted unique labels of the train
      file (numerically when all are integers).
    regression: float labels, no label set.
    guid_column: header name of an id column (the predictions' `index`); None: "<split>-<n>".
    metric_names: None: ("pearson", "spearman", "corr") for regression, else ("accuracy",).
  """
  name = "csv"

  def __init__(self, text_a_column, text_b_column=None, label_column="label", delimiter=None,
               labels=None, regression=False, guid_column=None, metric_names=None):
    if not text_a_column:
      raise ValueError("the csv task needs text_a_column, the header name of the text column")
    if regression and labels is not None:
      raise ValueError("a regression task has no label set; pass labels=None")
    self.text_a_column = text_a_column
    self.text_b_column = text_b_column
    self.label_column = label_column
    self.delimiter = delimiter
    self.regression = regression
    self.guid_column = guid_column
    self.labels = None if labels is None else tuple(str(label) for label in labels)
    if labels is not None and len(set(self.labels)) != len(self.labels):
      raise ValueError(f"labels must be distinct, got {list(labels)}")
    if metric_names is None:
      metric_names = ("pearson", "spearman", "corr") if regression else ("accuracy",)
    self.metric_names = tuple(metric_names)
    self._data_dir = None  # where labels were inferred from

  @property
  def is_regression(self):
    return self.regression

  def get_labels(self, data_dir=None):
    """The labels given, or those inferred from train (read now if `data_dir` is given)."""
    if self.regression:
      return None
    if self.labels is None:
      if data_dir is None and self._data_dir is None:
        raise ValueError("the csv task's labels are inferred from the train file: call "
                         "get_train_examples(data_dir) or get_labels(data_dir) first, or "
                         "pass labels=[...]")
      self._infer_labels(data_dir or self._data_dir)
    return list(self.labels)

  def _path(self, split_name, data_dir, hint=""):
    folder = _check_data_dir(data_dir)
    names = (f"{split_name}.tsv", f"{split_name}.csv")
    found = [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    if len(found) > 1:
      raise ValueError(f"both {found[0]} and {found[1]} exist; keep one")
    return _find_files(folder, [(n,) for n in names], f"csv {split_name} data", hint)[0]

  def _delimiter(self, path):
    if self.delimiter is not None:
      return self.delimiter
    return "\t" if path.lower().endswith(".tsv") else ","

  def _table(self, path, need_label):
    """(column index by name, rows) of a file whose first row is the header."""
    delimiter = self._delimiter(path)
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    rows = read_rows(path, delimiter=delimiter, quoting=quoting)
    if not rows:
      raise DataError(f"{path}: the file has no rows")
    header_line, header = rows[0]
    index = {name.strip(): i for i, name in enumerate(header)}
    wanted = [self.text_a_column, self.text_b_column, self.guid_column]
    wanted += [self.label_column] if need_label else []
    missing = [c for c in wanted if c is not None and c not in index]
    if missing:
      raise DataError(f"{path}, line {header_line}: the header has no column "
                      f"{', '.join(map(repr, missing))}; its columns are {list(index)}")
    if len(rows) == 1:
      raise DataError(f"{path}: no rows after the header (line {header_line})")
    min_columns = max(index[c] for c in wanted if c is not None) + 1
    for number, fields in rows[1:]:
      if len(fields) < min_columns:
        raise DataError(f"{path}, line {number}: expected at least {min_columns} columns "
                        f"(delimiter {delimiter!r}), found {len(fields)}")
    return index, rows[1:]

  def _infer_labels(self, data_dir):
    path = self._path("train", data_dir,
                      hint="; the labels are inferred from it unless labels=[...] is given")
    index, rows = self._table(path, need_label=True)
    found = set()
    for number, fields in rows:
      label = fields[index[self.label_column]].strip()
      if not label:
        raise DataError(f"{path}, line {number}: the label is empty")
      found.add(label)
    self.labels = tuple(sorted(found, key=_label_sort_key))
    self._data_dir = data_dir
    logger.info("csv task: %d labels inferred from %s: %s", len(self.labels), path,
                list(self.labels))

  def _read_split(self, split_name, data_dir):
    if split_name not in ("train", "dev", "test"):
      raise ValueError(f"unknown split {split_name!r}")
    path = self._path(split_name, data_dir)
    if self.labels is None and not self.regression:
      self._infer_labels(data_dir)
    labeled = split_name != "test"
    index, rows = self._table(path, need_label=labeled)
    examples = []
    for n, (number, fields) in enumerate(rows):
      guid = (fields[index[self.guid_column]].strip() if self.guid_column
              else f"{split_name}-{n}")
      text_b = fields[index[self.text_b_column]] if self.text_b_column else None
      if labeled:
        label = _parse_label(fields[index[self.label_column]], self.labels, path, number)
      else:
        label = _placeholder_label(self.labels)
      examples.append(InputExample(guid=guid, text_a=fields[index[self.text_a_column]],
                                   text_b=text_b, label=label))
    return examples


# --- Chinese tasks: CLUE, LCQMC, ChnSentiCorp ------------------------------------------------
def read_json_lines(path):
  """`(line_number, object)` of every non-blank line of a JSON-lines file (1-based lines).

  A BOM, CRLF line ends and a missing final newline are tolerated (CLUE's AFQMC files have
  the last two); a line that is not a JSON object is a `DataError` naming the file and line.
  """
  rows = []
  for number, line in enumerate(_decode_lines(path), 1):
    if not line.strip():
      continue
    try:
      row = json.loads(line)
    except json.JSONDecodeError as e:
      raise DataError(f"{path}, line {number}: not valid JSON ({e.msg})") from None
    if not isinstance(row, dict):
      raise DataError(f"{path}, line {number}: expected a JSON object, found "
                      f"{type(row).__name__}")
    rows.append((number, row))
  return rows


def _field(row, name, path, number):
  if name not in row:
    raise DataError(f"{path}, line {number}: no field {name!r} (fields: {sorted(row)})")
  return row[name]


def _text_field(row, name, path, number):
  value = _field(row, name, path, number)
  if not isinstance(value, str):
    raise DataError(f"{path}, line {number}: field {name!r} is {type(value).__name__}, "
                    "not a string")
  return value


UNLABELED = "-"  # CLUE's label of NLI pairs whose annotators reached no majority


class ClueProcessor(DataProcessor):
  """A CLUE classification task: train/dev/test.json, one JSON object a line.

  `text_fields` name the fields of text_a (and text_b). Labels are strings (FewCLUE's numbers
  are read as their strings). Rows labelled "-" are skipped, as CLUE's baselines skip them,
  and counted in a warning. Test rows are unlabeled: the first label as placeholder and the
  row's own `id` as guid (its 0-based index when the file has no ids).
  """
  submission = "clue"
  text_fields = ("sentence1", "sentence2")
  # Alternatives per split, first found wins; `folders` also accept CLUE's download names.
  files = {"train": (("train.json",),), "dev": (("dev.json",),), "test": (("test.json",),)}

  def _texts(self, row, path, number):
    texts = [_text_field(row, name, path, number) for name in self.text_fields]
    return texts[0], texts[1] if len(texts) > 1 else None

  def _read_split(self, split_name, data_dir):
    if split_name not in self.files:
      raise ValueError(f"unknown split {split_name!r}")
    folder = self.task_dir(data_dir)
    (path,) = _find_files(folder, self.files[split_name], f"{self.name} {split_name} data")
    rows = read_json_lines(path)
    labeled = split_name != "test"
    examples, unlabeled = [], 0
    for n, (number, row) in enumerate(rows):
      text_a, text_b = self._texts(row, path, number)
      if labeled:
        raw = str(_field(row, "label", path, number))
        if raw.strip() == UNLABELED:
          unlabeled += 1
          continue
        label, guid = _parse_label(raw, self.labels, path, number), f"{split_name}-{n}"
      else:
        label, guid = _placeholder_label(self.labels), row.get("id", n)
      examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
    if unlabeled:
      logger.warning("%s: skipped %d row(s) labelled %r (no gold label); read %d", path,
                     unlabeled, UNLABELED, len(examples))
    return examples


class AfqmcProcessor(ClueProcessor):
  """AFQMC: do two Ant Financial questions mean the same (1) or not (0)?"""
  name = "afqmc"
  folders = ("afqmc_public", "afqmc")
  labels = ("0", "1")


class TnewsProcessor(ClueProcessor):
  """TNEWS: which of 15 news categories is a headline? Labels are codes "100".."116".

  CLUE's code list skips 105 and 111; its baseline classifies `sentence` alone (`keywords`
  and `label_desc` unused), and so do we.
  """
  name = "tnews"
  folders = ("tnews_public", "tnews")
  labels = tuple(str(100 + i) for i in range(17) if i not in (5, 11))
  text_fields = ("sentence",)


class IflytekProcessor(ClueProcessor):
  """IFLYTEK: which of 119 app categories ("0".."118") does a description belong to?"""
  name = "iflytek"
  folders = ("iflytek_public", "iflytek")
  labels = tuple(str(i) for i in range(119))
  text_fields = ("sentence",)


class OcnliProcessor(ClueProcessor):
  """OCNLI: does sentence1 entail sentence2? "-" rows (no majority) are skipped.

  The release's train file is train.50k.json (and a train.3k.json subset); train.json is
  read first when present.
  """
  name = "ocnli"
  folders = ("ocnli_public", "ocnli")
  labels = _MNLI_LABELS
  files = dict(ClueProcessor.files,
               train=(("train.json",), ("train.50k.json",), ("train.3k.json",)))


class CmnliProcessor(ClueProcessor):
  """CMNLI: the Chinese MNLI/XNLI pairs of CLUE, OCNLI's fields and labels."""
  name = "cmnli"
  folders = ("cmnli_public", "cmnli")
  labels = _MNLI_LABELS


class CslProcessor(ClueProcessor):
  """CSL: are the keywords (a list) the paper's own (1) or not (0), given its abstract?

  As CLUE's baseline: text_a is the keywords joined by a space, text_b the abstract.
  """
  name = "csl"
  folders = ("csl_public", "csl")
  labels = ("0", "1")

  def _texts(self, row, path, number):
    keywords = _field(row, "keyword", path, number)
    if not (isinstance(keywords, list) and all(isinstance(k, str) for k in keywords)):
      raise DataError(f"{path}, line {number}: field 'keyword' must be a list of strings")
    return " ".join(keywords), _text_field(row, "abst", path, number)


class LcqmcProcessor(DataProcessor):
  """LCQMC: do two questions ask the same (1) or not (0)? albert_zh's train/dev/test.txt.

  Rows are `text_a<TAB>text_b<TAB>label`; test rows may lack the label, and their index is
  the guid. albert_zh skips each file's first line unconditionally, which drops a row of the
  headerless release; here the first row is skipped only when it is a header (a field
  `label` or `text_a`).
  """
  name = "lcqmc"
  folders = ("lcqmc", "LCQMC")
  labels = ("0", "1")
  submission = "clue"

  def _read_split(self, split_name, data_dir):
    if split_name not in ("train", "dev", "test"):
      raise ValueError(f"unknown split {split_name!r}")
    folder = self.task_dir(data_dir)
    (path,) = _find_files(folder, ((f"{split_name}.txt",), (f"{split_name}.tsv",)),
                          f"{self.name} {split_name} data")
    rows = read_rows(path)
    if {"label", "text_a"} & {field.strip().lower() for field in rows[0][1]}:
      rows = rows[1:]
    labeled = split_name != "test"
    examples = []
    for n, (number, fields) in enumerate(rows):
      if len(fields) < (3 if labeled else 2):
        raise DataError(f"{path}, line {number}: expected text_a, text_b"
                        f"{', label' if labeled else ''} separated by tabs, found "
                        f"{len(fields)} column(s)")
      if labeled:
        label, guid = _parse_label(fields[2], self.labels, path, number), f"{split_name}-{n}"
      else:
        label, guid = _placeholder_label(self.labels), n
      examples.append(InputExample(guid=guid, text_a=fields[0], text_b=fields[1], label=label))
    return examples


class ChnSentiCorpProcessor(CsvProcessor):
  """ChnSentiCorp: is a review positive (1) or negative (0)? TSV with header `label, text_a`.

  train/dev/test.tsv; the test file's labels are ignored and its row index is the guid.
  """
  name = "chnsenticorp"
  submission = "clue"

  def __init__(self):
    super().__init__("text_a", label_column="label", delimiter="\t", labels=("0", "1"))

  def _read_split(self, split_name, data_dir):
    examples = super()._read_split(split_name, data_dir)
    if split_name == "test":
      examples = [dataclasses.replace(e, guid=n) for n, e in enumerate(examples)]
    return examples


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli-mm": MisMnliProcessor,
    "mismnli": MisMnliProcessor,  # the original run_classifier.py's name
    "mrpc": MrpcProcessor,
    "qnli": QnliProcessor,
    "qqp": QqpProcessor,
    "rte": RteProcessor,
    "sst-2": Sst2Processor,
    "sts-b": StsbProcessor,
    "wnli": WnliProcessor,
    "ax": AxProcessor,
    "afqmc": AfqmcProcessor,
    "tnews": TnewsProcessor,
    "iflytek": IflytekProcessor,
    "ocnli": OcnliProcessor,
    "cmnli": CmnliProcessor,
    "csl": CslProcessor,
    "lcqmc": LcqmcProcessor,
    "chnsenticorp": ChnSentiCorpProcessor,
    "csv": CsvProcessor,
}


def get_processor(task_name, **csv_options):
  """The processor of `task_name` (case-insensitive); `csv_options` go to CsvProcessor.

  A DataProcessor passes through unchanged, so callers may take a name or a processor.
  """
  if isinstance(task_name, DataProcessor):
    if csv_options:
      raise ValueError("csv options apply to a task name, not to a processor")
    return task_name
  key = str(task_name).strip().lower()
  if key not in PROCESSORS:
    raise ValueError(f"unknown task {task_name!r}; valid tasks: {', '.join(PROCESSORS)}")
  if key == "csv":
    if not csv_options.get("text_a_column"):
      raise ValueError("the csv task needs text_a_column, the header name of the text column")
    try:
      return CsvProcessor(**csv_options)
    except TypeError as e:
      raise ValueError(f"bad csv task options {sorted(csv_options)}: {e}") from e
  if csv_options:
    raise ValueError(f"options {sorted(csv_options)} apply only to the csv task, "
                     f"not to {key!r}")
  return PROCESSORS[key]()


# --- Features and TFRecords -------------------------------------------------------------------
def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
  """Packed, padded features (dicts of python lists) of `examples`, in order.

  Each dict has `input_ids`, `input_mask`, `segment_ids` ([max_seq_length] each, from
  `encode_pair`), `label_id` (the label's index in `label_list`; the float label when
  `label_list` is None, i.e. regression) and `is_real_example` (False only for
  PaddingInputExample).
  """
  regression = label_list is None
  label_map = None if regression else {label: i for i, label in enumerate(label_list)}
  features = []
  for example in examples:
    if isinstance(example, PaddingInputExample):
      features.append({"input_ids": [0] * max_seq_length, "input_mask": [0] * max_seq_length,
                       "segment_ids": [0] * max_seq_length,
                       "label_id": 0.0 if regression else 0, "is_real_example": False})
      continue
    if regression:
      label_id = float(example.label)
    elif example.label in label_map:
      label_id = label_map[example.label]
    else:
      raise ValueError(f"example {example.guid}: label {example.label!r} is not one of "
                       f"{list(label_list)}")
    packed = encode_pair(tokenizer, example.text_a, example.text_b, max_seq_length)
    if len(features) < 3:
      logger.debug("example %s: %s", example.guid, " ".join(packed["tokens"]))
    features.append({"input_ids": packed["input_ids"], "input_mask": packed["input_mask"],
                     "segment_ids": packed["segment_ids"], "label_id": label_id,
                     "is_real_example": True})
  return features


def feature_spec(max_seq_length, regression):
  """`tf.io.FixedLenFeature`s of a classification record, the original's names."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }


def write_features_tfrecord(features, path):
  """Writes features as tf.train.Examples (float label_ids for regression); returns count.

  The file appears under `path` only once complete (written to a temporary name, renamed).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  features = list(features)
  regression = bool(features) and isinstance(features[0]["label_id"], float)

  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  def serialized():
    for feature in features:
      label = feature["label_id"]
      label_feature = (tf.train.Feature(float_list=tf.train.FloatList(value=[label]))
                       if regression else int_feature([label]))
      yield tf.train.Example(features=tf.train.Features(feature={
          "input_ids": int_feature(feature["input_ids"]),
          "input_mask": int_feature(feature["input_mask"]),
          "segment_ids": int_feature(feature["segment_ids"]),
          "label_ids": label_feature,
          "is_real_example": int_feature([int(feature["is_real_example"])]),
      })).SerializeToString()
  return write_tfrecord_atomically(path, serialized())


def _check_record_length(path, max_seq_length):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  first = next(iter(tf.data.TFRecordDataset([path]).take(1)), None)
  if first is None:
    raise ValueError(f"{path} holds no records")
  example = tf.train.Example.FromString(first.numpy()).features.feature
  if "input_ids" not in example or "label_ids" not in example:
    raise ValueError(f"{path} is not classification data: it has no input_ids/label_ids")
  got = len(example["input_ids"].int64_list.value)
  if got != max_seq_length:
    raise ValueError(f"{path} has input_ids of length {got} but max_seq_length is "
                     f"{max_seq_length}; pass {got} or recreate the file")


def classification_dataset(path, max_seq_length, batch_size, is_training, regression,
                           seed=None, drop_remainder=None, shuffle_buffer=100):
  """Batches of parsed records with the model's input names.

  Yields dicts: `input_word_ids`, `input_mask`, `input_type_ids` (int32 [batch, seq]),
  `label_ids` (int32, or float32 for regression, [batch]) and `is_real_example` (int32
  [batch]). Training repeats and shuffles records with the original's buffer of 100 and
  drops the last partial batch; eval keeps file order and, unless `drop_remainder`, every
  record. `path` is one file or a list of files.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  files = [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else list(path)
  for file in files:
    if not tf.io.gfile.exists(file):
      raise FileNotFoundError(f"classification TFRecord file not found: {file}")
  _check_record_length(files[0], max_seq_length)
  spec = feature_spec(max_seq_length, regression)

  def to_model_inputs(records):
    example = tf.io.parse_example(records, spec)
    example = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
               for k, v in example.items()}
    return {"input_word_ids": example["input_ids"], "input_mask": example["input_mask"],
            "input_type_ids": example["segment_ids"], "label_ids": example["label_ids"],
            "is_real_example": example["is_real_example"]}

  dataset = tf.data.TFRecordDataset(files)
  if is_training:
    dataset = dataset.repeat().shuffle(shuffle_buffer, seed=seed)
  if drop_remainder is None:
    drop_remainder = is_training
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  return dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
      tf.data.AUTOTUNE)


# --- Predictions ------------------------------------------------------------------------------
def write_glue_predictions(task_name, predictions, path, guids=None):
  """Writes a GLUE submission file: header `index\\tprediction`, then one row per example.

  Args:
    task_name: a task name or processor.
    predictions: label ids [n] (or scores [n, num_labels], argmaxed) for classification,
      written as label names; float scores [n] for regression, written as numbers.
    path: the file, replaced atomically (a temporary name in the same folder, renamed).
    guids: the `index` column, e.g. the test examples' guids; default 0..n-1.
  Returns:
    the number of rows written.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  processor = get_processor(task_name)
  predictions = np.asarray(predictions)
  labels = processor.get_labels()
  if labels is not None and predictions.ndim == 2:
    predictions = predictions.argmax(axis=-1)
  if labels is None and predictions.ndim == 2 and predictions.shape[1] == 1:
    predictions = predictions[:, 0]
  if predictions.ndim != 1:
    raise ValueError(f"predictions must have shape [n], got {predictions.shape}")
  guids = list(range(len(predictions))) if guids is None else list(guids)
  if len(guids) != len(predictions):
    raise ValueError(f"{len(guids)} guids for {len(predictions)} predictions")
  rows = ["index\tprediction"]
  if labels is None:
    if not np.all(np.isfinite(predictions.astype(np.float64))):
      raise ValueError("predictions hold NaN or infinity")
    rows += [f"{guid}\t{float(p):.6f}" for guid, p in zip(guids, predictions)]
  else:
    ids = _label_ids(predictions, labels, processor.name)
    rows += [f"{guid}\t{labels[i]}" for guid, i in zip(guids, ids)]
  path = os.fspath(path)
  folder = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"output folder does not exist: {folder} (for {path})")
  files.write_text(path, "\n".join(rows) + "\n")
  return len(guids)


def _label_ids(predictions, labels, task):
  """int64 label ids [n] of `predictions` (ids, or scores [n, num_labels] argmaxed)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  predictions = np.asarray(predictions)
  if predictions.ndim == 2:
    predictions = predictions.argmax(axis=-1)
  if predictions.ndim != 1:
    raise ValueError(f"predictions must have shape [n], got {predictions.shape}")
  ids = predictions.astype(np.int64)
  if ids.size and (ids.min() < 0 or ids.max() >= len(labels) or np.any(ids != predictions)):
    raise ValueError(f"predictions must be label ids in [0, {len(labels)}) for {task}")
  return ids


def write_clue_predictions(task_name, predictions, path, ids=None):
  """Writes a CLUE submission file: one JSON line per example, `{"id": .., "label": ".."}`.

  Args:
    task_name: a task name or processor with a label set (a Chinese task).
    predictions: label ids [n], or scores [n, num_labels] (argmaxed); written as label strings.
    path: the file (`<task>_predict.json`), replaced atomically.
    ids: each row's `id`, e.g. the test examples' guids (the test file's own ids, kept as
      the file has them); default 0..n-1.
  Returns:
    the number of rows written.
  """
  processor = get_processor(task_name)
  labels = processor.get_labels()
  if labels is None:
    raise ValueError(f"{processor.name} is a regression task; CLUE submissions hold labels")
  label_ids = _label_ids(predictions, labels, processor.name)
  ids = list(range(len(label_ids))) if ids is None else list(ids)
  if len(ids) != len(label_ids):
    raise ValueError(f"{len(ids)} ids for {len(label_ids)} predictions")
  # ensure_ascii=False: ids and labels stay readable (CLUE's own files are utf-8).
  text = "".join(json.dumps({"id": i, "label": labels[p]}, ensure_ascii=False) + "\n"
                 for i, p in zip(ids, label_ids))
  files.write_text(path, text)
  return len(ids)
