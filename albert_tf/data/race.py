"""RACE and multiple-choice data: examples, the original's packing, TFRecords, batches.

RACE (Lai et al. 2017) comes as `<split>/<level>/*.txt` (the release: one JSON article per
file) or `<split>/<level>/all.txt` (one JSON article per line, what the original run_race.py
reads); levels `middle` and `high`. Each question becomes one example of 4 choices:

- texts are `preprocess_text`-ed (SentencePiece; WordPiece keeps them as they are);
- choice j's text is `question.replace("_", option_j)` when the question has a blank "_", else
  `question + " " + option_j`; its tokens keep their LAST `max_qa_length`;
- the article is cut from its end so `[CLS] article [SEP] qa [SEP]` fits `max_seq_length`;
  segment ids 0 for `[CLS] article [SEP]`, 1 for `qa [SEP]`.

Users' own multiple choice (`read_csv_examples`) packs the same way, N choices from the data.
"""

import csv
import dataclasses
import json
import logging
import os

from albert_tf.data.tfrecords import write_tfrecord_atomically
from albert_tf.tokenization.tokenizer import preprocess_text

logger = logging.getLogger(__name__)

LEVELS = ("middle", "high")
RACE_CHOICES = 4


@dataclasses.dataclass
class MultipleChoiceExample:
  """One question: `endings` are the per-choice qa texts, `label` the answer's index."""
  example_id: str
  question_index: int
  level: str
  article: str
  endings: list
  label: int = None


def process_text(text, tokenizer):
  """The original's RaceProcessor.process_text: preprocess_text for SentencePiece."""
  return preprocess_text(text, lower=tokenizer.do_lower_case) if tokenizer.is_spm else text


def qa_text(question, option):
  """The original's choice text: the option fills the blank "_", else follows the question."""
  return question.replace("_", option) if "_" in question else " ".join([question, option])


def race_split_dir(data_dir, split):
  """`<data_dir>/RACE/<split>` (the original's layout) or `<data_dir>/<split>`."""
  for folder in (os.path.join(data_dir, "RACE", split), os.path.join(data_dir, split)):
    if os.path.isdir(folder):
      return folder
  raise FileNotFoundError(f"no RACE {split} split under {data_dir} (looked for "
                          f"{os.path.join(data_dir, 'RACE', split)} and "
                          f"{os.path.join(data_dir, split)})")


