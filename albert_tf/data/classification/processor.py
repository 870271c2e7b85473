"""The processor base: a task's splits, labels and metrics, and the examples it reads.

A GLUE task describes its files in class attributes (`Split`s) that `DataProcessor` reads with
the original's columns, labels and guids (google-research/albert classifier_utils.py); test
rows get the original's placeholder label (the first label, or 0.0 for STS-B). The other
processors (CLUE, LCQMC, the csv task) override `_read_split`.
"""

import dataclasses
import logging
import os

from albert_tf.data.reading import DataError, check_data_dir, find_files, parse_label, read_rows

logger = logging.getLogger(__name__)


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


def placeholder_label(labels):
  """The label of an unlabeled (test) row: the original's first label (0.0 for STS-B)."""
  return 0.0 if labels is None else labels[0]


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
  # Rows with too few columns are errors, except where the original skips them (QQP's train
  # and dev files; in a test file every row must have its line in the submission).
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
    data_dir = check_data_dir(data_dir)
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
    paths = find_files(folder, split.files, f"{self.name} {split_name} data", hint)
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
          if self.skip_malformed_rows and split_name != "test":
            skipped.append(number)
            continue
          kept = " (a test row is never skipped: the submission needs a line for each)" if (
              self.skip_malformed_rows) else ""
          raise DataError(f"{path}, line {number}: expected at least {split.min_columns} "
                          f"tab-separated columns, found {len(fields)}{kept}")
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
      label = placeholder_label(self.labels)
    else:
      label = parse_label(fields[split.label], self.labels, path, number)
      if self.score_range and not self.score_range[0] <= label <= self.score_range[1]:
        raise DataError(f"{path}, line {number}: score {label} is outside "
                        f"{list(self.score_range)}")
    return InputExample(guid=guid, text_a=fields[split.text_a], text_b=text_b, label=label)
