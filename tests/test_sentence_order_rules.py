"""The sentence-order instances' rules (data/pretraining/instances.py, the original's
`create_instances_from_document`) stated on synthetic documents whose every token id is unique
and increasing through the corpus, so each instance's segments say where they came from: the
`[CLS] A [SEP] B [SEP]` layout, A and B contiguous runs of one document, label 0 when B follows
A and 1 when they are swapped or B comes from another document, the length bound and target,
truncation from the longer segment, no token used twice, and the statistics kept. Pure Python:
mutation testing (docs/testing.md) runs these against every mutant of instances.py."""

import random

from albert_tf.data.pretraining.instances import InstanceOptions, create_instances, truncate_pair
from albert_tf.data.pretraining.masking import MaskingOptions

CLS, SEP, VOCAB = 2, 3, 70000
NO_MASKING = MaskingOptions(vocab_size=VOCAB, mask_id=4, cls_id=CLS, sep_id=SEP,
                            word_start=(True,) * VOCAB, masked_lm_prob=0.0)


def _corpus(rng, documents=40):
  """Documents of 1-9 sentences of 1-12 tokens; ids increase through the corpus, and document
  d's ids lie in [1000 * (d + 1), 1000 * (d + 2))."""
  corpus = []
  for d in range(documents):
    next_id, document = 1000 * (d + 1), []
    for _ in range(rng.randint(1, 9)):
      length = rng.randint(1, 12)
      document.append(list(range(next_id, next_id + length)))
      next_id += length
    corpus.append(document)
  return corpus


def _segments(instance, max_seq_length):
  ids, segments = instance.input_ids, instance.segment_ids
  assert len(ids) == len(segments) <= max_seq_length
  first_sep = ids.index(SEP)
  a, b = ids[1:first_sep], ids[first_sep + 1:-1]
  assert ids[0] == CLS and ids[-1] == SEP and a and b and SEP not in b
  assert segments == [0] * (len(a) + 2) + [1] * (len(b) + 1)
  assert instance.masked_lm_positions == [] and instance.token_boundary[0] == 1
  return a, b


def _contiguous(tokens):
  return tokens == list(range(tokens[0], tokens[0] + len(tokens)))


def _instances(options, seed, documents=40):
  rng = random.Random(seed)
  corpus = _corpus(rng, documents)
  out, stats = [], {}
  for d, document in enumerate(corpus):
    for instance in create_instances(document, d, corpus, rng, options, NO_MASKING, stats):
      out.append((d, instance))
  return corpus, out, stats


def test_sop_instances_pair_adjacent_runs_of_one_document_in_or_against_their_order():
  options = InstanceOptions(max_seq_length=24, short_seq_prob=0.0)
  labels, partners, counted = [], 0, 0
  for seed in range(5):
    corpus, instances, stats = _instances(options, seed)
    seen, kept = set(), 0
    for d, instance in instances:
      a, b = _segments(instance, 24)
      assert _contiguous(a) and _contiguous(b)
      own = lambda tokens: tokens[0] // 1000 == d + 1  # pylint: disable=cell-var-from-loop
      labels.append(instance.sentence_order_label)
      if not own(b) or not own(a):  # a one-sentence chunk: B from another document
        assert own(a) and not own(b) and instance.sentence_order_label == 1
        partners += 1
        mine = a
      elif instance.sentence_order_label == 0:
        assert a[-1] < b[0]  # B after A (truncation may cut the tokens between them)
        mine = a + b
      else:
        assert b[-1] < a[0]  # swapped
        mine = b + a
      assert not seen & set(mine)  # no token of the document in two instances
      seen |= set(mine)
      kept += len(mine)
    total = sum(len(s) for document in corpus for s in document)
    assert stats["dropped_tokens"] == total - kept
    counted += stats.get("random_partner", 0)
  assert partners == counted > 0
  share = sum(labels) / len(labels)
  assert 0.4 < share < 0.75, share  # swaps are half of the pairs, random partners all label 1


def test_full_length_targets_fill_every_instance_but_a_documents_last():
  options = InstanceOptions(max_seq_length=24, short_seq_prob=0.0, pure_sop=True)
  for seed in range(3):
    _, instances, stats = _instances(options, seed)
    by_document = {}
    for d, instance in instances:
      by_document.setdefault(d, []).append(instance)
      a, b = _segments(instance, 24)
      assert a[0] // 1000 == b[0] // 1000 == d + 1  # pure SOP: never another document
    for document_instances in by_document.values():
      for instance in document_instances[:-1]:
        assert len(instance.input_ids) == 24  # the chunk reached 21 tokens, cut to 21
    assert "random_partner" not in stats


