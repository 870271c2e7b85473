"""tf.data input for pretraining: shards -> parsed, batched examples with the model's names."""

import json
import os

import tensorflow as tf
from google.protobuf import message

from albert_tf.data.pretraining.dynamic_masking import DynamicMaskingOptions, dynamic_mask
from albert_tf.data.pretraining.records import decode_record, decode_unmasked_record

EVAL_MASKING_SEED = 20191  # eval's dynamic masks are the same at every evaluation


def expand_file_patterns(patterns):
  """Comma list and globs (local or gs://) -> sorted files; no match is an error naming it."""
  files = []
  for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
    matches = sorted(tf.io.gfile.glob(pattern))
    if not matches:
      raise FileNotFoundError(f"--input_file pattern matches no file: {pattern}")
    files += matches
  if not files:
    raise FileNotFoundError(f"--input_file {patterns!r} names no files")
  return files


def _to_model_inputs(example):
  return {
      "input_word_ids": example["input_ids"],
      "input_mask": example["input_mask"],
      "input_type_ids": example["segment_ids"],
      "masked_lm_positions": example["masked_lm_positions"],
      "masked_lm_ids": example["masked_lm_ids"],
      "masked_lm_weights": example["masked_lm_weights"],
      "next_sentence_labels": example["next_sentence_labels"],
  }


def pretraining_dataset(files, max_seq_length, max_predictions_per_seq, batch_size,
                        is_training, seed=None, input_context=None, shuffle_buffer=10000,
                        masking=None):
  """Batches of `batch_size` (per replica) examples, static shapes (drop_remainder).

  Training: files shuffled and read in parallel (interleave), records shuffled, repeated.
  Eval: files read in order, once. With `input_context` each input pipeline reads its share
  of the files (or of the records, when there are fewer files than pipelines).

  `masking` (`DynamicMaskingOptions`): the records are unmasked (`--no_masking`) and each
  read of one is masked anew, from a stateless seed made of `seed` (a fixed one for eval or
  when None), the input pipeline and the read's position in the stream.
  """
  dataset = tf.data.Dataset.from_tensor_slices(list(files))
  shard_records = False
  if input_context and input_context.num_input_pipelines > 1:
    if len(files) >= input_context.num_input_pipelines:
      dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    else:
      shard_records = True
  if is_training:
    dataset = dataset.shuffle(len(files), seed=seed).repeat()
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
                                 num_parallel_calls=tf.data.AUTOTUNE,
                                 deterministic=seed is not None)
  else:
    dataset = dataset.flat_map(tf.data.TFRecordDataset)
  if shard_records:
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer, seed=seed)
  if masking is None:
    dataset = dataset.map(lambda r: _to_model_inputs(decode_record(r, max_seq_length,
                                                                   max_predictions_per_seq)),
                          num_parallel_calls=tf.data.AUTOTUNE)
  else:
    # Without a seed the masks still follow from the read's position, which the checkpointed
    # iterator restores: a resumed run masks exactly as an uninterrupted one would.
    base = seed if is_training and seed is not None else EVAL_MASKING_SEED
    pipeline = input_context.input_pipeline_id if input_context else 0
    stream = tf.constant([base, pipeline], tf.int64)

    def masked(index, record):
      seed_pair = tf.random.experimental.stateless_fold_in(stream, index)
      return _to_model_inputs(dynamic_mask(decode_unmasked_record(record, max_seq_length),
                                           seed_pair, masking))
    dataset = dataset.enumerate().map(masked, num_parallel_calls=tf.data.AUTOTUNE,
                                      deterministic=True)
  return dataset.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def check_pretraining_files(files, max_seq_length, max_predictions_per_seq, vocab_size,
                            sample=200, dynamic_masking=False):
  """Clear errors when the records do not fit the flags or the config: every shard's lengths
  (its first record; shards of another length would stop training mid-run) and, on a sample
  of the first shard, the token ids. With `dynamic_masking` the records must be unmasked
  (`--no_masking`: empty masked_lm_positions), otherwise they must not be."""
  for path in files:
    try:
      first = next(iter(tf.data.TFRecordDataset([path]).take(1)), None)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise ValueError(f"{path} is not a readable TFRecord file: "
                       f"{str(e).strip().splitlines()[0]}") from None
    if first is None:
      raise ValueError(f"{path} holds no records")
    try:
      example = tf.train.Example.FromString(first.numpy()).features.feature
    except message.DecodeError:
      raise ValueError(f"{path} is not pretraining data: its first record is not a "
                       "tf.train.Example") from None
    for name, flag, want in (("input_ids", "--max_seq_length", max_seq_length),
                             ("masked_lm_positions", "--max_predictions_per_seq",
                              max_predictions_per_seq)):
      if name not in example:
        raise ValueError(f"{path} is not pretraining data: it has no '{name}' feature")
      got = len(example[name].int64_list.value)
      if name == "masked_lm_positions":
        if dynamic_masking and got:
          raise ValueError(f"{path} is already masked ({got} masked_lm_positions): "
                           "--dynamic_masking needs records made with create_pretraining_data "
                           "--no_masking; drop --dynamic_masking to train on these as they are")
        if not dynamic_masking and not got:
          raise ValueError(f"{path} was made with --no_masking (its records have no masks): "
                           "pass --dynamic_masking to mask them as they are read")
        if dynamic_masking:
          continue
      if got != want:
        raise ValueError(f"{path} has {name} of length {got} but {flag}={want}; pass "
                         f"{flag}={got} or recreate the data")
  try:
    batch = next(iter(tf.data.TFRecordDataset(files[:1]).take(sample).batch(sample).map(
        lambda r: tf.io.parse_example(r, {"input_ids": tf.io.FixedLenFeature(
            [max_seq_length], tf.int64)}))))
  except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
    raise ValueError(f"{files[0]} is corrupt or mixes record formats within its first "
                     f"{sample} records: {str(e).strip().splitlines()[0]}") from None
  largest = int(tf.reduce_max(batch["input_ids"]))
  if largest >= vocab_size:
    raise ValueError(f"{files[0]} has token id {largest} but the config's vocab_size is "
                     f"{vocab_size}: the data was made with another vocabulary")


