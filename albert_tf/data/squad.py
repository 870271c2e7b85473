"""SQuAD v1.1 / v2.0: examples, doc-stride features, TFRecords.

    examples = read_squad_examples("dev-v2.0.json", is_training=False, version_2=True)
    features = convert_examples_to_features(examples, tokenizer, 384, 128, 64, False)
    write_squad_tfrecord(features, "eval.tf_record")
    dataset = squad_dataset("eval.tf_record", 384, 8, is_training=False)

The original's `squad_utils.py`, with its choices: the question is cut to max_query_length
pieces; contexts are cut into windows of `max_seq_length - len(question) - 3` pieces every
`doc_stride`; a piece is scored in the window where it has the most context; training
windows that miss the answer are kept as "no answer" (start = end = 0, the [CLS] token).
Character offsets come from `tokenization.offsets` (exact) instead of the original's LCS.
The model's outputs become answers in `squad_predictions.py`; `metrics/squad.py` scores them.
"""

import collections
import dataclasses
import json
import logging
import os

from albert_tf.data.tfrecords import write_tfrecord_atomically
from albert_tf.tokenization.offsets import encode_with_offsets, token_for_char

logger = logging.getLogger(__name__)


FIRST_UNIQUE_ID = 1000000000  # the original's first feature id
_REPORT_IDS = 10  # ids listed in a warning before "... and N more"


@dataclasses.dataclass
class SquadExample:
  """One question. `start_position` is the answer's first character in `paragraph_text`
  (training only; -1 when impossible)."""
  qas_id: str
  question_text: str
  paragraph_text: str
  orig_answer_text: str = None
  start_position: int = None
  is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
  """One window of one example. Lists of the window's context pieces are aligned with
  positions `doc_offset ...` of `input_ids`."""
  unique_id: int
  example_index: int
  doc_span_index: int
  doc_offset: int
  tok_start_to_orig_index: list
  tok_end_to_orig_index: list
  token_is_max_context: list
  input_ids: list
  input_mask: list
  segment_ids: list
  p_mask: list
  start_position: int = 0
  end_position: int = 0
  is_impossible: bool = False


def listed_ids(ids):
  """The first ids of a list, for a log line: 'a, b ... and N more'."""
  shown = ", ".join(map(str, ids[:_REPORT_IDS]))
  return shown + (f" ... and {len(ids) - _REPORT_IDS} more" if len(ids) > _REPORT_IDS else "")


def load_squad_json(input_file):
  """The `data` list of a SQuAD JSON file, with errors that name the file."""
  if not os.path.exists(input_file):
    raise FileNotFoundError(f"SQuAD file not found: {input_file}")
  with open(input_file, encoding="utf-8-sig") as f:
    try:
      content = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{input_file} is not valid JSON: {e}") from e
  if not isinstance(content, dict) or not isinstance(content.get("data"), list):
    raise ValueError(f"{input_file} is not in the SQuAD layout: no top-level 'data' list")
  return content["data"]


def _check_answers(where, answers):
  """Raises a ValueError naming `where` when `answers` is not a list of answer objects with a
  string `text` and an integer `answer_start` (each may be missing: the question is then
  skipped for training, as one whose answer misses the context)."""
  if answers is None:
    return
  if not isinstance(answers, list):
    raise ValueError(f"{where}: 'answers' is a {type(answers).__name__}, not a list")
  for k, answer in enumerate(answers):
    if not isinstance(answer, dict):
      raise ValueError(f"{where}: answers[{k}] is a {type(answer).__name__}, not an object "
                       "with 'text' and 'answer_start'")
    text, start = answer.get("text", ""), answer.get("answer_start", -1)
    if not isinstance(text, str):
      raise ValueError(f"{where}: answers[{k}].text is {text!r}, not a string")
    # bool is an int in Python; JSON true is no character offset.
    if not isinstance(start, int) or isinstance(start, bool):
      raise ValueError(f"{where}: answers[{k}].answer_start is {start!r}, not an integer "
                       "character offset")


