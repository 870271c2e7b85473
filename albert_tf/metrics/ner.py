"""Entity-level NER metrics, counted as conlleval and seqeval's default mode count them.

  gold = [["B-PER", "I-PER", "O", "B-LOC"]]
  predicted = [["B-PER", "I-PER", "O", "I-ORG"]]
  ner_results(gold, predicted)
  # {'precision': 0.5, 'recall': 0.5, 'f1': 0.5, 'token_accuracy': 0.75,
  #  'LOC_precision': 0.0, 'LOC_recall': 0.0, 'LOC_f1': 0.0, 'LOC_support': 1,
  #  'ORG_precision': 0.0, ..., 'ORG_support': 0, 'PER_precision': 1.0, ..., 'PER_support': 1}

An entity is a maximal chunk under conlleval's `startOfChunk` / `endOfChunk` rules, which read
each tag against the one before it. They are lenient on purpose, so that a model's invalid
output still scores the way the CoNLL shared tasks scored it: an `I-X` after `O`, after an
entity of another type or after an `E-`/`S-` starts a new chunk; `B-` and `S-` always start
one; a change of type ends one; `E-` and `S-` end one. Tags in IOB2 (BIO), IOBES (BIOES) and
BMES (whose `M-` is BIOES's `I-`, as in MSRA / SIGHAN files) are read by the same rules, so
predictions in any of them are scored against gold in any.
(seqeval's `mode="strict"` instead drops chunks that are invalid in one scheme; we follow the
default, which is what papers report on CoNLL-2003.)

A predicted entity is correct when a gold entity in the same sentence has the same type,
start and end. Precision, recall and F1 are micro-averaged over all entities; each type also
gets its own, with `support`, the number of its gold entities. Token accuracy counts every
token, `O` included. Undefined ratios (nothing predicted, no gold entity) are 0.0, as both
tools print them.
"""

import collections

# BMES's M- (middle) is BIOES's I- (inside).
_PREFIXES = {"B": "B", "I": "I", "M": "I", "E": "E", "S": "S"}


def _split_tag(tag):
  """"B-PER" -> ("B", "PER"); "M-PER" -> ("I", "PER"); "O" -> ("O", "")."""
  if tag == "O":
    return "O", ""  # pragma: no mutate (an O's type is never compared: the O clauses decide)
  prefix, dash, entity_type = tag.partition("-")
  if prefix not in _PREFIXES or not dash or not entity_type:
    raise ValueError(f"tag {tag!r} is neither 'O' nor B-/I-/M-/E-/S- followed by a type")
  return _PREFIXES[prefix], entity_type


def _chunk_boundary(previous, current):
  """(whether a chunk open at `previous` ends before `current`, whether `current` opens a
  chunk): conlleval's endOfChunk and startOfChunk, for (prefix, type) pairs."""
  (previous_prefix, previous_type), (current_prefix, current_type) = previous, current
  type_changes = previous_type != current_type
  # conlleval's O clauses are kept as it lists them, though an O's type "" differs from every
  # entity type, so type_changes alone would also decide them.
  ends = previous_prefix != "O" and (
      current_prefix == "O"  # pragma: no mutate (type_changes holds too)
      or previous_prefix in ("E", "S") or current_prefix in ("B", "S") or type_changes)
  # Nor is a start read at an O: an O ends no chunk, and the next non-O tag starts one.
  starts = current_prefix != "O" and (  # pragma: no mutate (see above)
      previous_prefix == "O"  # pragma: no mutate (type_changes holds too)
      or current_prefix in ("B", "S") or previous_prefix in ("E", "S") or type_changes)
  return ends, starts


