"""Named-entity data: CoNLL columns, CLUENER JSON lines, tokens+tags JSON lines -> examples.

  examples = read_examples("conll", default_file("conll", "data/conll2003", "train"))
  labels = label_list(examples)                 # ["O", "B-LOC", "I-LOC", "B-MISC", ...]
  dev = read_examples("conll", default_file("conll", "data/conll2003", "dev"))
  check_labels(dev, labels)                     # an unseen tag is an error naming its line
  spans = tags_to_spans(dev[0].tags)            # [("LOC", 0, 1), ...], end exclusive
  write_conll_predictions("dev_predictions.txt", dev[0].source[0], predicted_tags)

One internal tag scheme: BIO (IOB2), every entity opens with B-. Every reader converts its
file's scheme to it, so features, metrics and the CRF's transitions see one alphabet, and
the CoNLL writer converts back to the file's own scheme, so conlleval reads the output as it
read the input. The schemes (`tag_scheme`):
- `bio`: B- opens, I- continues the same type; an I- that continues nothing is an error;
- `iob1`: as conlleval reads it: I- opens an entity unless it continues one of the same type,
  B- opens one too (the scheme uses it only to split two adjacent entities of one type);
- `bioes` / `bmes`: B- opens, I- (M-) continues, E- closes, S- is a one-word entity; an
  entity left open, or an I-/E- that continues nothing, is an error;
- `auto` (per file): any M- -> bmes; else any E-/S- -> bioes; else an I- that continues
  nothing -> iob1; else bio.
CLUENER's closed [start, end] character intervals become BIO tags over one word per
character; `offsets` keeps each word's character offset in `text`, so predicted spans map
back to exact character offsets for CLUE's `cluener_predict.json`.

Pure Python (no TensorFlow). Bad content is a `DataError` (a ValueError, shared with the
classification data: data/reading.py) naming the file and its 1-based line; a missing file a
FileNotFoundError naming the split's flag and path.
"""

import collections
import dataclasses
import json
import logging
import os
import re

from albert_tf import files
# One reader of JSON lines (BOM, CRLF, Latin-1 lines tolerated) and one error type for all
# fine-tuning data: a DataError (a ValueError) names the file and line.
from albert_tf.data.reading import DataError, read_json_lines

SCHEMES = ("auto", "iob1", "bio", "bioes", "bmes")
FORMATS = ("conll", "cluener", "jsonl")
OUTSIDE = "O"

# What each scheme's prefixes mean: open, inside, end, single.
_ROLES = {
    "bio": {"B": "open", "I": "inside"},
    "iob1": {"B": "open", "I": "inside"},
    "bioes": {"B": "open", "I": "inside", "E": "end", "S": "single"},
    "bmes": {"B": "open", "M": "inside", "E": "end", "S": "single"},
}
# Schemes whose entities must be closed by E- (or be S-).
_CLOSED_SCHEMES = ("bioes", "bmes")

_DEFAULT_NAMES = {
    "conll": {"train": ("train.txt",), "dev": ("valid.txt", "dev.txt"), "test": ("test.txt",)},
    "cluener": {"train": ("train.json",), "dev": ("dev.json",), "test": ("test.json",)},
    "jsonl": {"train": ("train.jsonl",), "dev": ("dev.jsonl",), "test": ("test.jsonl",)},
}
_SPLIT_FLAGS = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}

_DOCSTART = "-DOCSTART-"
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class NerExample:
  """One sentence: `words[i]` carries BIO tag `tags[i]` (`tags` is None when unlabeled).

  `guid`: the row's own `id` when it has one (CLUENER test: the submission's id), else the
  sentence's 0-based index in its file. `source`: (file, 1-based line of the first word).
  `scheme`: the file's tag scheme as read (None for CLUENER and unlabeled files), which the
  CoNLL writer converts back to. `text` / `offsets`: for character-level data, the original
  text and each word's character offset in it. `one_line_per_word`: True for CoNLL files.
  """
  guid: object
  words: list
  tags: list
  source: tuple
  scheme: str = None
  text: str = None
  offsets: list = None
  one_line_per_word: bool = False

  def line_of(self, index):
    """The 1-based line of word `index` (a CoNLL file holds one word per line)."""
    return self.source[1] + (index if self.one_line_per_word else 0)


