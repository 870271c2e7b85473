"""Tests for albert_tf.metrics.glue against values worked out by hand (shown beside each)."""

import math

import numpy as np
import pytest

from albert_tf.data.classification.csv_task import CsvProcessor
from albert_tf.metrics.glue import (accuracy, compute_metrics, f1, matthews_corrcoef, pearson,
                                    spearman)

# TP = 2 (items 0, 4), FP = 1 (item 1), FN = 1 (item 3), TN = 1 (item 2).
PREDICTIONS = [1, 1, 0, 0, 1]
LABELS = [1, 0, 0, 1, 1]


def test_accuracy_is_the_fraction_correct():
  assert accuracy(PREDICTIONS, LABELS) == pytest.approx(3 / 5)


def test_f1_of_the_positive_label():
  assert f1(PREDICTIONS, LABELS) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))  # 2/3
  assert f1([0, 0, 0], [0, 0, 0]) == 0.0  # no positive anywhere: 0, as scikit-learn
  assert f1(["b", "a"], ["b", "b"], positive_label="b") == pytest.approx(2 / 3)


def test_matthews_binary_is_tp_tn_minus_fp_fn_over_the_root():
  # (2*1 - 1*1) / sqrt((2+1)(2+1)(1+1)(1+1)) = 1/6
  assert matthews_corrcoef(PREDICTIONS, LABELS) == pytest.approx(1 / 6)
  assert matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)


def test_matthews_multiclass_uses_the_confusion_matrix():
  # correct 3 of 6, true and predicted counts (2, 2, 2): (3*6 - 12) / sqrt(24 * 24) = 0.25
  assert matthews_corrcoef([0, 1, 2, 0, 1, 2], [0, 1, 2, 1, 2, 0]) == pytest.approx(0.25)