def get_entities(tags):
  """The chunks of one sentence's tags as a list of (type, start, end), `end` inclusive.

  ["B-PER", "I-PER", "O", "I-LOC"] -> [("PER", 0, 1), ("LOC", 3, 3)]
  """
  entities = []
  previous = ("O", "")  # pragma: no mutate (an O's type is never compared)
  start = None  # pragma: no mutate (set by the first chunk's start before it is read)
  # A trailing "O" closes a chunk still open at the last token.
  for position, tag in enumerate(list(tags) + ["O"]):
    current = _split_tag(tag)
    ends, starts = _chunk_boundary(previous, current)
    if ends:
      entities.append((previous[1], start, position - 1))
    if starts:
      start = position
    previous = current
  return entities


def _ratio(numerator, denominator):
  return numerator / denominator if denominator else 0.0


def _precision_recall_f1(correct, predicted, gold):
  precision = _ratio(correct, predicted)
  recall = _ratio(correct, gold)
  return precision, recall, _ratio(2 * precision * recall, precision + recall)


def entity_scores(gold_sequences, predicted_sequences):
  """Micro and per-type entity scores plus token accuracy.

  Args:
    gold_sequences: a list of sentences, each a list of tag strings.
    predicted_sequences: the same number of sentences, each as long as its gold one.

  Returns:
    {"precision", "recall", "f1", "token_accuracy": float, "num_gold", "num_predicted",
     "num_correct": int, "per_type": {type: {"precision", "recall", "f1": float,
     "support", "num_predicted", "num_correct": int}}}, with a type for every type seen in
    gold or predictions (a type only ever predicted has support 0).
  """
  if len(gold_sequences) != len(predicted_sequences):
    raise ValueError(f"{len(predicted_sequences)} predicted sentences for "
                     f"{len(gold_sequences)} gold ones")
  gold_counts = collections.Counter()
  predicted_counts = collections.Counter()
  correct_counts = collections.Counter()
  tokens = correct_tokens = 0
  for index, (gold, predicted) in enumerate(zip(gold_sequences, predicted_sequences)):
    gold, predicted = list(gold), list(predicted)
    if len(gold) != len(predicted):
      raise ValueError(f"sentence {index}: {len(predicted)} predicted tags for {len(gold)} "
                       "gold ones")
    tokens += len(gold)
    correct_tokens += sum(g == p for g, p in zip(gold, predicted))
    gold_entities = set(get_entities(gold))
    predicted_entities = set(get_entities(predicted))
    gold_counts.update(entity[0] for entity in gold_entities)
    predicted_counts.update(entity[0] for entity in predicted_entities)
    correct_counts.update(entity[0] for entity in gold_entities & predicted_entities)

  per_type = {}
  for entity_type in sorted(set(gold_counts) | set(predicted_counts)):
    precision, recall, f1 = _precision_recall_f1(
        correct_counts[entity_type], predicted_counts[entity_type], gold_counts[entity_type])
    per_type[entity_type] = {
        "precision": precision, "recall": recall, "f1": f1,
        "support": gold_counts[entity_type],
        "num_predicted": predicted_counts[entity_type],
        "num_correct": correct_counts[entity_type]}
  num_gold, num_predicted = sum(gold_counts.values()), sum(predicted_counts.values())
  num_correct = sum(correct_counts.values())
  precision, recall, f1 = _precision_recall_f1(num_correct, num_predicted, num_gold)
  return {"precision": precision, "recall": recall, "f1": f1,
          "token_accuracy": _ratio(correct_tokens, tokens),
          "num_gold": num_gold, "num_predicted": num_predicted, "num_correct": num_correct,
          "per_type": per_type}


def ner_results(gold_sequences, predicted_sequences):
  """`entity_scores` as the flat {name: value} that eval_results.txt lists: `precision`,
  `recall`, `f1`, `token_accuracy`, then `<type>_precision`, `<type>_recall`, `<type>_f1`,
  `<type>_support` for each type in sorted order."""
  scores = entity_scores(gold_sequences, predicted_sequences)
  results = {name: scores[name] for name in ("precision", "recall", "f1", "token_accuracy")}
  for entity_type, type_scores in scores["per_type"].items():
    for name in ("precision", "recall", "f1", "support"):
      results[f"{entity_type}_{name}"] = type_scores[name]
  return results
