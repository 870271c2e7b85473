"""Statistics of pretraining TFRecords (ours or the original's).

    stats = record_statistics(glob.glob("data/train-*.tfrecord"),
                              spm_model_file="30k-clean.model")

The record count, the feature spec found in the files and the statistics SPEC.md's algorithm
determines: sequence lengths, segment split, masked fraction and predictions per instance,
masked span lengths in words, the 80/10/10 replacement split, the sentence-order label share
and token_boundary density.

The replacement split needs the vocabulary's `[MASK]` id (4 in ALBERT's SentencePiece models,
103 in BERT / albert_zh WordPiece vocabularies): it comes from the vocabulary given, else from
the one that create_pretraining_data's JSON beside the shards names (`mask_id_of`), else the
caller's `mask_id`; with none of them the statistics are refused instead of guessed.

On the command line: `python -m albert_tf.cli.inspect` (albert_tf/cli/inspect.py).
"""
import json
import os

import numpy as np

from albert_tf.data.pretraining.create import metadata_path

# Masked positions looked at before "none holds [MASK]" means the id is wrong: 80% of them
# hold it, so 20 without one happen with probability 0.2 ** 20.
_MIN_MASKED_TO_CHECK = 20


def _feature_layout(first_record):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  example = tf.train.Example.FromString(first_record)
  layout = {}
  for name, feature in example.features.feature.items():
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value
    layout[name] = (kind, len(values))
  return layout


