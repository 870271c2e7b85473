"""Sentence-order instances from documents (the original's `create_instances_from_document`).

A document is a list of sentences, each a list of token ids. Every random choice comes from
the `random.Random` passed in, so a seeded rng reproduces the instances exactly.
"""

import dataclasses

from albert_tf.data.pretraining.masking import ngram_mask


@dataclasses.dataclass
class Instance:
  """One pretraining example before padding: `[CLS] A [SEP] B [SEP]`, masked."""
  input_ids: list
  segment_ids: list
  token_boundary: list
  masked_lm_positions: list
  masked_lm_ids: list
  sentence_order_label: int  # 0 = original order, 1 = swapped or B from another document


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
  max_seq_length: int = 512
  short_seq_prob: float = 0.1
  random_next_sentence: bool = False
  pure_sop: bool = False


def truncate_pair(a, b, max_num_tokens, rng):
  """Drops tokens from the longer segment (A only when strictly longer), front or back at
  random, until the pair fits; returns the kept (a, b)."""
  a_lo, a_hi, b_lo, b_hi = 0, len(a), 0, len(b)
  random = rng.random
  # (`<=` for `<` in the coin flips below differs with probability 0.)
  while (a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens:
    if a_hi - a_lo > b_hi - b_lo:
      if random() < 0.5:  # pragma: no mutate
        a_lo += 1
      else:
        a_hi -= 1
    else:
      if random() < 0.5:  # pragma: no mutate
        b_lo += 1
      else:
        b_hi -= 1
  return a[a_lo:a_hi], b[b_lo:b_hi]


def create_instances(document, document_index, pool, rng, options, masking, stats=None):
  """Instances of one document; random-document partners come from `pool` (a list of
  documents that includes this one at `document_index`).

  `stats` (optional dict) counts `random_partner` instances (B from another document),
  `single_sentence_skipped` under `pure_sop`, `dropped_tokens` (this document's tokens that
  none of its instances holds: cut by truncation, or a lone last sentence skipped under
  `pure_sop`; a random partner's tokens are not this document's), and n-gram lengths under
  `span_counts` (masked) and `drawn_counts` (drawn with all lengths available).
  """
  max_num_tokens = options.max_seq_length - 3
  target = max_num_tokens
  if rng.random() < options.short_seq_prob:  # pragma: no mutate  (`<=`: probability 0)
    target = rng.randint(2, max_num_tokens)
  span_counts = drawn_counts = None
  if stats is not None:
    span_counts = stats.setdefault("span_counts", [0] * masking.ngram)
    drawn_counts = stats.setdefault("drawn_counts", [0] * masking.ngram)
  cls_id, sep_id = masking.cls_id, masking.sep_id
  instances = []
  chunk, chunk_length = [], 0
  i = 0
  n_sentences = len(document)
  while i < n_sentences:
    sentence = document[i]
    chunk.append(sentence)
    chunk_length += len(sentence)
    at_end = i == n_sentences - 1
    if at_end or chunk_length >= target:
      if options.pure_sop and len(chunk) == 1 and not at_end:
        # --pure_sop: a one-sentence chunk waits for the next sentence instead of being paired
        # with a random document, so every label-1 instance is a swap.
        i += 1
        continue
      if options.pure_sop and len(chunk) == 1:
        if stats is not None:
          stats["single_sentence_skipped"] = stats.get("single_sentence_skipped", 0) + 1
          stats["dropped_tokens"] = stats.get("dropped_tokens", 0) + chunk_length
        break
      a_end = 1
      # A chunk of 2 has a_end 1 either way (`> 2` only skips randint(1, 1)'s draw).
      if len(chunk) >= 2:  # pragma: no mutate
        a_end = rng.randint(1, len(chunk) - 1)
      tokens_a = [t for s in chunk[:a_end] for t in s]
      tokens_b = []
      random_partner = len(chunk) == 1
      if not random_partner and options.random_next_sentence:
        random_partner = rng.random() < 0.5  # pragma: no mutate  (`<=`: probability 0)
      if random_partner:
        label = 1
        if stats is not None:
          stats["random_partner"] = stats.get("random_partner", 0) + 1
        target_b = target - len(tokens_a)
        for _ in range(10):  # pragma: no mutate  (11 tries: another document as surely)
          other = rng.randint(0, len(pool) - 1)
          if other != document_index:
            break
        random_document = pool[other]
        start = rng.randint(0, len(random_document) - 1)
        for s in random_document[start:]:
          tokens_b.extend(s)
          if len(tokens_b) >= target_b:
            break
        # The chunk's unused sentences go back for the next chunk.
        i -= len(chunk) - a_end
      elif not options.random_next_sentence and rng.random() < 0.5:  # pragma: no mutate
        label = 1
        tokens_b = [t for s in chunk[a_end:] for t in s]
        tokens_a, tokens_b = tokens_b, tokens_a
      else:
        label = 0
        tokens_b = [t for s in chunk[a_end:] for t in s]
      own = len(tokens_a) if random_partner else len(tokens_a) + len(tokens_b)
      tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
      if stats is not None:
        kept = len(tokens_a) if random_partner else len(tokens_a) + len(tokens_b)
        stats["dropped_tokens"] = stats.get("dropped_tokens", 0) + own - kept
      ids = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
      segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
      output, positions, labels, boundary = ngram_mask(ids, rng, masking, span_counts,
                                                         drawn_counts)
      instances.append(Instance(output, segment_ids, boundary, positions, labels, label))
      chunk, chunk_length = [], 0
    i += 1
  return instances
