"""The submission files of --do_predict: GLUE's `<TASK>.tsv` and CLUE's `<task>_predict.json`.

Each is written atomically (files.py); a processor's `submission` says which it takes.
"""

import json
import os

from albert_tf import files
from albert_tf.data.classification.registry import get_processor


def write_glue_predictions(task_name, predictions, path, guids=None):
  """Writes a GLUE submission file: header `index\\tprediction`, then one row per example.

  Args:
    task_name: a task name or processor.
    predictions: label ids [n] (or scores [n, num_labels], argmaxed) for classification,
      written as label names; float scores [n] for regression, written as numbers.
    path: the file, replaced atomically (a temporary name in the same folder, renamed).
    guids: the `index` column, e.g. the test examples' guids; default 0..n-1.
  Returns:
    the number of rows written.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  processor = get_processor(task_name)
  predictions = np.asarray(predictions)
  labels = processor.get_labels()
  if labels is not None and predictions.ndim == 2:
    predictions = predictions.argmax(axis=-1)
  if labels is None and predictions.ndim == 2 and predictions.shape[1] == 1:
    predictions = predictions[:, 0]
  if predictions.ndim != 1:
    raise ValueError(f"predictions must have shape [n], got {predictions.shape}")
  guids = list(range(len(predictions))) if guids is None else list(guids)
  if len(guids) != len(predictions):
    raise ValueError(f"{len(guids)} guids for {len(predictions)} predictions")
  rows = ["index\tprediction"]
  if labels is None:
    if not np.all(np.isfinite(predictions.astype(np.float64))):
      raise ValueError("predictions hold NaN or infinity")
    rows += [f"{guid}\t{float(p):.6f}" for guid, p in zip(guids, predictions)]
  else:
    ids = _label_ids(predictions, labels, processor.name)
    rows += [f"{guid}\t{labels[i]}" for guid, i in zip(guids, ids)]
  path = os.fspath(path)
  folder = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"output folder does not exist: {folder} (for {path})")
  files.write_text(path, "\n".join(rows) + "\n")
  return len(guids)


def _label_ids(predictions, labels, task):
  """int64 label ids [n] of `predictions` (ids, or scores [n, num_labels] argmaxed)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  predictions = np.asarray(predictions)
  if predictions.ndim == 2:
    predictions = predictions.argmax(axis=-1)
  if predictions.ndim != 1:
    raise ValueError(f"predictions must have shape [n], got {predictions.shape}")
  ids = predictions.astype(np.int64)
  if ids.size and (ids.min() < 0 or ids.max() >= len(labels) or np.any(ids != predictions)):
    raise ValueError(f"predictions must be label ids in [0, {len(labels)}) for {task}")
  return ids


def write_clue_predictions(task_name, predictions, path, ids=None):
  """Writes a CLUE submission file: one JSON line per example, `{"id": .., "label": ".."}`.

  Args:
    task_name: a task name or processor with a label set (a Chinese task).
    predictions: label ids [n], or scores [n, num_labels] (argmaxed); written as label strings.
    path: the file (`<task>_predict.json`), replaced atomically.
    ids: each row's `id`, e.g. the test examples' guids (the test file's own ids, kept as
      the file has them); default 0..n-1.
  Returns:
    the number of rows written.
  """
  processor = get_processor(task_name)
  labels = processor.get_labels()
  if labels is None:
    raise ValueError(f"{processor.name} is a regression task; CLUE submissions hold labels")
  label_ids = _label_ids(predictions, labels, processor.name)
  ids = list(range(len(label_ids))) if ids is None else list(ids)
  if len(ids) != len(label_ids):
    raise ValueError(f"{len(ids)} ids for {len(label_ids)} predictions")
  # ensure_ascii=False: ids and labels stay readable (CLUE's own files are utf-8).
  text = "".join(json.dumps({"id": i, "label": labels[p]}, ensure_ascii=False) + "\n"
                 for i, p in zip(ids, label_ids))
  files.write_text(path, text)
  return len(ids)