def read_records(files, batch_size=1024):
  """Yields dicts of NumPy arrays `[batch, length]` for every feature of the files."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  first = next(iter(tf.data.TFRecordDataset(files[:1]).take(1)), None)
  if first is None:
    raise ValueError(f"{files[0]} holds no records")
  layout = _feature_layout(first.numpy())
  dtypes = {"int64_list": tf.int64, "float_list": tf.float32, "bytes_list": tf.string}
  spec = {name: tf.io.FixedLenFeature([n], dtypes[kind]) for name, (kind, n) in layout.items()}
  dataset = tf.data.TFRecordDataset(files).batch(batch_size).map(
      lambda s: tf.io.parse_example(s, spec))
  for batch in dataset.as_numpy_iterator():
    yield batch, layout


def _spans_in_words(positions, weights, boundary):
  """Lengths in words of maximal runs of consecutive masked positions."""
  lengths = []
  for pos, w, b in zip(positions, weights, boundary):
    masked = sorted(int(p) for p, x in zip(pos, w) if x > 0)
    run = []
    for p in masked + [None]:
      if run and (p is None or p != run[-1] + 1):
        words = sum(int(b[i]) for i in run) + (0 if b[run[0]] else 1)
        lengths.append(words)
        run = []
      if p is not None:
        run.append(p)
  return lengths


def _metadata_vocabulary(files):
  """(spm_model_file, vocab_file, the JSON naming them) from create_pretraining_data's JSON of
  the shards `files` belong to (it lists them by name), or None."""
  candidates = [metadata_path(files)]
  for path in files:
    candidates += [metadata_path([path]),
                   os.path.splitext(path)[0].rstrip("-_.0123456789") + ".json"]
  for candidate in dict.fromkeys(candidates):
    try:
      with open(candidate, encoding="utf-8") as f:
        metadata = json.load(f)
    except (OSError, ValueError):
      continue
    shards = {s.get("path") for s in metadata.get("shards", []) if isinstance(s, dict)}
    flags = metadata.get("flags") or {}
    if {os.path.basename(p) for p in files} <= shards:
      return flags.get("spm_model_file"), flags.get("vocab_file"), candidate
  return None


def mask_id_of(files, spm_model_file=None, vocab_file=None):
  """The `[MASK]` id of the vocabulary the records of `files` were made with: the one given,
  else the one their create_pretraining_data JSON names. ValueError when neither says: a
  guess (SentencePiece's 4) gives WordPiece data (103) a wrong replacement split."""
  from albert_tf.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  source = "the vocabulary given"
  if not (spm_model_file or vocab_file):
    found = _metadata_vocabulary(files)
    if found is None or not (found[0] or found[1]):
      raise ValueError("the [MASK] id of the records' vocabulary is needed for the "
                       "replacement split: pass --spm_model_file or --vocab_file (the one "
                       "create_pretraining_data used), or --mask_id")
    spm_model_file, vocab_file, source = found
    if not os.path.exists(spm_model_file or vocab_file):
      raise ValueError(f"{source} names the vocabulary {spm_model_file or vocab_file}, which "
                       "is not there: pass --spm_model_file or --vocab_file, or --mask_id")
  tokenizer = FullTokenizer(vocab_file=None if spm_model_file else vocab_file,
                            spm_model_file=spm_model_file)
  try:
    return tokenizer.mask_id
  except KeyError as e:
    raise ValueError(f"{e.args[0]} ({source})") from None


def record_statistics(files, mask_id=None, max_span=5, spm_model_file=None, vocab_file=None):
  """The statistics of item 2 of the data issue, as a dict. `mask_id` (the vocabulary's
  `[MASK]`) comes from `mask_id_of` when not given."""
  if mask_id is None:
    mask_id = mask_id_of(files, spm_model_file, vocab_file)
  count = 0
  lengths, len_a, predictions, label_1 = [], [], [], 0
  masked_total, as_mask, kept, boundary_total, tokens_total = 0, 0, 0, 0, 0
  under_cap_fraction = []
  spans = []
  layout = None
  for batch, layout in read_records(files):
    mask = batch["input_mask"]
    n = mask.sum(axis=1)
    count += len(n)
    lengths.append(n)
    seg = batch["segment_ids"]
    len_a.append(n - seg.sum(axis=1) - 2)  # tokens of A (without [CLS] and its [SEP])
    w = batch["masked_lm_weights"]
    p = w.sum(axis=1)
    predictions.append(p)
    label_1 += int(batch["next_sentence_labels"][:, 0].sum())
    pos = batch["masked_lm_positions"].astype(np.int64)
    ids = batch["input_ids"]
    at = np.take_along_axis(ids, pos, axis=1)
    real = w > 0
    masked_total += int(real.sum())
    as_mask += int(((at == mask_id) & real).sum())
    kept += int(((at == batch["masked_lm_ids"]) & real).sum())
    if "token_boundary" in batch:
      tb = batch["token_boundary"]
      boundary_total += int((tb * mask).sum())
      spans += _spans_in_words(pos, w, tb)
    tokens_total += int(n.sum())
    under_cap_fraction.append(p / n)
  if masked_total >= _MIN_MASKED_TO_CHECK and as_mask == 0:
    raise ValueError(f"none of the {masked_total} masked positions holds [MASK] id {mask_id}: "
                     "these records were made with another vocabulary (give its "
                     "--spm_model_file / --vocab_file)")
  lengths = np.concatenate(lengths)
  predictions = np.concatenate(predictions)
  len_a = np.concatenate(len_a)
  max_len = layout["input_ids"][1]
  span_hist = np.bincount(np.minimum(spans, max_span), minlength=max_span + 1)[1:] if spans \
      else np.zeros(max_span)
  return {
      "records": count,
      "features": {k: {"type": v[0], "length": v[1]} for k, v in sorted(layout.items())},
      "length_mean": float(lengths.mean()),
      "length_percentiles": {q: int(np.percentile(lengths, q)) for q in (5, 25, 50, 75, 95)},
      "full_length_fraction": float((lengths == max_len).mean()),
      "segment_a_fraction_mean": float((len_a / (lengths - 3)).mean()),
      "predictions_mean": float(predictions.mean()),
      "predictions_max": int(predictions.max()),
      "masked_fraction": float(predictions.sum() / lengths.sum()),
      "replacement": {"mask": as_mask / max(masked_total, 1),
                      "kept": kept / max(masked_total, 1),
                      "random": (masked_total - as_mask - kept) / max(masked_total, 1)},
      "span_words_histogram": {str(i + 1) if i + 1 < max_span else f"{max_span}+": int(c)
                               for i, c in enumerate(span_hist)},
      "sentence_order_label_1_share": label_1 / max(count, 1),
      "token_boundary_fraction": boundary_total / max(tokens_total, 1),
  }