def find_metadata(files):
  """create_pretraining_data's JSON that lists all of `files` as its shards, if it is beside
  them; else None."""
  folder = os.path.dirname(files[0])
  names = {os.path.basename(f) for f in files}
  for candidate in tf.io.gfile.glob(os.path.join(folder, "*.json")):
    try:
      with tf.io.gfile.GFile(candidate) as f:
        meta = json.load(f)
      shards = {s["path"]: s["instances"] for s in meta.get("shards", [])}
    except (ValueError, KeyError, TypeError, AttributeError):
      continue
    if names <= set(shards):
      return meta
  return None


def count_instances(files):
  """Instances in the shards from create_pretraining_data's JSON, if it is beside them."""
  meta = find_metadata(files)
  if meta is None:
    return None
  shards = {s["path"]: s["instances"] for s in meta["shards"]}
  return sum(shards[os.path.basename(f)] for f in files)


def masking_from_metadata(files, vocab_size, **flags):
  """`DynamicMaskingOptions` for `files`: the special ids from their metadata JSON, the
  masking flags from run_pretraining's."""
  meta = find_metadata(files)
  if meta is None or "special_ids" not in meta:
    raise ValueError(f"--dynamic_masking needs the metadata JSON that create_pretraining_data "
                     f"wrote beside the shards (it names the [CLS] / [SEP] / [MASK] ids); "
                     f"none in {os.path.dirname(files[0]) or '.'} lists all of --input_file")
  if meta.get("vocab_size", vocab_size) != vocab_size:
    raise ValueError(f"the data was made with a vocabulary of {meta['vocab_size']} ids but the "
                     f"config's vocab_size is {vocab_size}")
  ids = meta["special_ids"]
  options = DynamicMaskingOptions(vocab_size=vocab_size, mask_id=ids["mask"],
                                  cls_id=ids["cls"], sep_id=ids["sep"], **flags)
  options.validate()
  return options
