"""Statistics of pretraining TFRecords (ours or the original's).

    python -m albert_tf.data.inspect data/train-*.tfrecord [--mask_id 4]

Prints the record count, the feature spec found in the files and the statistics SPEC.md's
algorithm determines: sequence lengths, segment split, masked fraction and predictions per
instance, masked span lengths in words, the 80/10/10 replacement split, the sentence-order
label share and token_boundary density.
"""

import argparse
import glob
import json
import sys

import numpy as np


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


def record_statistics(files, mask_id=4, max_span=5):
  """The statistics of item 2 of the data issue, as a dict."""
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


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("files", nargs="+", help="TFRecord files or globs")
  parser.add_argument("--mask_id", type=int, default=4, help="[MASK] id (4 in ALBERT's spm)")
  parser.add_argument("--json", action="store_true", help="print JSON")
  args = parser.parse_args(argv)
  files = []
  for pattern in args.files:
    matches = sorted(glob.glob(pattern))
    if not matches:
      print(f"error: no file matches {pattern}", file=sys.stderr)
      return 2
    files += matches
  try:
    stats = record_statistics(files, args.mask_id)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.json:
    print(json.dumps(stats, indent=2))
    return 0
  print(f"{stats['records']} records in {len(files)} files")
  print("features:")
  for name, f in stats["features"].items():
    print(f"  {name:<22} {f['type']:<11} [{f['length']}]")
  for key, value in stats.items():
    if key not in ("records", "features"):
      print(f"{key}: {value}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
