"""The pretraining TFRecord format (SPEC.md "Pretraining TFRecords"): one source of truth.

Writing does not import TensorFlow: `encode_example` encodes a padded instance
(`instance_features`) through `data/tfrecords.py`'s protobuf wire format, which also frames
and writes the shards, so the data job's workers start in milliseconds. Reading
(`feature_spec`, `decode_record`) is for tf.data and imports TensorFlow lazily.
"""

from albert_tf.data import tfrecords

# name -> (dtype, length): "seq" = max_seq_length, "pred" = max_predictions_per_seq.
PRETRAINING_FEATURES = {
    "input_ids": ("int64", "seq"),
    "input_mask": ("int64", "seq"),
    "segment_ids": ("int64", "seq"),
    "token_boundary": ("int64", "seq"),
    "masked_lm_positions": ("int64", "pred"),
    "masked_lm_ids": ("int64", "pred"),
    "masked_lm_weights": ("float32", "pred"),
    "next_sentence_labels": ("int64", 1),
}


def feature_lengths(max_seq_length, max_predictions_per_seq):
  sizes = {"seq": max_seq_length, "pred": max_predictions_per_seq}
  return {name: sizes.get(length, length) for name, (_, length) in PRETRAINING_FEATURES.items()}


def feature_spec(max_seq_length, max_predictions_per_seq):
  """`tf.io.FixedLenFeature`s of a pretraining record (what the original's reader uses)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  lengths = feature_lengths(max_seq_length, max_predictions_per_seq)
  return {name: tf.io.FixedLenFeature([lengths[name]], getattr(tf, dtype))
          for name, (dtype, _) in PRETRAINING_FEATURES.items()}


def decode_record(serialized, max_seq_length, max_predictions_per_seq):
  """Parses one record; int64 features become int32 (TPUs and the model want int32)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  example = tf.io.parse_single_example(
      serialized, feature_spec(max_seq_length, max_predictions_per_seq))
  return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}


UNMASKED_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary",
                     "next_sentence_labels")


def decode_unmasked_record(serialized, max_seq_length):
  """Parses the features of a `--no_masking` record that dynamic masking needs (its
  masked_lm_* are empty); int64 becomes int32."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = feature_spec(max_seq_length, 0)
  example = tf.io.parse_single_example(serialized, {k: spec[k] for k in UNMASKED_FEATURES})
  return {k: tf.cast(v, tf.int32) for k, v in example.items()}


_KEYS = {name: tfrecords.feature_key(name) for name in PRETRAINING_FEATURES}


def encode_example(features):
  """A `tf.train.Example` as bytes, from `{name: list}` in PRETRAINING_FEATURES' types."""
  return tfrecords.encode_example(
      (_KEYS[name], tfrecords.float_feature(features[name]) if dtype == "float32"
       else tfrecords.int64_feature(features[name]))
      for name, (dtype, _) in PRETRAINING_FEATURES.items())


def instance_features(instance, max_seq_length, max_predictions_per_seq):
  """Pads an `Instance` to fixed lengths, as the original's writer does (pad id 0)."""
  n = len(instance.input_ids)
  if n > max_seq_length:
    raise ValueError(f"instance of {n} tokens exceeds max_seq_length {max_seq_length}")
  pad = max_seq_length - n
  p = len(instance.masked_lm_positions)
  if p > max_predictions_per_seq:
    raise ValueError(f"{p} predictions exceed max_predictions_per_seq "
                     f"{max_predictions_per_seq}")
  pred_pad = max_predictions_per_seq - p
  return {
      "input_ids": instance.input_ids + [0] * pad,
      "input_mask": [1] * n + [0] * pad,
      "segment_ids": instance.segment_ids + [0] * pad,
      "token_boundary": instance.token_boundary + [0] * pad,
      "masked_lm_positions": instance.masked_lm_positions + [0] * pred_pad,
      "masked_lm_ids": instance.masked_lm_ids + [0] * pred_pad,
      "masked_lm_weights": [1.0] * p + [0.0] * pred_pad,
      "next_sentence_labels": [instance.sentence_order_label],
  }
