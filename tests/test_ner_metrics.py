"""Tests for albert_tf.metrics.ner: hand-counted cases, then a second, conlleval-style counter
on random invalid tags and on real CoNLL-2003 dev tags with seeded corruptions standing in for a
model's predictions."""

import collections
import random

import pytest

from conftest import SHARED_DATA
from albert_tf.metrics.ner import entity_scores, get_entities, ner_results

CONLL_DEV = SHARED_DATA / "ner" / "conll2003" / "valid.txt"


def test_chunks_follow_conlleval_rules_for_lenient_tags():
  # An I- after O, after another type, or after E-/S- starts a chunk; B- always starts one.
  assert get_entities(["O", "I-PER", "I-PER"]) == [("PER", 1, 2)]
  assert get_entities(["B-PER", "I-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 2, 3)]
  assert get_entities(["B-PER", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 1)]
  assert get_entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 2)]
  assert get_entities(["I-PER"]) == [("PER", 0, 0)]
  assert get_entities(["O", "O"]) == []
  assert get_entities([]) == []


def test_chunks_read_iobes_tags():
  assert get_entities(["S-PER", "B-LOC", "E-LOC", "I-LOC"]) == [
      ("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3)]
  assert get_entities(["B-ORG", "I-ORG", "E-ORG", "E-ORG"]) == [("ORG", 0, 2), ("ORG", 3, 3)]
  assert get_entities(["O", "E-ORG", "S-ORG"]) == [("ORG", 1, 1), ("ORG", 2, 2)]


def test_an_s_closes_an_open_entity_of_its_own_type_and_opens_its_own():
  # conlleval: endOfChunk holds for I- then S- and B- then S-, startOfChunk for any S-.
  assert get_entities(["B-PER", "I-PER", "S-PER"]) == [("PER", 0, 1), ("PER", 2, 2)]
  assert get_entities(["I-PER", "S-PER"]) == [("PER", 0, 0), ("PER", 1, 1)]
  assert get_entities(["B-PER", "S-PER", "E-PER"]) == [("PER", 0, 0), ("PER", 1, 1),
                                                       ("PER", 2, 2)]


def test_a_type_is_everything_after_the_first_dash():
  # CLUENER-style and user types may hold dashes: B-ORG-GOV is a B- of type ORG-GOV.
  assert get_entities(["B-ORG-GOV", "I-ORG-GOV", "S-X-Y"]) == [("ORG-GOV", 0, 1), ("X-Y", 2, 2)]


def test_bmes_middle_tags_read_as_iobes_inside_tags():
  """MSRA / SIGHAN files' M- is IOBES's I-: the same chunks, the same scores."""
  bmes = ["B-NR", "M-NR", "E-NR", "O", "S-NS", "M-NS", "E-NS"]
  iobes = [t.replace("M-", "I-") for t in bmes]
  assert get_entities(bmes) == get_entities(iobes) == [("NR", 0, 2), ("NS", 4, 4), ("NS", 5, 6)]
  crossed, same = ner_results([bmes], [iobes]), ner_results([iobes], [iobes])
  assert crossed.pop("token_accuracy") == 5 / 7  # tags are compared as written
  del same["token_accuracy"]
  assert crossed == same and same["f1"] == 1.0


def test_scores_of_a_hand_counted_pair():
  gold = [["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O", "B-LOC"],  # PER 0-1, ORG 3-4, LOC 6
          ["B-MISC", "O", "B-PER"]]                               # MISC 0, PER 2
  predicted = [["B-PER", "I-PER", "O", "B-ORG", "O", "O", "B-LOC"],  # right, ORG 3-3, right
               ["B-MISC", "B-MISC", "B-ORG"]]                       # right, MISC 1, ORG 2
  scores = entity_scores(gold, predicted)
  # 3 correct of 6 predicted and 5 gold.
  assert (scores["num_correct"], scores["num_predicted"], scores["num_gold"]) == (3, 6, 5)
  assert scores["precision"] == pytest.approx(1 / 2)
  assert scores["recall"] == pytest.approx(3 / 5)
  assert scores["f1"] == pytest.approx(6 / 11)  # 2 * 0.5 * 0.6 / 1.1
  assert scores["token_accuracy"] == pytest.approx(7 / 10)  # 6 of 7, then 1 of 3
  assert ner_results(gold, predicted) == pytest.approx({
      "precision": 1 / 2, "recall": 3 / 5, "f1": 6 / 11, "token_accuracy": 7 / 10,
      "LOC_precision": 1.0, "LOC_recall": 1.0, "LOC_f1": 1.0, "LOC_support": 1,
      "MISC_precision": 1 / 2, "MISC_recall": 1.0, "MISC_f1": 2 / 3, "MISC_support": 1,
      "ORG_precision": 0.0, "ORG_recall": 0.0, "ORG_f1": 0.0, "ORG_support": 1,
      "PER_precision": 1.0, "PER_recall": 1 / 2, "PER_f1": 2 / 3, "PER_support": 2})


def test_results_are_named_as_eval_results_lists_them():
  names = list(ner_results([["B-PER", "O", "B-LOC"]], [["B-PER", "O", "O"]]))
  assert names == ["precision", "recall", "f1", "token_accuracy",
                   "LOC_precision", "LOC_recall", "LOC_f1", "LOC_support",
                   "PER_precision", "PER_recall", "PER_f1", "PER_support"]


def test_an_i_after_o_is_an_entity_in_gold_and_predictions():
  # Gold O I-PER I-PER is the chunk PER 1-2, which B-PER I-PER matches.
  scores = entity_scores([["O", "I-PER", "I-PER"]], [["O", "B-PER", "I-PER"]])
  assert (scores["num_correct"], scores["f1"]) == (1, 1.0)
  assert scores["token_accuracy"] == pytest.approx(2 / 3)


def test_a_type_switch_inside_an_i_run_splits_the_entity():
  # Predicted I-PER I-PER I-LOC is PER 0-1 and LOC 2, not one PER 0-2.
  scores = entity_scores([["B-PER", "I-PER", "I-PER"]], [["B-PER", "I-PER", "I-LOC"]])
  assert (scores["num_correct"], scores["num_predicted"], scores["num_gold"]) == (0, 2, 1)
  assert scores["per_type"]["LOC"]["support"] == 0
  # B-PER I-LOC: two one-token entities, the PER one correct.
  scores = entity_scores([["B-PER", "O"]], [["B-PER", "I-LOC"]])
  assert (scores["num_correct"], scores["precision"], scores["recall"]) == (1, 0.5, 1.0)


def test_iobes_predictions_score_against_bio_gold():
  scores = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "E-PER", "O", "S-LOC"]])
  assert (scores["precision"], scores["recall"], scores["f1"]) == (1.0, 1.0, 1.0)
  assert scores["token_accuracy"] == pytest.approx(2 / 4)


