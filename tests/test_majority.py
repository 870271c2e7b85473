"""Tests for albert_tf.metrics.majority: the majority share and the constant-classifier rule."""

from albert_tf.metrics.majority import at_majority_share, majority_share


def test_the_majority_share_is_the_most_common_labels_fraction():
  assert majority_share(["pos", "neg", "pos", "pos"]) == 0.75
  assert majority_share([0, 1, 2, 2, 1, 2]) == 0.5
  assert majority_share([7]) == 1.0
  assert majority_share([]) == 0.0


def test_an_accuracy_within_half_an_example_of_the_share_is_a_constant_classifier():
  # 872 SST-2 dev examples, 444 positive: a constant "positive" scores 444 / 872.
  share = 444 / 872
  assert at_majority_share(444 / 872, share, 872)
  assert not at_majority_share(445 / 872, share, 872)  # one example better
  assert not at_majority_share(443 / 872, share, 872)  # one example worse
  # Exactly half an example away is not within it (2 examples: 1.5 right is no accuracy).
  assert not at_majority_share(0.75, 0.5, 2)