class _SequenceError(ValueError):
  """A tag sequence invalid under its scheme, at word `index` (the reader adds file/line)."""

  def __init__(self, index, message):
    super().__init__(message)
    self.index = index


# ---------------------------------------------------------------------------------------------
# Tags <-> spans.


def _split_tag(tag, scheme, index):
  """(role, type) of `tag` under `scheme`; ("outside", None) for O."""
  if tag == OUTSIDE:
    return "outside", None
  prefix, dash, kind = tag.partition("-")
  role = _ROLES[scheme].get(prefix)
  if not dash or not kind or role is None:
    allowed = "/".join(p + "-" for p in _ROLES[scheme])
    raise _SequenceError(index, f"tag {tag!r} is not O or {allowed}TYPE ({scheme} scheme)")
  return role, kind


def decode_tags(tags, scheme):
  """Spans [(type, start, end_exclusive)] of `tags` under `scheme`; _SequenceError if invalid.

  bio/iob1 continue an entity with I- of its type; iob1 (and the lenient reading of
  predictions, `tags_to_spans`) opens one with any I- that continues nothing, as conlleval
  does; bio, bioes and bmes refuse it, and bioes/bmes refuse an entity left open.
  """
  spans, open_span = [], None  # open_span: [type, start]
  closed = scheme in _CLOSED_SCHEMES
  for i, tag in enumerate(tags):
    role, kind = _split_tag(tag, scheme, i)
    continues = open_span is not None and open_span[0] == kind
    if role in ("inside", "end") and not continues:
      if scheme != "iob1":
        raise _SequenceError(i, f"tag {tag!r} continues no entity ({scheme}: an entity of "
                                f"{kind} opens with B-{kind})")
      role = "open"
    if role in ("outside", "open", "single") and open_span is not None:
      if closed:
        raise _SequenceError(i, f"entity {open_span[0]} opened at word {open_span[1]} is not "
                                f"closed with E- before {tag!r}")
      spans.append((open_span[0], open_span[1], i))
      open_span = None
    if role == "open":
      open_span = [kind, i]
    elif role == "single":
      spans.append((kind, i, i + 1))
    elif role == "end":
      spans.append((kind, open_span[1], i + 1))
      open_span = None
  if open_span is not None:
    if closed:
      raise _SequenceError(len(tags) - 1, f"entity {open_span[0]} opened at word "
                                          f"{open_span[1]} is not closed with E-")
    spans.append((open_span[0], open_span[1], len(tags)))
  return spans


def encode_spans(spans, n, scheme):
  """The `n` tags of non-overlapping `spans` [(type, start, end_exclusive)] under `scheme`."""
  tags = [OUTSIDE] * n
  previous = None  # the span before, for iob1's B- between adjacent same-type entities
  inside = "M" if scheme == "bmes" else "I"
  for kind, start, end in sorted(spans, key=lambda s: s[1]):
    if not 0 <= start < end <= n:
      raise ValueError(f"span {(kind, start, end)} is outside the {n} words")
    if any(t != OUTSIDE for t in tags[start:end]):
      raise ValueError(f"span {(kind, start, end)} overlaps another span")
    tags[start:end] = _entity_tags(kind, end - start, scheme, inside,
                                   adjacent=previous == (kind, start))
    previous = (kind, end)
  return tags


def _entity_tags(kind, length, scheme, inside, adjacent):
  if scheme == "iob1":
    return ["B-" + kind if adjacent else "I-" + kind] + ["I-" + kind] * (length - 1)
  if scheme == "bio":
    return ["B-" + kind] + ["I-" + kind] * (length - 1)
  if length == 1:
    return ["S-" + kind]
  return ["B-" + kind] + [f"{inside}-{kind}"] * (length - 2) + ["E-" + kind]


