"""Reading the fine-tuning data files: TSV/CSV rows and JSON lines, one error type.

Files are read as the original reads them (TSV with csv.QUOTE_NONE, so a stray quote is text),
but BOMs, CRLF and Latin-1 lines are tolerated. Bad content is a `DataError` naming the file and
its 1-based line; a missing folder or file is a FileNotFoundError naming the path. The
classification processors and the NER readers share these.
"""

import codecs
import csv
import json
import logging
import math
import os

logger = logging.getLogger(__name__)


class DataError(ValueError):
  """Fine-tuning data that cannot be read; the message names the file and line."""


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


def check_data_dir(data_dir):
  """`data_dir` as a str, once it names an existing folder."""
  if not data_dir:
    raise ValueError(f"data_dir must name a folder, got {data_dir!r}")
  data_dir = os.fspath(data_dir)
  if not os.path.isdir(data_dir):
    raise FileNotFoundError(f"data_dir does not exist or is not a folder: {data_dir}")
  return data_dir


def find_files(folder, alternatives, what, hint=""):
  """The first alternative (a tuple of file names) whose files all exist in `folder`."""
  for names in alternatives:
    paths = [os.path.join(folder, name) for name in names]
    if all(os.path.isfile(p) for p in paths):
      return paths
  tried = " or ".join(" + ".join(os.path.join(folder, n) for n in names)
                      for names in alternatives)
  empty = " (the folder is empty)" if not os.listdir(folder) else ""
  raise FileNotFoundError(f"{what} not found: expected {tried}{empty}{hint}")


def parse_label(raw, labels, path, number):
  """A row's label: a str checked against `labels`, or (labels None) a finite float score;
  anything else is a DataError naming the file and line."""
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
