"""GLUE metrics in NumPy: accuracy, Matthews correlation, F1, Pearson and Spearman.

  compute_metrics("cola", predictions=[1, 0, 1], labels=[1, 1, 1])
  # {'matthews_corr': 0.0, 'accuracy': 0.666...}

Each task's metric names live on its processor (`metric_names`); `compute_metrics` computes
them. The values match scikit-learn's `accuracy_score`, `matthews_corrcoef`, `f1_score` and
SciPy's `pearsonr`, `spearmanr` (average ranks for ties), including their conventions for
degenerate inputs: Matthews and F1 are 0.0 when undefined, a correlation with a constant
input is NaN. See SPEC.md, "Fine-tuning (original defaults)".
"""

import numpy as np

from albert_tf.data.classification.registry import get_processor


def _pair(predictions, labels):
  predictions = np.asarray(predictions)
  labels = np.asarray(labels)
  if predictions.ndim != 1 or labels.ndim != 1:
    raise ValueError(f"predictions and labels must be 1-D, got shapes {predictions.shape} "
                     f"and {labels.shape}")
  if len(predictions) != len(labels):
    raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
  if not len(labels):
    raise ValueError("no predictions to score")
  return predictions, labels


def accuracy(predictions, labels):
  """Fraction of predictions equal to their label."""
  predictions, labels = _pair(predictions, labels)
  return float(np.mean(predictions == labels))


def matthews_corrcoef(predictions, labels):
  """Matthews correlation (multiclass R_K; for two classes (TP*TN - FP*FN) / sqrt(...)).

  0.0 when undefined (all predictions or all labels one class), as scikit-learn.
  """
  predictions, labels = _pair(predictions, labels)
  classes, inverse = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  k = len(classes)
  confusion = np.zeros((k, k), np.float64)  # pragma: no mutate (float64 is the default)
  # Matthews is unchanged by scaling every count alike, so the 1.0 is not mutated.
  np.add.at(confusion, (inverse[:len(labels)], inverse[len(labels):]), 1.0)  # pragma: no mutate
  true_counts = confusion.sum(axis=1)
  pred_counts = confusion.sum(axis=0)
  correct = np.trace(confusion)
  total = confusion.sum()
  numerator = correct * total - true_counts @ pred_counts
  denominator = np.sqrt((total ** 2 - pred_counts @ pred_counts)
                        * (total ** 2 - true_counts @ true_counts))
  return float(numerator / denominator) if denominator else 0.0


def f1(predictions, labels, positive_label=1):
  """Binary F1 of `positive_label`: 2TP / (2TP + FP + FN); 0.0 when there is no positive."""
  predictions, labels = _pair(predictions, labels)
  predicted = predictions == positive_label
  actual = labels == positive_label
  true_positives = np.sum(predicted & actual)
  denominator = np.sum(predicted) + np.sum(actual)
  return float(2.0 * true_positives / denominator) if denominator else 0.0


def pearson(predictions, labels):
  """Pearson correlation; NaN when either input is constant."""
  x, y = _pair(predictions, labels)
  # float64 is NumPy's default here for integers; the dtypes only keep float32 inputs exact.
  x = x.astype(np.float64) - np.mean(x, dtype=np.float64)  # pragma: no mutate (see above)
  y = y.astype(np.float64) - np.mean(y, dtype=np.float64)  # pragma: no mutate (see above)
  denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
  if not denominator:
    return float("nan")  # pragma: no mutate (float() reads "NAN" alike)
  return float(np.clip(np.sum(x * y) / denominator, -1.0, 1.0))


def _average_ranks(values):
  """1-based ranks; tied values share the mean of their ranks (SciPy's rankdata 'average')."""
  # Any sort gives the same ranks: tied values share one.
  order = np.argsort(values, kind="mergesort")  # pragma: no mutate (ties share a rank)
  sorted_values = values[order]
  # Start of each run of equal values, and its length.
  starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
  lengths = np.diff(np.r_[starts, len(values)])
  run_ranks = starts + (lengths + 1) / 2.0
  ranks = np.empty(len(values), np.float64)  # pragma: no mutate (float64 is the default)
  ranks[order] = np.repeat(run_ranks, lengths)
  return ranks


def spearman(predictions, labels):
  """Spearman correlation: Pearson of the average ranks; NaN when either input is constant."""
  x, y = _pair(predictions, labels)
  return pearson(_average_ranks(x), _average_ranks(y))


METRICS = {
    "accuracy": accuracy,
    "matthews_corr": matthews_corrcoef,
    "f1": f1,
    "pearson": pearson,
    "spearman": spearman,
}


def compute_metrics(task_name_or_processor, predictions, labels):
  """The task's metrics as `{name: float}`, in the order of its `metric_names`.

  Classification: `predictions` are label ids [n] (scores [n, num_labels] are argmaxed),
  `labels` label ids [n]. Regression: scores [n] (or [n, 1]). `corr` is the mean of
  `pearson` and `spearman`, as GLUE reports STS-B.
  """
  processor = get_processor(task_name_or_processor)
  predictions = np.asarray(predictions)
  if predictions.ndim == 2:
    if processor.is_regression:
      if predictions.shape[1] != 1:
        raise ValueError(f"regression predictions must be [n] or [n, 1], got "
                         f"{predictions.shape}")
      predictions = predictions[:, 0]
    else:
      predictions = predictions.argmax(axis=-1)  # pragma: no mutate (axis 1 of a 2-D array)
  results = {}
  for name in processor.metric_names:
    if name == "corr":
      results[name] = (pearson(predictions, labels) + spearman(predictions, labels)) / 2.0
    elif name in METRICS:
      results[name] = METRICS[name](predictions, labels)
    else:
      raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}, corr")
  return results