def tags_to_spans(tags):
  """[(type, start, end_exclusive)] over word indices of internal (BIO) tags.

  Read leniently, as conlleval reads predictions: an I- that continues nothing opens an
  entity, so a model's output without a CRF still scores as conlleval would score it.
  """
  return decode_tags(tags, "iob1")


def spans_to_tags(spans, n):
  """The `n` internal (BIO) tags of non-overlapping `spans` [(type, start, end_exclusive)]."""
  return encode_spans(spans, n, "bio")


def convert_tags(tags, from_scheme, to_scheme):
  """`tags` read under `from_scheme` (strictly), written under `to_scheme`."""
  return encode_spans(decode_tags(tags, from_scheme), len(tags), to_scheme)


def detect_scheme(tag_sequences):
  """The scheme `auto` picks for a file's tag sequences (see the module docstring)."""
  prefixes = {t.partition("-")[0] for tags in tag_sequences for t in tags if t != OUTSIDE}
  if "M" in prefixes:
    return "bmes"
  if prefixes & {"E", "S"}:
    return "bioes"
  for tags in tag_sequences:
    for previous, tag in zip([OUTSIDE] + list(tags), tags):
      if tag.startswith("I-") and previous[2:] != tag[2:]:
        return "iob1"
  return "bio"


def _to_internal(path, examples, tag_scheme):
  """Converts each labeled example's file-scheme tags to BIO in place; returns the scheme."""
  if tag_scheme not in SCHEMES:
    raise ValueError(f"tag_scheme={tag_scheme!r} is not one of {SCHEMES}")
  labeled = [e for e in examples if e.tags is not None]
  if not labeled:
    return None
  scheme = detect_scheme([e.tags for e in labeled]) if tag_scheme == "auto" else tag_scheme
  for example in labeled:
    try:
      example.tags = convert_tags(example.tags, scheme, "bio")
    except _SequenceError as e:
      where = f"line {example.line_of(e.index)}: {e}"
      if tag_scheme != "auto" or scheme == "bio":
        raise DataError(f"{path}, {where}") from None
      # The tag that made `auto` pick the scheme may be the stray one, not the line it fails.
      tag, line = _scheme_evidence(labeled, scheme)
      raise DataError(
          f"{path}, line {line}: tag {tag!r} made --tag_scheme=auto read this file as "
          f"{scheme}, under which {where}. If {tag!r} is a stray tag, mend line {line}; "
          "else give --tag_scheme") from None
    example.scheme = scheme
  return scheme


def _scheme_evidence(examples, scheme):
  """(tag, line) of the first tag for which `detect_scheme` picked `scheme` (not bio)."""
  for example in examples:
    previous = OUTSIDE
    for i, tag in enumerate(example.tags):
      prefix, kind = tag.partition("-")[0], tag[2:]
      if ((scheme == "bmes" and prefix == "M") or (scheme == "bioes" and prefix in ("E", "S"))
          or (scheme == "iob1" and prefix == "I" and previous[2:] != kind)):
        return tag, example.line_of(i)
      previous = tag
  raise AssertionError(f"no tag of the examples makes them {scheme}")


# ---------------------------------------------------------------------------------------------
# CoNLL column files (also one-character-per-line Chinese files).


def _conll_rows(path):
  """(line number, raw line with its ending, columns) for every line of `path`.

  Columns are [] for a blank line and None for a -DOCSTART- line; both end a sentence.
  Lines are split on spaces and tabs only, so a full-width space (U+3000) stays a token.
  """
  rows = []
  with _open(path, newline="") as f:
    try:
      for number, raw in enumerate(f, 1):
        content = raw.rstrip("\r\n").strip(" \t")
        if number == 1:
          content = content.lstrip("\ufeff")
        columns = _COLUMN_SEPARATOR.split(content) if content else []
        rows.append((number, raw, None if columns[:1] == [_DOCSTART] else columns))
    except UnicodeDecodeError:
      raise _not_utf8(path) from None
  return rows


