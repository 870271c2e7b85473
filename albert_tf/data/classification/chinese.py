"""The Chinese tasks, in their released layouts (SPEC.md, "Chinese (albert_zh) practice").

The CLUE tasks `afqmc`, `tnews`, `iflytek`, `ocnli`, `cmnli`, `csl` (JSON lines), albert_zh's
`lcqmc` (TSV train/dev/test.txt) and `chnsenticorp` (TSV with a header); their test guids are
the rows' own `id`s (or row indexes), which `submissions.write_clue_predictions` writes to the
CLUE submission file.
"""

import dataclasses
import logging

from albert_tf.data.classification.csv_task import CsvProcessor
from albert_tf.data.classification.glue import MNLI_LABELS
from albert_tf.data.classification.processor import DataProcessor, InputExample, placeholder_label
from albert_tf.data.reading import DataError, find_files, parse_label, read_json_lines, read_rows

logger = logging.getLogger(__name__)


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
    (path,) = find_files(folder, self.files[split_name], f"{self.name} {split_name} data")
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
        label, guid = parse_label(raw, self.labels, path, number), f"{split_name}-{n}"
      else:
        label, guid = placeholder_label(self.labels), row.get("id", n)
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
  labels = MNLI_LABELS
  files = dict(ClueProcessor.files,
               train=(("train.json",), ("train.50k.json",), ("train.3k.json",)))


class CmnliProcessor(ClueProcessor):
  """CMNLI: the Chinese MNLI/XNLI pairs of CLUE, OCNLI's fields and labels."""
  name = "cmnli"
  folders = ("cmnli_public", "cmnli")
  labels = MNLI_LABELS


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
    (path,) = find_files(folder, ((f"{split_name}.txt",), (f"{split_name}.tsv",)),
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
        label, guid = parse_label(fields[2], self.labels, path, number), f"{split_name}-{n}"
      else:
        label, guid = placeholder_label(self.labels), n
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
