"""Tests for albert_tf.modeling.crf against brute force over every tag sequence."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from conftest import float32_atol
from albert_tf.modeling.crf import CRF, allowed_transitions

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def make_crf(num_tags, seed, constrained=False, use_boundary_scores=True):
  """A built CRF with random (not initial) transitions and boundary scores."""
  constraints = allowed_transitions(LABELS) if constrained else (None, None)
  crf = CRF(num_tags, *constraints, use_boundary_scores=use_boundary_scores)
  crf.build()
  rng = np.random.default_rng(seed)
  crf.set_weights([rng.normal(0.0, 1.0, w.shape).astype(np.float32) for w in crf.weights])
  return crf


def sequence_score(crf, emissions, positions, path, allowed_only):
  """float64 score of `path` on the selected `positions`; None if it breaks a constraint
  and `allowed_only`."""
  transitions = crf.transitions.numpy().astype(np.float64)
  start = end = np.zeros(crf.num_tags)
  if crf.use_boundary_scores:
    start, end = crf.start_scores.numpy(), crf.end_scores.numpy()
  if allowed_only and crf.allowed is not None:
    if not crf.allowed_start[path[0]] or not all(
        crf.allowed[a, b] for a, b in zip(path, path[1:])):
      return None
  score = start[path[0]] + end[path[-1]]
  score += sum(emissions[t, tag] for t, tag in zip(positions, path))
  score += sum(transitions[a, b] for a, b in zip(path, path[1:]))
  return float(score)


def brute_force(crf, emissions, mask, allowed_only=False):
  """Per sequence: (log partition, {path: score}) over every path on the masked positions."""
  results = []
  for sequence, sequence_mask in zip(emissions.astype(np.float64), mask):
    positions = np.flatnonzero(sequence_mask)
    scores = {}
    for path in itertools.product(range(crf.num_tags), repeat=len(positions)):
      score = sequence_score(crf, sequence, positions, path, allowed_only)
      if score is not None:
        scores[path] = score
    values = np.array(list(scores.values()))
    results.append((float(np.log(np.sum(np.exp(values - values.max()))) + values.max()),
                    scores))
  return results


def tags_on(path, positions, seq):
  tags = np.zeros(seq, np.int64)
  tags[positions] = path
  return tags


# Lengths 4, 1, 3 and a mask with holes (positions 0, 2, 3): the chain skips what is unmasked.
MASK = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0], [0, 1, 0, 1]], bool)


def tolerance(reference, seq):
  # The longest chain of float32 additions behind a log-likelihood: per position the
  # transition, the emission and logsumexp's max; then the end score and the subtraction.
  # (The logsumexp's sum of exponentials is of numbers below 1: its rounding is far smaller.)
  return float32_atol(np.abs(reference), 3 * seq + 2)


@pytest.mark.parametrize("num_tags,use_boundary_scores", [(3, True), (4, False), (4, True)])
def test_log_likelihood_is_the_score_minus_the_brute_force_partition(num_tags,
                                                                     use_boundary_scores):
  crf = make_crf(num_tags, seed=num_tags, use_boundary_scores=use_boundary_scores)
  rng = np.random.default_rng(10 + num_tags)
  emissions = rng.normal(0.0, 2.0, (4, 4, num_tags)).astype(np.float32)
  tags = rng.integers(0, num_tags, (4, 4))
  expected, magnitudes = [], []
  for (log_partition, scores), sequence_tags, sequence_mask in zip(
      brute_force(crf, emissions, MASK), tags, MASK):
    gold = scores[tuple(sequence_tags[sequence_mask])]
    expected.append(gold - log_partition)
    magnitudes += [gold, log_partition]
  got = crf.log_likelihood(emissions, tags, MASK).numpy()
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance(magnitudes, 4))


def test_decode_is_the_brute_force_argmax():
  crf = make_crf(4, seed=1)
  emissions = np.random.default_rng(2).normal(0.0, 2.0, (4, 4, 4)).astype(np.float32)
  tags, score = crf.decode(emissions, MASK)
  assert tags.dtype == tf.int32 and tags.shape == (4, 4)
  for row, (_, scores) in enumerate(brute_force(crf, emissions, MASK)):
    best = max(scores, key=scores.get)
    positions = np.flatnonzero(MASK[row])
    np.testing.assert_array_equal(tags[row], tags_on(best, positions, 4))  # 0 off the mask
    np.testing.assert_allclose(score[row], scores[best], rtol=0,
                               atol=tolerance(scores[best], 4))
  np.testing.assert_array_equal(crf(emissions, mask=MASK), tags)  # calling the layer decodes


def test_allowed_transitions_lets_i_follow_only_its_own_type():
  allowed, allowed_start = allowed_transitions(LABELS)
  # rows: from O, B-PER, I-PER, B-LOC, I-LOC; columns: to the same.
  np.testing.assert_array_equal(allowed, [[1, 1, 0, 1, 0],
                                          [1, 1, 1, 1, 0],
                                          [1, 1, 1, 1, 0],
                                          [1, 1, 0, 1, 1],
                                          [1, 1, 0, 1, 1]])
  np.testing.assert_array_equal(allowed_start, [1, 1, 0, 1, 0])
  with pytest.raises(ValueError, match="BIO"):
    allowed_transitions(["O", "S-PER"])


def invalid_transitions(tags, mask):
  """(row, position) of every I-X that starts a sequence or follows neither B-X nor I-X."""
  bad = []
  for row, (sequence, sequence_mask) in enumerate(zip(tags, mask)):
    labels = [LABELS[t] for t in np.asarray(sequence)[sequence_mask]]
    for position, label in enumerate(labels):
      previous = labels[position - 1] if position else "O"
      if label.startswith("I-") and previous[2:] != label[2:]:
        bad.append((row, position))
  return bad


def test_constrained_decoding_never_emits_an_invalid_i_tag():
  rng = np.random.default_rng(3)
  # Emissions that favour I- tags, on a batch of lengths 1 to 12.
  emissions = rng.normal(0.0, 3.0, (64, 12, 5)).astype(np.float32)
  emissions[:, :, [2, 4]] += 4.0
  mask = np.arange(12)[None, :] < rng.integers(1, 13, (64, 1))
  constrained = make_crf(5, seed=4, constrained=True)
  free = make_crf(5, seed=4)
  assert invalid_transitions(free.decode(emissions, mask)[0].numpy(), mask)  # the test can fail
  assert invalid_transitions(constrained.decode(emissions, mask)[0].numpy(), mask) == []


def test_constrained_likelihood_normalises_over_the_allowed_sequences_only():
  crf = make_crf(5, seed=5, constrained=True)
  emissions = np.random.default_rng(6).normal(0.0, 2.0, (4, 4, 5)).astype(np.float32)
  expected_tags, expected, magnitudes = [], [], []
  for row, (log_partition, scores) in enumerate(brute_force(crf, emissions, MASK, True)):
    best = max(scores, key=scores.get)  # a valid path: its likelihood is finite
    expected_tags.append(tags_on(best, np.flatnonzero(MASK[row]), 4))
    expected.append(scores[best] - log_partition)
    magnitudes += [scores[best], log_partition]
  got = crf.log_likelihood(emissions, np.array(expected_tags), MASK).numpy()
  np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance(magnitudes, 4))
  np.testing.assert_array_equal(crf.decode(emissions, MASK)[0], expected_tags)
  # A gold sequence that breaks them (O then I-PER) costs a large, finite penalty.
  broken = crf.log_likelihood(emissions[:1], [[0, 2, 2, 0]], MASK[:1]).numpy()
  assert np.isfinite(broken).all() and broken[0] < -1000


def test_runs_in_a_tf_function_with_unknown_batch_and_length():
  crf = make_crf(5, seed=7, constrained=True)
  signature = [tf.TensorSpec([None, None, 5], tf.float32), tf.TensorSpec([None, None], tf.int32),
               tf.TensorSpec([None, None], tf.bool)]
  likelihood = tf.function(crf.log_likelihood, input_signature=signature)
  decode = tf.function(crf.decode, input_signature=[signature[0], signature[2]])
  rng = np.random.default_rng(8)
  for batch, seq in [(3, 6), (1, 2), (5, 9)]:
    emissions = rng.normal(0.0, 2.0, (batch, seq, 5)).astype(np.float32)
    tags = rng.integers(0, 5, (batch, seq)).astype(np.int32)
    mask = np.arange(seq)[None, :] < rng.integers(1, seq + 1, (batch, 1))
    np.testing.assert_array_equal(likelihood(emissions, tags, mask),
                                  crf.log_likelihood(emissions, tags, mask))
    for graph, eager in zip(decode(emissions, mask), crf.decode(emissions, mask)):
      np.testing.assert_array_equal(graph, eager)
  assert likelihood.experimental_get_tracing_count() == 1  # one graph for every shape
  assert decode.experimental_get_tracing_count() == 1


def test_decode_survives_a_saved_model(tmp_path):
  crf = make_crf(5, seed=9, constrained=True)
  module = tf.Module()
  module.crf = crf
  module.decode = tf.function(
      lambda emissions, mask: dict(zip(("tags", "score"), crf.decode(emissions, mask))),
      input_signature=[tf.TensorSpec([None, None, 5], tf.float32),
                       tf.TensorSpec([None, None], tf.bool)])
  tf.saved_model.save(module, str(tmp_path))
  loaded = tf.saved_model.load(str(tmp_path))
  emissions = np.random.default_rng(10).normal(0.0, 2.0, (2, 7, 5)).astype(np.float32)
  mask = np.arange(7)[None, :] < np.array([[7], [3]])
  restored = loaded.decode(emissions, mask)
  tags, score = crf.decode(emissions, mask)
  np.testing.assert_array_equal(restored["tags"], tags)
  np.testing.assert_array_equal(restored["score"], score)


def test_gradients_reach_the_transitions_and_raise_the_likelihood():
  crf = make_crf(5, seed=11, constrained=True)
  rng = np.random.default_rng(12)
  emissions = tf.constant(rng.normal(0.0, 1.0, (2, 5, 5)).astype(np.float32))
  target = tf.constant([[1, 2, 0, 3, 4], [3, 4, 4, 0, 0]])
  mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])  # 0/1 masks work as bool ones
  optimizer = tf_keras.optimizers.SGD(0.5)
  history = []
  for _ in range(5):
    with tf.GradientTape() as tape:
      likelihood = tf.reduce_sum(crf.log_likelihood(emissions, target, mask))
      loss = -likelihood
    gradients = tape.gradient(loss, crf.trainable_variables)
    assert all(np.isfinite(g.numpy()).all() for g in gradients)
    # Forbidden transitions are constants to the loss: no gradient reaches them.
    assert not np.any(gradients[0].numpy()[~crf.allowed])
    optimizer.apply_gradients(zip(gradients, crf.trainable_variables))
    history.append(float(likelihood))
  assert len(gradients) == 3 and np.abs(gradients[0].numpy()).sum() > 0
  assert all(later > earlier for earlier, later in zip(history, history[1:]))


def test_computes_in_float32_under_a_mixed_policy():
  mixed = CRF(5, dtype=tf_keras.mixed_precision.Policy("mixed_bfloat16"))
  mixed.build()
  reference = make_crf(5, seed=13)
  mixed.set_weights(reference.get_weights())
  assert all(w.dtype == tf.float32 for w in mixed.weights)
  emissions = tf.cast(np.random.default_rng(14).normal(0.0, 2.0, (2, 4, 5)), tf.bfloat16)
  tags = tf.constant([[0, 1, 2, 0], [3, 4, 0, 0]])
  got = mixed.log_likelihood(emissions, tags)
  assert got.dtype == tf.float32
  np.testing.assert_array_equal(got, reference.log_likelihood(tf.cast(emissions, tf.float32),
                                                              tags))
  assert mixed.decode(emissions)[1].dtype == tf.float32


def test_config_round_trips_with_its_constraints():
  crf = CRF(5, *allowed_transitions(LABELS), use_boundary_scores=False, name="ner_crf")
  config = crf.get_config()
  restored = CRF.from_config(config)
  assert restored.get_config() == config
  np.testing.assert_array_equal(restored.allowed, crf.allowed)
  np.testing.assert_array_equal(restored.allowed_start, crf.allowed_start)
  restored.build()
  assert [w.name for w in restored.weights] == ["transitions:0"]
  with pytest.raises(ValueError, match="allowed has shape"):
    CRF(4, *allowed_transitions(LABELS))


def test_decoding_no_position_gives_no_tags():
  """seq 0 (an NER request whose texts hold no word): [batch, 0] tags and zero scores, in a
  graph of unknown length too."""
  crf = make_crf(5, seed=7, constrained=True)
  decode = tf.function(crf.decode, input_signature=[tf.TensorSpec([None, None, 5])])
  for batch in (0, 2):
    tags, score = decode(tf.zeros([batch, 0, 5]))
    assert tags.shape == (batch, 0) and score.numpy().tolist() == [0.0] * batch