def _not_utf8(path):
  """A DataError naming the first line of `path` that is not UTF-8, and its bad byte."""
  with open(path, "rb") as f:
    for number, line in enumerate(f, 1):
      try:
        line.decode("utf-8")
      except UnicodeDecodeError as e:
        return DataError(f"{path}, line {number}: byte 0x{line[e.start]:02x} at column "
                         f"{e.start + 1} is not UTF-8 (convert the file, e.g. `iconv -f GBK "
                         "-t UTF-8`)")
  return DataError(f"{path}: not UTF-8")


def _conll_sentences(rows):
  """Groups rows into sentences: lists of (line number, columns); empty ones skipped."""
  sentence = []
  for number, _, columns in rows:
    if columns:
      sentence.append((number, columns))
    elif sentence:
      yield sentence
      sentence = []
  if sentence:
    yield sentence


def _conll_labeled(path, sentences):
  """True when any token line has a tag column; then every token line must have as many
  columns as most of them: a line that lacks one (CoNLL-2003's NER column) would otherwise
  give another column (its chunk tag) as the tag."""
  widths = [(n, len(c)) for s in sentences for n, c in s]
  if not any(w > 1 for _, w in widths):
    return False
  bare = next((n for n, w in widths if w == 1), None)
  if bare is not None:
    raise DataError(f"{path}, line {bare}: no tag column (other lines of the file have one)")
  counts = collections.Counter(w for _, w in widths)
  usual, lines = counts.most_common(1)[0]
  odd = next(((n, w) for n, w in widths if w != usual), None)
  if odd is not None:
    raise DataError(f"{path}, line {odd[0]}: {odd[1]} columns, where {lines} of the file's "
                    f"{len(widths)} token lines have {usual} (the tag is the last column, so a "
                    "missing or extra column would give this line a wrong tag)")
  return True


def read_conll(path, tag_scheme="auto"):
  """NerExamples of a CoNLL file: the token is the first column, the tag the last.

  Sentences are separated by blank lines; -DOCSTART- lines are skipped; columns by spaces
  or tabs. A file without any tag column (a test file) reads as unlabeled.
  """
  path = os.fspath(path)
  sentences = list(_conll_sentences(_conll_rows(path)))
  labeled = _conll_labeled(path, sentences)
  examples = [NerExample(guid=i, words=[c[0] for _, c in s],
                         tags=[c[-1] for _, c in s] if labeled else None,
                         source=(path, s[0][0]), one_line_per_word=True)
              for i, s in enumerate(sentences)]
  _to_internal(path, examples, tag_scheme)
  return examples


def write_conll_predictions(output_path, input_path, predictions, tag_scheme="auto"):
  """Writes `input_path`'s lines with each token's predicted tag appended as a last column.

  `predictions`: one list of internal (BIO) tags per sentence, in `read_conll`'s order.
  Blank and -DOCSTART- lines are kept as they are, so conlleval reads the output (gold in the
  column before, prediction last). Tags are written in the file's scheme (`tag_scheme`, or
  the one `auto` detects in the input; bio for an unlabeled input), through spans, so a
  prediction that is not valid BIO is written as conlleval would read it.
  """
  input_path = os.fspath(input_path)
  rows = list(_conll_rows(input_path))
  sentences = list(_conll_sentences(rows))
  scheme = _output_scheme(input_path, sentences, tag_scheme)
  by_line = _predicted_by_line(input_path, sentences, predictions, scheme)
  lines = []
  for number, raw, _ in rows:
    lines.append(_append_column(raw, by_line[number]) if number in by_line else raw)
  files.write_text(output_path, "".join(lines))


def _output_scheme(path, sentences, tag_scheme):
  if tag_scheme != "auto":
    return tag_scheme
  if not _conll_labeled(path, sentences):
    return "bio"
  return detect_scheme([[c[-1] for _, c in s] for s in sentences])


