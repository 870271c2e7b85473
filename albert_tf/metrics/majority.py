"""The majority-class baseline: what a classifier that predicts one label for every example
scores, and the rule that names a run which did no better.

A fine-tuning run can end as a constant classifier (ALBERT's larger models especially: the
original's issues and the ablation study in benchmarks/ablations met it). Its dev accuracy is
then the dev set's majority share exactly: to within one example, the test here.
"""

import collections


def majority_share(labels):
  """The most common label's share of `labels` (any hashable values); 0.0 for none."""
  counts = collections.Counter(labels)
  return max(counts.values()) / len(labels) if counts else 0.0


def at_majority_share(accuracy, share, examples):
  """Whether `accuracy` on `examples` dev examples is `share`, the majority label's, to within
  one example: the score of a constant prediction, a classifier that most likely learned
  nothing."""
  return abs(accuracy - share) * examples < 0.5