def test_random_next_sentence_takes_b_from_another_document_for_label_1():
  options = InstanceOptions(max_seq_length=32, short_seq_prob=0.0, random_next_sentence=True)
  counts = {0: 0, 1: 0}
  for seed in range(4):
    corpus, instances, stats = _instances(options, seed)
    kept = set()
    for d, instance in instances:
      a, b = _segments(instance, 32)
      assert a[0] // 1000 == d + 1
      counts[instance.sentence_order_label] += 1
      if instance.sentence_order_label == 1:
        assert b[0] // 1000 != d + 1
        mine = a
      else:
        assert b[0] // 1000 == d + 1 and a[-1] < b[0]
        mine = a + b
      assert not kept & set(mine)
      kept |= set(mine)
    # The sentences a random partner leaves unused go back into the next chunk: every token of
    # the corpus is in an instance or counted as dropped.
    total = sum(len(s) for document in corpus for s in document)
    assert stats["dropped_tokens"] == total - len(kept)
  assert counts[1] > 0.35 * sum(counts.values()) and counts[0] > 0.25 * sum(counts.values())


def test_short_targets_make_shorter_instances_at_their_share():
  lengths = {}
  for prob in (0.0, 1.0):
    options = InstanceOptions(max_seq_length=64, short_seq_prob=prob)
    lengths[prob] = [len(i.input_ids) for _, i in _instances(options, 7, documents=60)[1]]
  assert max(lengths[1.0]) <= 64 and max(lengths[0.0]) <= 64
  assert sum(lengths[1.0]) / len(lengths[1.0]) < 0.8 * sum(lengths[0.0]) / len(lengths[0.0])


def test_truncation_drops_from_the_longer_segment_b_on_ties_at_both_ends():
  rng = random.Random(0)
  fronts = backs = 0
  a_starts, b_starts, b_ends = set(), set(), set()
  for _ in range(200):
    a, b = truncate_pair(list(range(10)), list(range(100, 104)), 8, rng)
    assert b == list(range(100, 104)) and len(a) == 4 and _contiguous(a)
    fronts += a[0] > 0
    backs += a[-1] < 9
    a, b = truncate_pair(list(range(5)), list(range(100, 105)), 9, rng)
    assert a == list(range(5)) and len(b) == 4  # equal lengths: B loses the token
    # Both long: A down to B's length, then the two in turn (B first on ties).
    a, b = truncate_pair(list(range(20)), list(range(100, 112)), 10, rng)
    assert (len(a), len(b)) == (5, 5) and _contiguous(a) and _contiguous(b)
    a_starts.add(a[0])
    b_starts.add(b[0])
    b_ends.add(b[-1])
  assert fronts > 50 and backs > 50  # from the front and from the back, at random
  assert max(a_starts) >= 8 and max(b_starts) >= 104 and min(b_ends) <= 107


def _sentence_of(corpus):
  """token id -> (document, sentence index)."""
  return {t: (d, k) for d, document in enumerate(corpus) for k, s in enumerate(document)
          for t in s}


def test_masked_instances_keep_their_labels_and_the_masking_statistics():
  masking = MaskingOptions(vocab_size=VOCAB, mask_id=4, cls_id=CLS, sep_id=SEP,
                           word_start=(True,) * VOCAB, masked_lm_prob=0.15, ngram=3)
  rng = random.Random(11)
  corpus, stats, masked = _corpus(rng), {}, 0
  options = InstanceOptions(max_seq_length=24, short_seq_prob=0.0)
  for d, document in enumerate(corpus):
    for instance in create_instances(document, d, corpus, rng, options, masking, stats):
      ids = list(instance.input_ids)
      for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
        ids[position] = label
      first_sep = ids.index(SEP)
      assert _contiguous(ids[1:first_sep]) and _contiguous(ids[first_sep + 1:-1])
      masked += len(instance.masked_lm_positions)
  assert masked > 0 and len(stats["span_counts"]) == len(stats["drawn_counts"]) == 3
  assert sum(n * count for n, count in enumerate(stats["span_counts"], 1)) == masked
  assert 0 < sum(stats["drawn_counts"]) <= masked
  # Unigrams: every draw is counted once and masks one token; without stats, nothing counted.
  unigrams, stats, masked = MaskingOptions(**{**vars(masking), "ngram": 1}), {}, 0
  for d, document in enumerate(corpus):
    for instance in create_instances(document, d, corpus, rng, options, unigrams, stats):
      masked += len(instance.masked_lm_positions)
  assert stats["drawn_counts"] == stats["span_counts"] == [masked]
  assert create_instances(corpus[0], 0, corpus, rng, options, masking)[0].masked_lm_positions