def test_no_predicted_entities_scores_zero():
  scores = entity_scores([["B-PER", "O"], ["B-LOC"]], [["O", "O"], ["O"]])
  assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
  assert scores["token_accuracy"] == pytest.approx(1 / 3)
  assert scores["per_type"]["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                       "support": 1, "num_predicted": 0, "num_correct": 0}


def test_no_gold_entities_scores_zero_without_dividing_by_zero():
  scores = entity_scores([["O", "O"]], [["B-PER", "O"]])
  assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
  assert scores["per_type"]["PER"]["support"] == 0
  assert ner_results([["O"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                           "token_accuracy": 1.0}
  assert ner_results([], []) == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                 "token_accuracy": 0.0}


def test_mismatched_or_malformed_input_is_refused():
  with pytest.raises(ValueError, match="predicted sentences"):
    entity_scores([["O"]], [])
  with pytest.raises(ValueError, match="^sentence 0: 1 predicted tags for 2 gold ones$"):
    entity_scores([["O", "O"]], [["O"]])
  for tag in ("PER", "X-PER", "B-", "[PAD]"):
    with pytest.raises(ValueError, match="neither"):
      entity_scores([["O"]], [[tag]])


# A second counter, written as conlleval.pl counts: one pass over the tokens, tracking whether
# the gold and guessed chunks opened together and are still in step.


def _conll_split(tag):
  return ("O", "") if tag == "O" else (tag[0], tag[2:])


def _conll_end_of_chunk(prev_tag, tag, prev_type, type_):
  # conlleval.pl's endOfChunk, its pairs listed as it lists them.
  return ((prev_tag, tag) in {("B", "B"), ("B", "O"), ("B", "S"), ("I", "B"), ("I", "O"),
                              ("I", "S")}
          or prev_tag in ("E", "S")
          or (prev_tag != "O" and prev_type != type_))


def _conll_start_of_chunk(prev_tag, tag, prev_type, type_):
  # conlleval.pl's startOfChunk.
  return (tag in ("B", "S")
          or (prev_tag, tag) in {("E", "E"), ("E", "I"), ("S", "E"), ("S", "I"), ("O", "E"),
                                 ("O", "I")}
          or (tag != "O" and prev_type != type_))


def conlleval_counts(gold_sequences, predicted_sequences):
  """(correct, found_gold, found_guessed) per type and (correct_tags, tokens)."""
  correct_chunk, found_correct, found_guessed = (collections.Counter() for _ in range(3))
  correct_tags = tokens = 0
  in_correct = False
  last_correct, last_correct_type, last_guessed, last_guessed_type = "O", "", "O", ""
  stream = []
  for gold, predicted in zip(gold_sequences, predicted_sequences):
    stream += [(g, p, True) for g, p in zip(gold, predicted)] + [("O", "O", False)]
  for gold_tag, guessed_tag, is_token in stream:  # a sentence boundary reads as O / O
    correct, correct_type = _conll_split(gold_tag)
    guessed, guessed_type = _conll_split(guessed_tag)
    correct_ends = _conll_end_of_chunk(last_correct, correct, last_correct_type, correct_type)
    guessed_ends = _conll_end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
    if in_correct:
      if correct_ends and guessed_ends and last_guessed_type == last_correct_type:
        in_correct = False
        correct_chunk[last_correct_type] += 1
      elif correct_ends != guessed_ends or guessed_type != correct_type:
        in_correct = False
    correct_starts = _conll_start_of_chunk(last_correct, correct, last_correct_type, correct_type)
    guessed_starts = _conll_start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
    if correct_starts and guessed_starts and guessed_type == correct_type:
      in_correct = True
    if correct_starts:
      found_correct[correct_type] += 1
    if guessed_starts:
      found_guessed[guessed_type] += 1
    if is_token:
      correct_tags += gold_tag == guessed_tag
      tokens += 1
    last_correct, last_correct_type = correct, correct_type
    last_guessed, last_guessed_type = guessed, guessed_type
  if in_correct:
    correct_chunk[last_correct_type] += 1
  return correct_chunk, found_correct, found_guessed, correct_tags, tokens


def conlleval_results(gold_sequences, predicted_sequences):
  """The flat results of `ner_results`, from `conlleval_counts`."""
  correct, found_gold, found_guessed, correct_tags, tokens = conlleval_counts(
      gold_sequences, predicted_sequences)

  def prf(c, guessed, gold):
    p = c / guessed if guessed else 0.0
    r = c / gold if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)

  results = dict(zip(("precision", "recall", "f1"), prf(
      sum(correct.values()), sum(found_guessed.values()), sum(found_gold.values()))))
  results["token_accuracy"] = correct_tags / tokens
  for t in sorted(set(found_gold) | set(found_guessed)):
    p, r, f = prf(correct[t], found_guessed[t], found_gold[t])
    results.update({f"{t}_precision": p, f"{t}_recall": r, f"{t}_f1": f,
                    f"{t}_support": found_gold[t]})
  return results


def random_tags(rng, sentences):
  """Sentences of random IOBES tags of two types: every pair of neighbouring tags, valid or
  not, turns up many times."""
  tags = ["O"] + [f"{p}-{t}" for p in "BIES" for t in ("PER", "LOC")]
  return [[rng.choice(tags) for _ in range(rng.randint(0, 12))] for _ in range(sentences)]


@pytest.mark.parametrize("seed", [0, 1])
def test_random_invalid_tags_score_as_conlleval_counts(seed):
  rng = random.Random(seed)
  gold = random_tags(rng, 300)
  predicted = [[rng.choice([tag, "O", "I-PER", "S-LOC", "E-PER", "B-LOC"]) for tag in tags]
               for tags in gold]
  assert ner_results(gold, predicted) == conlleval_results(gold, predicted)
  assert ner_results(predicted, gold) == conlleval_results(predicted, gold)


@pytest.fixture(scope="module")
def conll_dev_tags():
  """The NER column of CoNLL-2003's dev file, one list per sentence."""
  sentences, current = [], []
  for line in CONLL_DEV.read_text(encoding="utf-8").splitlines():
    columns = line.split()
    if not columns or columns[0] == "-DOCSTART-":
      if current:
        sentences.append(current)
      current = []
    else:
      current.append(columns[3])
  if current:
    sentences.append(current)
  return sentences


def corrupt(sentences, seed):
  """Predictions that make a model's mistakes on the gold chunks: drop an entity, shift a
  boundary, change a type, start one with I-, invent a stray I- after O; some sentences
  rewritten in IOBES."""
  rng = random.Random(seed)
  types = ["PER", "ORG", "LOC", "MISC"]
  predicted = []
  for gold in sentences:
    tags = list(gold)
    for entity_type, start, end in get_entities(gold):
      mistake = rng.choice(["keep", "keep", "drop", "extend", "shrink", "retype", "b_to_i",
                            "split_type"])
      if mistake == "drop":
        tags[start:end + 1] = ["O"] * (end - start + 1)
      elif mistake == "extend" and end + 1 < len(tags) and tags[end + 1] == "O":
        tags[end + 1] = "I-" + entity_type
      elif mistake == "shrink" and end > start:
        tags[end] = "O"
      elif mistake == "retype":
        new_type = rng.choice([t for t in types if t != entity_type])
        tags[start:end + 1] = ["B-" + new_type] + ["I-" + new_type] * (end - start)
      elif mistake == "b_to_i":
        tags[start] = "I-" + entity_type
      elif mistake == "split_type" and end > start:
        tags[end] = "I-" + rng.choice([t for t in types if t != entity_type])
    for position, tag in enumerate(tags):
      if tag == "O" and rng.random() < 0.03:
        tags[position] = "I-" + rng.choice(types)
    if rng.random() < 0.2:
      tags = to_iobes(tags)
    predicted.append(tags)
  return predicted


def to_iobes(tags):
  """BIO chunks rewritten with E- and S- (chunks as get_entities reads them)."""
  out = ["O"] * len(tags)
  for entity_type, start, end in get_entities(tags):
    if start == end:
      out[start] = "S-" + entity_type
    else:
      out[start:end + 1] = (["B-" + entity_type] + ["I-" + entity_type] * (end - start - 1)
                            + ["E-" + entity_type])
  return out


def test_gold_against_itself_counts_conll2003_dev_entities(conll_dev_tags):
  results = ner_results(conll_dev_tags, conll_dev_tags)
  assert (results["precision"], results["recall"], results["f1"]) == (1.0, 1.0, 1.0)
  # CoNLL-2003 dev: 3,250 sentences, 5,942 entities (Tjong Kim Sang & De Meulder, 2003).
  assert len(conll_dev_tags) == 3250
  assert {t: results[f"{t}_support"] for t in ("LOC", "MISC", "ORG", "PER")} == {
      "LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_corrupted_predictions_score_as_conlleval_counts(conll_dev_tags, seed):
  predicted = corrupt(conll_dev_tags, seed)
  expected = conlleval_results(conll_dev_tags, predicted)
  assert 0.3 < expected["f1"] < 0.9  # the corruptions really cost something
  assert ner_results(conll_dev_tags, predicted) == expected
  # Swapped roles give the same counts with precision and recall exchanged.
  assert ner_results(predicted, conll_dev_tags) == conlleval_results(predicted, conll_dev_tags)


def test_to_iobes_keeps_every_chunk(conll_dev_tags):
  assert ner_results(conll_dev_tags, [to_iobes(tags) for tags in conll_dev_tags])["f1"] == 1.0
