"""Examples -> packed features -> TFRecords -> tf.data batches with the model's input names.

TensorFlow is imported only by the TFRecord and tf.data functions.
"""

import logging
import os

from albert_tf.data.tfrecords import write_tfrecord_atomically
from albert_tf.tokenization.tokenizer import encode_pair

logger = logging.getLogger(__name__)


class PaddingInputExample:
  """A fake example that pads an eval/predict set to a whole number of batches.

  It becomes an all-zero feature with `is_real_example` False, as in the original, so a TPU
  (static batch shapes) sees every real example and the metrics can ignore the padding.
  """


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


# The features of a batch whose last axis is the sequence.
SEQUENCE_FEATURES = ("input_word_ids", "input_mask", "input_type_ids")


def classification_dataset(path, max_seq_length, batch_size, is_training, regression,
                           seed=None, drop_remainder=None, shuffle_buffer=100, trim=False,
                           bucket=False):
  """Batches of parsed records with the model's input names.

  Yields dicts: `input_word_ids`, `input_mask`, `input_type_ids` (int32 [batch, seq]),
  `label_ids` (int32, or float32 for regression, [batch]) and `is_real_example` (int32
  [batch]). Training repeats and shuffles records with the original's buffer of 100 and
  drops the last partial batch; eval keeps file order and, unless `drop_remainder`, every
  record. `path` is one file or a list of files. With `trim`, seq is each batch's longest row
  rounded up (`batch_length.trim_batch`: the same batches, less padding), else max_seq_length.
  With `bucket` (training batches that are trimmed), each batch holds records of similar real
  length (`batch_length.bucketed`): less padding still, but not the original's batches.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.data.batch_length import bucketed, trim_batch  # pylint: disable=g-import-not-at-top
  files = [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else list(path)
  for file in files:
    if not tf.io.gfile.exists(file):
      raise FileNotFoundError(f"classification TFRecord file not found: {file}")
  _check_record_length(files[0], max_seq_length)
  spec = feature_spec(max_seq_length, regression)

  def to_model_inputs(example):
    example = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
               for k, v in example.items()}
    batch = {"input_word_ids": example["input_ids"], "input_mask": example["input_mask"],
             "input_type_ids": example["segment_ids"], "label_ids": example["label_ids"],
             "is_real_example": example["is_real_example"]}
    return trim_batch(batch, SEQUENCE_FEATURES, max_seq_length) if trim else batch

  dataset = tf.data.TFRecordDataset(files)
  if is_training:
    dataset = dataset.repeat().shuffle(shuffle_buffer, seed=seed)
  if bucket:
    if not (is_training and trim):
      raise ValueError("bucketing by length is for training batches that are trimmed")
    batches = bucketed(dataset.map(lambda record: tf.io.parse_single_example(record, spec),
                                   num_parallel_calls=tf.data.AUTOTUNE),
                       batch_size, max_seq_length)
  else:
    if drop_remainder is None:
      drop_remainder = is_training
    batches = dataset.batch(batch_size, drop_remainder=drop_remainder).map(
        lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
  return batches.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
      tf.data.AUTOTUNE)
