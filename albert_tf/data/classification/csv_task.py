"""The `csv` task: users' own CSV/TSV files, columns chosen by their header names."""

import csv
import logging
import os

from albert_tf.data.classification.processor import DataProcessor, InputExample, placeholder_label
from albert_tf.data.reading import DataError, check_data_dir, find_files, parse_label, read_rows

logger = logging.getLogger(__name__)


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
    folder = check_data_dir(data_dir)
    names = (f"{split_name}.tsv", f"{split_name}.csv")
    found = [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    if len(found) > 1:
      raise ValueError(f"both {found[0]} and {found[1]} exist; keep one")
    return find_files(folder, [(n,) for n in names], f"csv {split_name} data", hint)[0]

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
        label = parse_label(fields[index[self.label_column]], self.labels, path, number)
      else:
        label = placeholder_label(self.labels)
      examples.append(InputExample(guid=guid, text_a=fields[index[self.text_a_column]],
                                   text_b=text_b, label=label))
    return examples