def test_sentences_longer_than_the_target_pair_with_one_sentence_of_another_document():
  """A chunk of one sentence (it alone reaches the target) takes B from a random document of
  the pool (any, the first and the last included, never itself), from a random sentence on,
  until B reaches the target less A: here B is that one sentence, cut to fit."""
  rng = random.Random(12)
  corpus = [[list(range(1000 * (d + 1) + 30 * k, 1000 * (d + 1) + 30 * k + 25))
             for k in range(4)] for d in range(6)]
  where, partners, starts, stats = _sentence_of(corpus), set(), set(), {}
  options = InstanceOptions(max_seq_length=24, short_seq_prob=0.0)
  for _ in range(40):
    for d, document in enumerate(corpus):
      instances = create_instances(document, d, corpus, rng, options, NO_MASKING, stats)
      assert [where[_segments(i, 24)[0][0]] for i in instances] == \
          [(d, k) for k in range(4)]  # each sentence once, in order, as A
      for instance in instances:
        _, b = _segments(instance, 24)
        (other, k), = {where[t] for t in b}
        assert other != d and instance.sentence_order_label == 1
        partners.add(other)
        starts.add(k)
  assert partners == set(range(6)) and starts == set(range(4))
  assert stats["random_partner"] == 40 * 6 * 4
  assert stats["dropped_tokens"] == 40 * 6 * 4 * (25 - 11)  # 21 = 11 of A + 10 of B (ties: B)


def test_pure_sop_joins_a_long_sentence_with_the_next_and_skips_a_lone_last_one():
  options = InstanceOptions(max_seq_length=24, short_seq_prob=0.0, pure_sop=True)
  rng = random.Random(13)
  corpus = [[list(range(1000 * (d + 1) + 30 * k, 1000 * (d + 1) + 30 * k + 25))
             for k in range(5)] for d in range(5)]
  lone, stats = {}, {}
  assert create_instances([list(range(100, 125))], 0, corpus, rng, options, NO_MASKING, lone) == []
  assert lone == {"single_sentence_skipped": 1, "dropped_tokens": 25, "span_counts": [0, 0, 0],
                  "drawn_counts": [0, 0, 0]}
  where = _sentence_of(corpus)
  for d, document in enumerate(corpus):
    instances = create_instances(document, d, corpus, rng, options, NO_MASKING, stats)
    assert len(instances) == 2  # sentences 0 and 1, 2 and 3; 4 alone at the end is skipped
    for instance, first in zip(instances, (0, 2)):
      a, b = _segments(instance, 24)
      assert {where[a[0]], where[b[0]]} == {(d, first), (d, first + 1)}
  assert stats["single_sentence_skipped"] == 5
  assert stats["dropped_tokens"] == 5 * (2 * (50 - 21) + 25)
  assert "random_partner" not in stats


def test_a_target_is_reached_by_whole_sentences_and_short_targets_go_down_to_two():
  """One-token sentences: a chunk closes as soon as it holds the target's tokens, so every
  instance but a document's last holds exactly its target (2 to max_num_tokens when short)."""
  options = InstanceOptions(max_seq_length=9, short_seq_prob=1.0)
  rng, sizes = random.Random(14), set()
  for _ in range(300):
    document = [[5000 + k] for k in range(12)]
    instances = create_instances(document, 0, [document, [[9000]]], rng, options, NO_MASKING)
    for instance in instances[:-1]:
      a, b = _segments(instance, 9)
      sizes.add(len(a) + len(b))
  assert sizes == {2, 3, 4, 5, 6}
  full = InstanceOptions(max_seq_length=9, short_seq_prob=0.0)
  document = [[5000 + k] for k in range(12)]
  instances = create_instances(document, 0, [document, [[9000]]], rng, full, NO_MASKING)
  assert [len(i.input_ids) for i in instances] == [9, 9]  # two chunks of 6 one-token sentences