def test_matthews_is_zero_when_one_side_is_a_single_class():
  assert matthews_corrcoef([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0


def test_pearson_by_hand():
  # deviations x (-2,-1,0,1,2), y (-2,0,1,0,1): 6 / sqrt(10 * 6)
  assert pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(6 / math.sqrt(60))
  assert pearson([1.0, 2.0, 3.0], [-2.0, -4.0, -6.0]) == pytest.approx(-1.0)


def test_pearson_of_a_constant_is_nan():
  assert math.isnan(pearson([3.0, 3.0, 3.0], [1.0, 2.0, 3.0]))


def test_spearman_averages_tied_ranks():
  # y ranks (1, 2.5, 4.5, 2.5, 4.5); with x ranks 1..5: 7 / sqrt(10 * 9)
  assert spearman([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(7 / math.sqrt(90))
  # A monotone but non-linear relation is a perfect rank correlation.
  assert spearman([1.0, 2.0, 3.0, 4.0], [1.0, 8.0, 27.0, 1000.0]) == pytest.approx(1.0)


def test_compute_metrics_uses_each_tasks_names():
  assert compute_metrics("sst-2", PREDICTIONS, LABELS) == {"accuracy": pytest.approx(0.6)}
  assert compute_metrics("cola", PREDICTIONS, LABELS) == {
      "matthews_corr": pytest.approx(1 / 6), "accuracy": pytest.approx(0.6)}
  for task in ("mrpc", "QQP"):
    assert compute_metrics(task, PREDICTIONS, LABELS) == {
        "f1": pytest.approx(2 / 3), "accuracy": pytest.approx(0.6)}
  p, s = 6 / math.sqrt(60), 7 / math.sqrt(90)
  assert compute_metrics("sts-b", [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == {
      "pearson": pytest.approx(p), "spearman": pytest.approx(s),
      "corr": pytest.approx((p + s) / 2)}
  for task in ("mnli", "mnli-mm", "qnli", "rte", "wnli"):
    assert list(compute_metrics(task, [0, 1], [0, 1])) == ["accuracy"]


def test_compute_metrics_argmaxes_scores_and_takes_a_processor():
  logits = np.array([[0.1, 0.9], [2.0, -1.0], [0.0, 3.0]])
  assert compute_metrics("sst-2", logits, [1, 0, 0]) == {"accuracy": pytest.approx(2 / 3)}
  regression = CsvProcessor("text", regression=True)
  result = compute_metrics(regression, np.array([[1.0], [2.0], [3.0]]), [1.0, 2.0, 3.5])
  # deviations x (-1, 0, 1), y (-7/6, -1/6, 8/6): (15/6) / sqrt(2 * 114/36)
  assert result["pearson"] == pytest.approx(2.5 / math.sqrt(2 * 114 / 36))
  assert result["spearman"] == pytest.approx(1.0)


def test_compute_metrics_rejects_mismatched_lengths_and_unknown_tasks():
  with pytest.raises(ValueError, match="3 predictions for 2 labels"):
    compute_metrics("sst-2", [0, 1, 1], [0, 1])
  with pytest.raises(ValueError, match="unknown task"):
    compute_metrics("imdb", [0], [0])


def test_inputs_must_be_two_nonempty_1d_sequences():
  with pytest.raises(ValueError, match=r"must be 1-D, got shapes \(1, 2\) and \(2,\)"):
    accuracy([[0, 1]], [0, 1])
  with pytest.raises(ValueError, match=r"must be 1-D, got shapes \(2,\) and \(1, 2\)"):
    accuracy([0, 1], [[0, 1]])
  with pytest.raises(ValueError, match="^no predictions to score$"):
    accuracy([], [])


def _matthews_by_definition(predictions, labels):
  # Gorodkin's R_K written from its definition: covariances of the one-hot indicator matrices.
  classes = sorted(set(predictions) | set(labels))
  x = [[float(p == c) for c in classes] for p in predictions]
  y = [[float(l == c) for c in classes] for l in labels]

  def cov(a, b):
    n = len(a)
    mean_a = [sum(row[k] for row in a) / n for k in range(len(classes))]
    mean_b = [sum(row[k] for row in b) / n for k in range(len(classes))]
    return sum((a[i][k] - mean_a[k]) * (b[i][k] - mean_b[k])
               for i in range(n) for k in range(len(classes)))

  return cov(x, y) / math.sqrt(cov(x, x) * cov(y, y))


def test_matthews_multiclass_matches_its_definition_when_predicted_and_true_counts_differ():
  predictions = [0, 0, 0, 1, 2, 2, 1, 0, 2]
  labels = [0, 1, 2, 1, 2, 0, 1, 1, 2]
  assert matthews_corrcoef(predictions, labels) == pytest.approx(
      _matthews_by_definition(predictions, labels))
  # Swapping the roles keeps the value: R_K is symmetric.
  assert matthews_corrcoef(labels, predictions) == pytest.approx(
      matthews_corrcoef(predictions, labels))


def test_a_perfect_correlation_is_exactly_one_despite_rounding():
  # Unclipped, these give 1.0000000000000002 and -1.0000000000000002 (float64 rounding).
  rising, falling = np.array([3.1, 4.2, 8.3, 4.1]), np.array([4.6, 0.6, 6.4, 8.5])
  assert pearson(rising, 0.1 * rising + 0.3) == 1.0
  assert pearson(falling, -0.1 * falling + 0.3) == -1.0


def test_ranks_are_one_based_and_ties_share_their_mean_rank():
  from albert_tf.metrics.glue import _average_ranks  # pylint: disable=import-outside-toplevel
  # SciPy's rankdata documentation: rankdata([0, 2, 3, 2]) == [1, 2.5, 4, 2.5].
  assert _average_ranks(np.array([0, 2, 3, 2])).tolist() == [1.0, 2.5, 4.0, 2.5]
  assert _average_ranks(np.array([5, 5, 5])).tolist() == [2.0, 2.0, 2.0]


def test_regression_scores_must_be_one_column_and_every_metric_name_must_be_known():
  with pytest.raises(ValueError, match=r"regression predictions must be \[n\] or \[n, 1\], got "
                                       r"\(2, 2\)"):
    compute_metrics(CsvProcessor("text", regression=True), [[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0])
  processor = CsvProcessor("text")
  processor.metric_names = ("accuracy", "bleu")
  with pytest.raises(ValueError, match="unknown metric 'bleu'; known: accuracy, matthews_corr, "
                                       "f1, pearson, spearman, corr"):
    compute_metrics(processor, [0], [0])
