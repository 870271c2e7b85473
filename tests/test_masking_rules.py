"""The n-gram masking's rules stated one by one, on synthetic ids where every piece starts a
word (so a word is one position): the 80/10/10 replacement, spans that never overlap, the
statistics `ngram_mask` keeps, probability 0, continued pieces of id 0, the 1/n weights.
Pure Python and fast: mutation testing (docs/testing.md) runs them against every mutant of
data/pretraining/masking.py."""

import random

import pytest

from albert_tf.data.pretraining.masking import MaskingOptions, ngram_cumulative_weights, ngram_mask

VOCAB, MASK, CLS, SEP = 1000, 4, 2, 3


def _options(**changes):
  return MaskingOptions(**dict(dict(
      vocab_size=VOCAB, mask_id=MASK, cls_id=CLS, sep_id=SEP, word_start=(True,) * VOCAB,
      masked_lm_prob=0.15, max_predictions_per_seq=40, ngram=3), **changes))


def _ids(rng, words=200):
  return [CLS] + [rng.randrange(10, VOCAB) for _ in range(words)] + [SEP]


def test_masked_positions_are_80_percent_mask_10_kept_10_random():
  rng, counts = random.Random(0), {"mask": 0, "kept": 0, "random": 0}
  for _ in range(300):
    ids = _ids(rng)
    output, positions, labels, _ = ngram_mask(ids, rng, _options())
    assert labels == [ids[i] for i in positions]
    for i in positions:
      counts["mask" if output[i] == MASK else "kept" if output[i] == ids[i] else "random"] += 1
  total = sum(counts.values())  # 300 x 30 predictions
  for name, share in (("mask", 0.8), ("kept", 0.1), ("random", 0.1)):
    # Binomial: 5 standard deviations (a random id equal to the original, 1 in 1000, is "kept").
    assert abs(counts[name] / total - share) < 5 * (share * (1 - share) / total) ** 0.5, counts


def test_spans_never_overlap_and_their_counts_add_up_to_the_masked_positions():
  rng = random.Random(1)
  for _ in range(200):
    span_counts = [0, 0, 0]
    _, positions, _, _ = ngram_mask(_ids(rng, 60), rng, _options(), span_counts=span_counts)
    assert len(set(positions)) == len(positions) == 9  # round(62 x 0.15), each once
    assert all(count >= 0 for count in span_counts)
    # Every masked word belongs to exactly one counted span of its length in words.
    assert sum(n * count for n, count in enumerate(span_counts, 1)) == len(positions)


def test_spans_do_not_run_past_the_last_word():
  """A span starting near the end is drawn among the lengths that fit, so none is cut short by
  the sequence's end (its counted length is the words it masked)."""
  rng, span_counts, masked = random.Random(2), [0, 0, 0], 0
  for _ in range(300):
    _, positions, _, _ = ngram_mask(_ids(rng, 3), rng,
                                    _options(max_predictions_per_seq=3, masked_lm_prob=1.0),
                                    span_counts=span_counts)
    masked += len(positions)
  assert span_counts[2] > 0  # three-word spans over all three words were drawn
  assert sum(n * count for n, count in enumerate(span_counts, 1)) == masked


def test_drawn_counts_count_each_draw_once():
  """With unigrams only every draw is a length of 1 and masks one word."""
  rng = random.Random(3)
  for _ in range(50):
    drawn, spans = [0], [0]
    _, positions, _, _ = ngram_mask(_ids(rng, 40), rng, _options(ngram=1),
                                    span_counts=spans, drawn_counts=drawn)
    assert drawn == spans == [len(positions)]


def test_probability_zero_masks_nothing():
  ids = _ids(random.Random(4))
  output, positions, labels, boundary = ngram_mask(ids, random.Random(4),
                                                   _options(masked_lm_prob=0.0))
  assert (output, positions, labels) == (ids, [], [])
  assert boundary == [1] * len(ids)


def test_a_continued_piece_of_id_zero_is_written_as_zero():
  """Continued pieces arrive as `id + vocab_size`: the first of them, vocab_size itself, is id 0."""
  word_start = (True,) * VOCAB + (False,) * VOCAB
  options = _options(word_start=word_start, continued_pieces=True, masked_lm_prob=0.0)
  output, _, _, _ = ngram_mask([CLS, 10, VOCAB, VOCAB + 7, SEP], random.Random(5), options)
  assert output == [CLS, 10, 0, 7, SEP]
  with pytest.raises(ValueError, match=r"^continued_pieces needs word_start for 2 \* vocab_size "
                                       r"ids$"):
    _options(continued_pieces=True)


def test_ngram_weights_are_cumulative_one_over_n():
  assert ngram_cumulative_weights(3, True) == pytest.approx((1.0, 1.5, 1.5 + 1 / 3))
  assert ngram_cumulative_weights(3, False) == pytest.approx((1 / 3, 1 / 3 + 0.5, 1 / 3 + 1.5))