def _predicted_by_line(path, sentences, predictions, scheme):
  """{line number: predicted tag in `scheme`}, after checking the predictions fit the file."""
  predictions = list(predictions)
  if len(predictions) != len(sentences):
    raise ValueError(f"{len(predictions)} predicted sentences for the {len(sentences)} "
                     f"sentences of {path}")
  by_line = {}
  for sentence, tags in zip(sentences, predictions):
    if len(tags) != len(sentence):
      raise ValueError(f"{path}, line {sentence[0][0]}: {len(tags)} predicted tags for "
                       f"{len(sentence)} tokens")
    written = encode_spans(tags_to_spans(tags), len(tags), scheme)
    by_line.update((number, tag) for (number, _), tag in zip(sentence, written))
  return by_line


def _append_column(raw, tag):
  """`raw` with ` tag` (or a tab and tag, in a tab-separated file) before its line ending."""
  content = raw.rstrip("\r\n")
  ending = raw[len(content):]
  content = content.rstrip(" \t")
  return content + ("\t" if "\t" in content else " ") + tag + ending


# ---------------------------------------------------------------------------------------------
# JSON lines: CLUENER and tokens + tags.


def _check_all_or_none_labeled(path, numbered_flags):
  """A file is labeled throughout or not at all: a missing label elsewhere is an error."""
  flags = [f for _, f in numbered_flags]
  if any(flags) and not all(flags):
    number = next(n for n, f in numbered_flags if not f)
    raise DataError(f"{path}, line {number}: no labels (other lines of the file have them)")


def read_cluener(path):
  """NerExamples of a CLUENER2020 file: one word per character, BIO tags from its spans.

  Each line is `{"id"?, "text", "label"?: {type: {entity: [[start, end], ...]}}}` with
  closed character intervals; `text[start:end+1]` must be the entity. Test files (no
  "label") read as unlabeled and keep their "id" as guid.
  """
  path = os.fspath(path)
  examples, flags = [], []
  for number, row in read_json_lines(path):
    text = row.get("text")
    if not isinstance(text, str):
      raise DataError(f"{path}, line {number}: \"text\" must be a string")
    flags.append((number, "label" in row))
    tags = None
    if "label" in row:
      tags = _cluener_tags(path, number, text, row["label"])
    # A row without text is kept (no words): its submission line must still be written.
    examples.append(NerExample(guid=row.get("id", len(examples)), words=list(text),
                               tags=tags, source=(path, number), text=text,
                               offsets=list(range(len(text)))))
  _check_all_or_none_labeled(path, flags)
  return examples


def _cluener_tags(path, number, text, label):
  """BIO tags of one CLUENER label object, after checking every span against the text."""
  where = f"{path}, line {number}"
  spans = list(_cluener_spans(where, label))
  for kind, entity, start, end in spans:
    if not 0 <= start <= end < len(text):
      raise DataError(f"{where}: span [{start}, {end}] of {kind} {entity!r} is outside "
                         f"the text ({len(text)} characters)")
    if text[start:end + 1] != entity:
      raise DataError(f"{where}: span [{start}, {end}] of {kind} {entity!r} is "
                         f"{text[start:end + 1]!r} in the text")
  kept = _drop_nested(where, spans)
  return spans_to_tags([(kind, start, end + 1) for kind, _, start, end in kept], len(text))


def _drop_nested(where, spans):
  """`spans` (closed, sorted by start) less those nested in a longer one; crossing is an error.

  BIO cannot nest. CLUENER's train file nests one span (line 1507: company 招商银行 inside
  a book title); the outer, longer span is kept and the inner one dropped with a warning.
  Spans that cross, or cover the same characters twice, have no such reading.
  """
  kept = []
  for span in sorted(spans, key=lambda s: (s[2], -s[3])):
    outer = kept[-1] if kept else None
    if outer is None or span[2] > outer[3]:
      kept.append(span)
    elif span[3] <= outer[3] and span[3] - span[2] < outer[3] - outer[2]:
      logger.warning("%s: span [%d, %d] of %s %r is nested in [%d, %d] of %s %r; BIO cannot "
                     "nest, so only the outer one is kept", where, span[2], span[3], span[0],
                     span[1], outer[2], outer[3], outer[0], outer[1])
    else:
      raise DataError(f"{where}: span [{span[2]}, {span[3]}] of {span[0]} {span[1]!r} "
                         f"overlaps [{outer[2]}, {outer[3]}] of {outer[0]} {outer[1]!r}")
  return kept