def read_squad_examples(input_file, is_training, version_2=False):
  """SquadExamples of a SQuAD v1.1 / v2.0 JSON file, in file order.

  Training takes each question's first answer. Questions are skipped, with a warning that
  lists their ids, when their answer's `answer_start` does not point at its text in the
  context, when an answerable one has no answer, or (training) when the context is empty.
  Unanswerable questions (`is_impossible`) need `version_2`. Answers of the wrong type (an
  `answer_start` that is not an integer, a `text` that is not a string) are a ValueError
  naming the file and the question, in training and prediction alike. For prediction, an id
  shared by two questions is a ValueError naming it: predictions.json and the evaluators are
  keyed by id, so all but one of those questions would be lost without a word.
  """
  examples, mismatched, no_answer, empty = [], [], [], []
  places = collections.defaultdict(list)  # id -> where its questions are
  for a, article in enumerate(load_squad_json(input_file)):
    for p, paragraph in enumerate(article.get("paragraphs", [])):
      where = f"{input_file}: data[{a}].paragraphs[{p}]"
      if "context" not in paragraph or "qas" not in paragraph:
        raise ValueError(f"{where} has no 'context' or 'qas'")
      context = paragraph["context"]
      for q, qa in enumerate(paragraph["qas"]):
        if "id" not in qa or "question" not in qa:
          raise ValueError(f"{where}.qas[{q}] has no 'id' or 'question'")
        qas_id = qa["id"]
        places[qas_id].append(f"data[{a}].paragraphs[{p}].qas[{q}]")
        _check_answers(f"{where}: question {qas_id}", qa.get("answers"))
        impossible = bool(qa.get("is_impossible", False))
        if impossible and not version_2:
          raise ValueError(f"{where}: question {qas_id} is unanswerable (is_impossible); "
                           "pass --version_2_with_negative for SQuAD v2.0 data")
        if not context.strip():
          empty.append(qas_id)
          if is_training:
            continue
        example = SquadExample(qas_id, qa["question"], context, is_impossible=impossible)
        if is_training:
          if impossible:
            example.orig_answer_text, example.start_position = "", -1
          else:
            answers = qa.get("answers") or []
            if not answers:
              no_answer.append(qas_id)
              continue
            text, start = answers[0].get("text", ""), answers[0].get("answer_start", -1)
            if not text or not 0 <= start or context[start:start + len(text)] != text:
              mismatched.append(qas_id)
              continue
            example.orig_answer_text, example.start_position = text, start
        examples.append(example)
  if not is_training:
    _check_unique_ids(input_file, places)
  if mismatched:
    logger.warning("%s: skipped %d questions whose answer_start does not point at the "
                   "answer text in the context: %s", input_file, len(mismatched),
                   listed_ids(mismatched))
  if no_answer:
    logger.warning("%s: skipped %d answerable questions without answers: %s", input_file,
                   len(no_answer), listed_ids(no_answer))
  if empty:
    logger.warning("%s: %d questions have an empty context (%s): %s", input_file, len(empty),
                   "skipped" if is_training else "they get the empty answer", listed_ids(empty))
  if not examples:
    raise ValueError(f"{input_file} holds no usable questions")
  return examples