def _articles(path):
  """The JSON articles of one file: one per line (all.txt), or the whole file (release)."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  try:
    return [json.loads(text)]
  except json.JSONDecodeError:
    pass
  articles = []
  for number, line in enumerate(text.splitlines(), 1):
    if line.strip():
      try:
        articles.append(json.loads(line))
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}, line {number}: not a JSON article ({e.msg})") from None
  return articles


def read_race_examples(data_dir, split, tokenizer, high_only=False, middle_only=False):
  """The examples of one split, middle school first, files in name order.

  A level folder with `all.txt` is read from it alone (its articles are the release files
  concatenated); otherwise every `*.txt` is one article.
  """
  if high_only and middle_only:
    raise ValueError("--high_only and --middle_only exclude each other")
  root = race_split_dir(data_dir, split)
  examples = []
  for level in LEVELS:
    if (level == "middle" and high_only) or (level == "high" and middle_only):
      continue
    folder = os.path.join(root, level)
    if not os.path.isdir(folder):
      logger.warning("RACE %s has no %s folder", root, level)
      continue
    names = (["all.txt"] if os.path.exists(os.path.join(folder, "all.txt")) else
             sorted((n for n in os.listdir(folder) if n.endswith(".txt")),
                    key=lambda n: (len(n), n)))
    for name in names:
      path = os.path.join(folder, name)
      for article in _articles(path):
        examples.extend(_article_examples(article, level, path, tokenizer))
  return examples


def _article_examples(article, level, path, tokenizer):
  try:
    answers, options, questions = article["answers"], article["options"], article["questions"]
    article_id, text = article.get("id", os.path.basename(path)), article["article"]
  except KeyError as e:
    raise ValueError(f"{path}: article without {e.args[0]!r}") from None
  context = process_text(text, tokenizer)
  examples = []
  for i, question in enumerate(questions):
    if len(options[i]) != RACE_CHOICES:
      raise ValueError(f"{path}: question {i} has {len(options[i])} options, not 4")
    label = None
    if i < len(answers) and answers[i]:
      label = ord(answers[i]) - ord("A")
      if not 0 <= label < RACE_CHOICES:
        raise ValueError(f"{path}: question {i} has answer {answers[i]!r}, not A-D")
    question = process_text(question, tokenizer)
    endings = [qa_text(question, process_text(option, tokenizer)) for option in options[i]]
    examples.append(MultipleChoiceExample(article_id, i, level, context, endings, label))
  return examples


def read_csv_examples(path, context_column, question_column, option_columns, label_column,
                      tokenizer):
  """Users' multiple choice from a CSV/TSV with a header: one question per row.

  The label is the answer's index (0-based) or the text of one of the options; a missing
  label column (or empty cell) leaves it unknown (test files).
  """
  delimiter = "\t" if path.endswith(".tsv") else ","
  examples = []
  with open(path, encoding="utf-8-sig", newline="") as f:
    reader = csv.DictReader(f, delimiter=delimiter)
    wanted = [context_column, question_column] + list(option_columns)
    missing = [c for c in wanted if c not in (reader.fieldnames or [])]
    if missing:
      raise ValueError(f"{path}: no column(s) {', '.join(missing)} in the header "
                       f"{reader.fieldnames}")
    for number, row in enumerate(reader, 2):
      options = [row[c] or "" for c in option_columns]
      label = None
      raw = (row.get(label_column) or "").strip() if label_column else ""
      if raw:
        if raw.isdigit() and int(raw) < len(options):
          label = int(raw)
        elif raw in options:
          label = options.index(raw)
        else:
          raise ValueError(f"{path}, line {number}: label {raw!r} is neither an option's "
                           f"index (0-{len(options) - 1}) nor one of the options")
      question = process_text(row[question_column] or "", tokenizer)
      endings = [qa_text(question, process_text(o, tokenizer)) for o in options]
      examples.append(MultipleChoiceExample(str(number - 1), 0, "",
                                            process_text(row[context_column] or "", tokenizer),
                                            endings, label))
  if not examples:
    raise ValueError(f"{path} has no rows")
  return examples


def convert_example(example, tokenizer, max_seq_length, max_qa_length):
  """The original's packing of one example: `input_ids`, `input_mask`, `segment_ids`
  ([choices][max_seq_length] each) and `tokens` (the unpadded pieces of each choice)."""
  context = tokenizer.tokenize(example.article)
  packed = {"input_ids": [], "input_mask": [], "segment_ids": [], "tokens": []}
  for ending in example.endings:
    qa = tokenizer.tokenize(ending)[-max_qa_length:]  # the question's end is kept
    article = context[:max(0, max_seq_length - 3 - len(qa))]  # the article's end is cut
    tokens = [tokenizer.cls_token] + article + [tokenizer.sep_token] + qa + [
        tokenizer.sep_token]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    padding = [0] * (max_seq_length - len(ids))
    packed["input_ids"].append(ids + padding)
    packed["input_mask"].append([1] * len(ids) + padding)
    packed["segment_ids"].append([0] * (len(article) + 2) + [1] * (len(qa) + 1) + padding)
    packed["tokens"].append(tokens)
  return packed


def write_tfrecord(examples, tokenizer, max_seq_length, max_qa_length, path):
  """Packs `examples` into `path` (choices flattened, the original's feature names); the file
  appears only once complete. Returns the number written."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  def serialized():
    for example in examples:
      packed = convert_example(example, tokenizer, max_seq_length, max_qa_length)
      features = {name: int_feature(sum(packed[name], []))
                  for name in ("input_ids", "input_mask", "segment_ids")}
      features["label_ids"] = int_feature([-1 if example.label is None else example.label])
      yield tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
  return write_tfrecord_atomically(path, serialized())


def multiple_choice_dataset(path, num_choices, max_seq_length, batch_size, is_training,
                            seed=None, trim=False):
  """Batches: `input_word_ids`, `input_mask`, `input_type_ids` int32 [batch, choices, seq],
  `label_ids` int32 [batch] (-1 when unknown). Training repeats and shuffles (buffer 100, as
  the original's classifier input) and drops the last partial batch. With `trim`, seq is each
  batch's longest choice rounded up (`batch_length.trim_batch`), else max_seq_length."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.data.batch_length import trim_batch  # pylint: disable=g-import-not-at-top
  shape = [num_choices * max_seq_length]
  spec = {"input_ids": tf.io.FixedLenFeature(shape, tf.int64),
          "input_mask": tf.io.FixedLenFeature(shape, tf.int64),
          "segment_ids": tf.io.FixedLenFeature(shape, tf.int64),
          "label_ids": tf.io.FixedLenFeature([], tf.int64)}

  def parse(record):
    example = tf.io.parse_single_example(record, spec)
    reshape = lambda t: tf.reshape(tf.cast(t, tf.int32), [num_choices, max_seq_length])
    return {"input_word_ids": reshape(example["input_ids"]),
            "input_mask": reshape(example["input_mask"]),
            "input_type_ids": reshape(example["segment_ids"]),
            "label_ids": tf.cast(example["label_ids"], tf.int32)}

  dataset = tf.data.TFRecordDataset([path])
  if is_training:
    dataset = dataset.repeat().shuffle(100, seed=seed)
  dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
  dataset = dataset.batch(batch_size, drop_remainder=is_training)
  if trim:
    names = ("input_word_ids", "input_mask", "input_type_ids")
    dataset = dataset.map(lambda batch: trim_batch(batch, names, max_seq_length))
  return dataset.prefetch(tf.data.AUTOTUNE)