def _cluener_spans(where, label):
  """(type, entity, start, end) of each closed span of a label object, its types checked."""
  if not isinstance(label, dict):
    raise DataError(f"{where}: \"label\" must be an object {{type: {{entity: spans}}}}")
  for kind, entities in label.items():
    if not isinstance(entities, dict):
      raise DataError(f"{where}: label {kind!r} must map entities to span lists")
    for entity, spans in entities.items():
      if not isinstance(spans, list) or not all(_is_pair(s) for s in spans):
        raise DataError(f"{where}: spans of {kind} {entity!r} must be [[start, end], ...]")
      for start, end in spans:
        yield kind, entity, start, end


def _is_pair(span):
  return (isinstance(span, list) and len(span) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) for x in span))


def read_jsonl(path, tag_scheme="auto"):
  """NerExamples of JSON lines `{"id"?, "tokens": [str], "tags"?: [str]}` (users' own data).

  `tags` are in the file's scheme (`tag_scheme`, or detected); a file without "tags" reads
  as unlabeled.
  """
  path = os.fspath(path)
  examples, flags = [], []
  for number, row in read_json_lines(path):
    tokens, tags = row.get("tokens"), row.get("tags")
    _check_strings(path, number, "tokens", tokens)
    flags.append((number, tags is not None))
    if tags is not None:
      _check_strings(path, number, "tags", tags)
      if len(tags) != len(tokens):
        raise DataError(f"{path}, line {number}: {len(tokens)} tokens but {len(tags)} tags")
    # A row without tokens is kept (no words): its predictions line must still be written.
    examples.append(NerExample(guid=row.get("id", len(examples)), words=tokens, tags=tags,
                               source=(path, number)))
  _check_all_or_none_labeled(path, flags)
  _to_internal(path, examples, tag_scheme)
  return examples


def _check_strings(path, number, key, value):
  if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
    raise DataError(f"{path}, line {number}: {key!r} must be a list of non-empty strings")


# ---------------------------------------------------------------------------------------------
# Formats, files and labels.


def read_examples(data_format, path, tag_scheme="auto"):
  """The NerExamples of `path` in `data_format` (conll, cluener or jsonl).

  CLUENER's spans have no tag scheme, so `tag_scheme` applies to conll and jsonl only.
  """
  if data_format == "conll":
    return read_conll(path, tag_scheme)
  if data_format == "cluener":
    return read_cluener(path)
  if data_format == "jsonl":
    return read_jsonl(path, tag_scheme)
  raise ValueError(f"data_format={data_format!r} is not one of {FORMATS}")


def default_file(data_format, data_dir, split):
  """The path of `split` (train, dev or test) in `data_dir` under the format's usual names.

  CoNLL-2003 calls its dev split valid.txt; dev.txt is accepted too.
  """
  if data_format not in _DEFAULT_NAMES:
    raise ValueError(f"data_format={data_format!r} is not one of {FORMATS}")
  names = _DEFAULT_NAMES[data_format][split]
  paths = [os.path.join(os.fspath(data_dir), name) for name in names]
  for path in paths:
    if os.path.isfile(path):
      return path
  raise FileNotFoundError(f"the {split} split ({_SPLIT_FLAGS[split]}) needs "
                          f"{' or '.join(paths)}: no such file")