def _check_unique_ids(input_file, places):
  shared = {i: where for i, where in places.items() if len(where) > 1}
  if shared:
    listed = "; ".join(f"{i!r} at {', '.join(where)}"
                       for i, where in list(shared.items())[:_REPORT_IDS])
    more = f" ... and {len(shared) - _REPORT_IDS} more" if len(shared) > _REPORT_IDS else ""
    raise ValueError(f"{input_file}: {len(shared)} question id(s) are used more than once: "
                     f"{listed}{more}. Predictions and scores are keyed by id, so all but one "
                     "question of each would be lost; give every question its own id")


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """(start, length) of the windows over `num_tokens` context pieces, as the original."""
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def is_max_context(spans, span_index, position):
  """Whether window `span_index` gives piece `position` its most context: the largest
  min(left, right) + 0.01 * window length, the first window on ties."""
  best_score, best_index = None, None
  for index, (start, length) in enumerate(spans):
    end = start + length - 1
    if not start <= position <= end:
      continue
    score = min(position - start, end - position) + 0.01 * length
    if best_score is None or score > best_score:
      best_score, best_index = score, index
  return span_index == best_index


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training):
  """The windows of every example, as SquadFeatures with unique ids from 1000000000.

  Packing: `[CLS] question [SEP] context window [SEP]`, segment ids 0 then 1, padded with 0;
  `p_mask` is 1 where an answer cannot be (question, [SEP], padding) and 0 on [CLS] and the
  context. Training windows that do not contain the whole answer, and unanswerable
  questions, point at [CLS] (start = end = 0, is_impossible).
  """
  if max_seq_length - max_query_length - 3 <= 0:
    raise ValueError(f"--max_seq_length={max_seq_length} leaves no room for the context "
                     f"after --max_query_length={max_query_length} and 3 special tokens")
  if doc_stride <= 0:
    raise ValueError(f"--doc_stride must be positive, got {doc_stride}")
  cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
  aligned = {}  # context -> (ids, starts, ends): many questions share one paragraph
  features, unique_id = [], FIRST_UNIQUE_ID
  long_questions, most_windows, positive, negative = 0, 0, 0, 0
  for example_index, example in enumerate(examples):
    query = tokenizer.encode_ids([example.question_text])[0]
    if len(query) > max_query_length:
      long_questions += 1
      query = query[:max_query_length]
    context = example.paragraph_text
    if context not in aligned:
      aligned[context] = encode_with_offsets(tokenizer, context)
    doc_ids, starts, ends = aligned[context]
    if not doc_ids:
      continue
    tok_start = tok_end = None
    if is_training and not example.is_impossible:
      answer_end = example.start_position + len(example.orig_answer_text) - 1
      tok_start, tok_end = token_for_char(starts, ends, example.start_position, answer_end)
    spans = doc_spans(len(doc_ids), max_seq_length - len(query) - 3, doc_stride)
    most_windows = max(most_windows, len(spans))
    doc_offset = len(query) + 2
    for span_index, (span_start, span_length) in enumerate(spans):
      window = range(span_start, span_start + span_length)
      input_ids = [cls_id] + query + [sep_id] + [doc_ids[i] for i in window] + [sep_id]
      segment_ids = [0] * doc_offset + [1] * (span_length + 1)
      p_mask = [0] + [1] * (len(query) + 1) + [0] * span_length + [1]
      input_mask = [1] * len(input_ids)
      pad = max_seq_length - len(input_ids)
      start_position = end_position = 0
      impossible = example.is_impossible
      if is_training and not impossible:
        if span_start <= tok_start and tok_end < span_start + span_length:
          start_position = tok_start - span_start + doc_offset
          end_position = tok_end - span_start + doc_offset
        else:
          impossible = True
      features.append(SquadFeature(
          unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
          doc_offset=doc_offset,
          tok_start_to_orig_index=[starts[i] for i in window],
          tok_end_to_orig_index=[ends[i] for i in window],
          token_is_max_context=[is_max_context(spans, span_index, i) for i in window],
          input_ids=input_ids + [0] * pad, input_mask=input_mask + [0] * pad,
          segment_ids=segment_ids + [0] * pad, p_mask=p_mask + [1] * pad,
          start_position=start_position, end_position=end_position,
          is_impossible=impossible))
      unique_id += 1
      negative += impossible
      positive += not impossible
  if long_questions:
    logger.info("%d questions were longer than max_query_length=%d pieces and were cut",
                long_questions, max_query_length)
  logger.info("%d examples -> %d features (%d with the answer, %d without); at most %d "
              "windows per context", len(examples), len(features), positive, negative,
              most_windows)
  return features