def label_list(examples, given=None):
  """The model's labels: "O", then B-TYPE, I-TYPE for each entity type.

  From `given` (`--labels`: a list or comma-separated string of tags in any scheme, or of
  bare types; their order is kept, so label ids stay stable across runs), else the types of
  the training `examples`, sorted. A `given` list that is already a whole BIO tag set (O, and
  B- and I- of each type, each once) is kept exactly as it is, in its order: the output order
  of a tagger trained elsewhere (a Hugging Face folder without `id2label`).
  """
  if given is not None:
    if isinstance(given, str):
      given = [g.strip() for g in given.split(",") if g.strip()]
    if is_tag_set(given):
      return list(given)
    types = _given_types(given)
  else:
    types = sorted({t[2:] for e in examples if e.tags for t in e.tags if t != OUTSIDE})
  return [OUTSIDE] + [f"{p}-{kind}" for kind in types for p in ("B", "I")]


def is_tag_set(labels):
  """Whether `labels` are a model's BIO tags: O once, and B-TYPE and I-TYPE of each type."""
  labels = list(labels)
  if len(set(labels)) != len(labels) or labels.count(OUTSIDE) != 1:
    return False
  types = collections.Counter()
  for label in labels:
    if label == OUTSIDE:
      continue
    prefix, dash, kind = str(label).partition("-")
    if not (prefix in ("B", "I") and dash and kind):
      return False
    types[kind] += 1
  return all(n == 2 for n in types.values())


def check_tag_set(labels, source):
  """Refuses `labels` that are not BIO tag names (transformers' LABEL_0 .. LABEL_8, which a
  Hugging Face folder without `id2label` gives): a tagger reads entity types and the O tag
  from the names, and would otherwise serve garbled types with O counted as an entity."""
  if not is_tag_set(labels):
    shown = ", ".join(map(str, labels[:6])) + (", ..." if len(labels) > 6 else "")
    raise ValueError(
        f"{source}: the labels [{shown}] are not a tagger's BIO tags (O, and B-TYPE and I-TYPE "
        "of each type): entities cannot be read from them. Give --labels with the tag of each "
        f"of the model's {len(labels)} outputs in order (e.g. --labels=O,B-PER,I-PER,...)")


def _given_types(given):
  types = []
  for label in given:
    if label == OUTSIDE:
      continue
    prefix, dash, kind = label.partition("-")
    kind = kind if dash and prefix in ("B", "I", "M", "E", "S") and kind else label
    if kind not in types:
      types.append(kind)
  return types


def check_labels(examples, labels, path=None, source="the training file, or --labels"):
  """Raises DataError naming the file, line and tag of the first tag not in `labels`
  (`source` says where the labels came from)."""
  known = set(labels)
  for example in examples:
    for i, tag in enumerate(example.tags or ()):
      if tag not in known:
        raise DataError(f"{path or example.source[0]}, line {example.line_of(i)}: tag "
                        f"{tag!r} is not among the labels {list(labels)} (from {source})")


# ---------------------------------------------------------------------------------------------
# CLUENER submission.


def char_spans(example, spans):
  """Word spans [(type, start, end_exclusive)] of `example` as character spans of its text."""
  return [(kind, example.offsets[start], example.offsets[end - 1] + len(example.words[end - 1]))
          for kind, start, end in spans]


def spans_to_cluener_label(text, spans):
  """CLUENER's `{type: {entity: [[start, end], ...]}}` (closed) of character `spans`."""
  label = {}
  for kind, start, end in sorted(spans, key=lambda s: (s[1], s[2])):
    label.setdefault(kind, {}).setdefault(text[start:end], []).append([start, end - 1])
  return label


def write_cluener_predictions(path, examples, predictions):
  """Writes CLUE's `cluener_predict.json`: `{"id", "label"}` per line, from BIO predictions."""
  lines = []
  for example, tags in zip(examples, predictions, strict=True):
    spans = char_spans(example, tags_to_spans(tags))
    label = spans_to_cluener_label(example.text, spans)
    lines.append(json.dumps({"id": example.guid, "label": label}, ensure_ascii=False) + "\n")
  files.write_text(path, "".join(lines))


# ---------------------------------------------------------------------------------------------
# Files.


def _open(path, newline=None):
  try:
    return open(path, encoding="utf-8", newline=newline)
  except FileNotFoundError:
    raise FileNotFoundError(f"no such file: {path}") from None