# --- TFRecords --------------------------------------------------------------------------------
_FIXED_FIELDS = ("input_ids", "input_mask", "segment_ids", "p_mask")
# The batch's features whose last axis is the sequence (their names in a batch).
_SEQUENCE_NAMES = ("input_word_ids", "input_mask", "input_type_ids", "p_mask")
_SCALAR_FIELDS = ("unique_ids", "start_positions", "end_positions", "is_impossible",
                  "example_index", "doc_span_index", "doc_offset")


def write_squad_tfrecord(features, path):
  """All of each feature in one tf.train.Example (the original pickled the host-side part);
  written to a temporary name and renamed. Returns the number written."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

  def serialized():
    for f in features:
      fields = {name: ints(getattr(f, name)) for name in _FIXED_FIELDS}
      fields.update(
          unique_ids=ints([f.unique_id]), start_positions=ints([f.start_position]),
          end_positions=ints([f.end_position]), is_impossible=ints([f.is_impossible]),
          example_index=ints([f.example_index]), doc_span_index=ints([f.doc_span_index]),
          doc_offset=ints([f.doc_offset]),
          tok_start_to_orig_index=ints(f.tok_start_to_orig_index),
          tok_end_to_orig_index=ints(f.tok_end_to_orig_index),
          token_is_max_context=ints(f.token_is_max_context))
      yield tf.train.Example(features=tf.train.Features(feature=fields)).SerializeToString()
  return write_tfrecord_atomically(path, serialized())


def read_squad_features(path):
  """The SquadFeatures of a file from `write_squad_tfrecord`, in order."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  features = []
  for record in tf.data.TFRecordDataset([path]).as_numpy_iterator():
    f = tf.train.Example.FromString(record).features.feature
    value = lambda name: list(f[name].int64_list.value)  # pylint: disable=cell-var-from-loop
    features.append(SquadFeature(
        unique_id=value("unique_ids")[0], example_index=value("example_index")[0],
        doc_span_index=value("doc_span_index")[0], doc_offset=value("doc_offset")[0],
        tok_start_to_orig_index=value("tok_start_to_orig_index"),
        tok_end_to_orig_index=value("tok_end_to_orig_index"),
        token_is_max_context=[bool(v) for v in value("token_is_max_context")],
        input_ids=value("input_ids"), input_mask=value("input_mask"),
        segment_ids=value("segment_ids"), p_mask=value("p_mask"),
        start_position=value("start_positions")[0], end_position=value("end_positions")[0],
        is_impossible=bool(value("is_impossible")[0])))
  return features


def squad_dataset(path, max_seq_length, batch_size, is_training, seed=None,
                  shuffle_buffer=100, trim=False):
  """Batches with the model's input names plus `p_mask`, `unique_ids`, `start_positions`,
  `end_positions` and `is_impossible` (int32). Training repeats, shuffles (the original's
  buffer of 100) and drops the last partial batch; prediction keeps order and every record.
  With `trim`, the sequence axis is each batch's longest window rounded up
  (`batch_length.trim_batch`), else max_seq_length."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.data.batch_length import trim_batch  # pylint: disable=g-import-not-at-top
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"SQuAD feature file not found: {path}")
  spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in _FIXED_FIELDS}
  spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in _SCALAR_FIELDS[:4]})

  def parse(records):
    example = {k: tf.cast(v, tf.int32) for k, v in tf.io.parse_example(records, spec).items()}
    example["input_word_ids"] = example.pop("input_ids")
    example["input_type_ids"] = example.pop("segment_ids")
    example["unique_ids"] = tf.cast(example["unique_ids"], tf.int32)
    return trim_batch(example, _SEQUENCE_NAMES, max_seq_length) if trim else example

  dataset = tf.data.TFRecordDataset([path])
  if is_training:
    dataset = dataset.repeat().shuffle(shuffle_buffer, seed=seed)
  dataset = dataset.batch(batch_size, drop_remainder=is_training)
  return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
