"""Dynamic masking: --no_masking records masked in tf.data by SPEC's n-gram rules.

Parity is tested two ways: draw for draw against an independent reference of SPEC.md's
masking rules (written here, fed the same random numbers), and in distribution against the
creation-time masking (`masking.ngram_mask`) on real instances.
"""

import json
import math
import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.cli.runs import run_pretraining
from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data
from albert_tf.data.pretraining.dataset import pretraining_dataset
from albert_tf.data.pretraining.dynamic_masking import (DynamicMaskingOptions, make_draws,
                                                        mask_example)
from albert_tf.data.pretraining.masking import MaskingOptions, ngram_mask
from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
BOOK = SHARED_DATA / "corpus_en" / "nltk_gutenberg" / "austen-persuasion.txt"
CLS, SEP, MASK, VOCAB = 2, 3, 4, 30000
SEQ, PRED = 32, 5


def reference_mask(ids, input_mask, boundary, draws, o):
  """SPEC.md "Instance creation", masking, written out on the given random numbers."""
  num_tokens = int(sum(input_mask))
  words = []
  for p in range(num_tokens):
    if ids[p] in (o.cls_id, o.sep_id):
      continue
    if o.do_whole_word_mask and words and not boundary[p]:
      words[-1].append(p)
    else:
      words.append([p])
  budget = min(o.max_predictions_per_seq, max(1, int(round(num_tokens * o.masked_lm_prob))))
  weights = [1.0 / n for n in range(1, o.ngram + 1)]
  if not o.favor_shorter_ngram:
    weights.reverse()
  keys = draws["order_keys"][:len(words)]
  order = sorted(range(len(words)), key=lambda w: (keys[w], w))
  chosen = set()
  for step, first in enumerate(order):
    if len(chosen) >= budget:
      break
    available = min(o.ngram, len(words) - first)
    cumulative = np.cumsum(weights[:available])
    target = draws["ngram_u"][step] * cumulative[-1]  # inverse CDF of the renormalised P(n)
    n = next((k + 1 for k, c in enumerate(cumulative) if target < c), available)
    while n > 0 and len(chosen) + sum(len(w) for w in words[first:first + n]) > budget:
      n -= 1
    span = [p for w in words[first:first + n] for p in w]
    if n == 0 or chosen & set(span):
      continue
    chosen.update(span)
  positions = sorted(chosen)
  output = list(ids)
  for p in positions:
    u = draws["action_u"][p]
    if u < np.float32(0.8):
      output[p] = o.mask_id
    elif u >= np.float32(0.9):
      output[p] = int(draws["random_ids"][p])
  return output, positions, [ids[p] for p in positions]


def synthetic_example(rng, seq):
  """[CLS] A [SEP] B [SEP] + padding, random ids and word starts (pieces after [SEP] may
  continue the word before it, as real data can have)."""
  num_tokens = rng.randint(5, seq)
  a = rng.randint(1, num_tokens - 4)
  ids = [CLS] + [rng.randint(5, VOCAB - 1) for _ in range(a)] + [SEP]
  ids += [rng.randint(5, VOCAB - 1) for _ in range(num_tokens - len(ids) - 1)] + [SEP]
  boundary = [1 if t in (CLS, SEP) else int(rng.random() < 0.6) for t in ids]
  pad = seq - num_tokens
  return ids + [0] * pad, [1] * num_tokens + [0] * pad, boundary + [0] * pad


@pytest.mark.parametrize("changes", [
    {},
    {"masked_lm_prob": 0.5},                           # the budget binds: spans are shortened
    {"do_whole_word_mask": False, "ngram": 4},
    {"favor_shorter_ngram": False, "max_predictions_per_seq": 12, "masked_lm_prob": 0.4},
    {"ngram": 1},
])
def test_in_graph_masking_equals_the_spec_reference_draw_for_draw(changes):
  o = DynamicMaskingOptions(**dict(dict(vocab_size=VOCAB, mask_id=MASK, cls_id=CLS, sep_id=SEP,
                                        max_predictions_per_seq=PRED), **changes))
  masker = tf.function(lambda ids, mask, boundary, seed: mask_example(
      ids, mask, boundary, make_draws(seed, SEQ, VOCAB), o))
  draw = tf.function(lambda seed: make_draws(seed, SEQ, VOCAB))
  rng = random.Random(str(changes))
  shortened = 0
  for k in range(40):
    ids, mask, boundary = synthetic_example(rng, SEQ)
    seed = tf.constant([7, k], tf.int64)
    got = masker(tf.constant(ids), tf.constant(mask), tf.constant(boundary), seed)
    draws = {name: value.numpy() for name, value in draw(seed).items()}
    want_ids, want_positions, want_labels = reference_mask(ids, mask, boundary, draws, o)
    count = len(want_positions)
    assert got["input_ids"].numpy().tolist() == want_ids
    assert got["masked_lm_positions"].numpy().tolist() == want_positions + [0] * (
        o.max_predictions_per_seq - count)
    assert got["masked_lm_ids"].numpy().tolist() == want_labels + [0] * (
        o.max_predictions_per_seq - count)
    assert got["masked_lm_weights"].numpy().tolist() == [1.0] * count + [0.0] * (
        o.max_predictions_per_seq - count)
    budget = min(o.max_predictions_per_seq, max(1, round(sum(mask) * o.masked_lm_prob)))
    shortened += count < budget
  if changes.get("masked_lm_prob", 0.15) >= 0.4:
    assert shortened  # some examples could not fill the budget: that path was exercised


def _unmasked_instances(folder, **changes):
  create_pretraining_data([str(BOOK)], [str(folder / "unmasked.tfrecord")], CreationOptions(
      spm_model_file=str(SPM), max_seq_length=SEQ, max_predictions_per_seq=PRED,
      dupe_factor=1, num_workers=1, no_masking=True, **changes))
  return folder / "unmasked.tfrecord"


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory):
  return _unmasked_instances(tmp_path_factory.mktemp("unmasked"))


def test_no_masking_records_are_unmasked_with_word_starts_and_name_their_special_ids(unmasked):
  meta = json.loads(unmasked.with_suffix(".tfrecord.json").read_text())
  assert meta["masking"] == "none" and meta["flags"]["no_masking"] is True
  assert meta["special_ids"] == {"cls": CLS, "sep": SEP, "mask": MASK} and (
      meta["vocab_size"] == VOCAB)
  assert meta["statistics"]["masked_lm_predictions"] == 0
  tokenizer = tokenization.FullTokenizer(spm_model_file=str(SPM), do_lower_case=True)
  word_start = [tokenizer.is_word_start(p) for p in tokenizer.convert_ids_to_tokens(
      range(tokenizer.vocab_size))]
  count = 0
  for record in tf.data.TFRecordDataset(str(unmasked)).take(200):
    f = tf.train.Example.FromString(record.numpy()).features.feature
    ids = f["input_ids"].int64_list.value
    n = sum(f["input_mask"].int64_list.value)
    assert MASK not in ids[:n] and ids[0] == CLS and ids[n - 1] == SEP
    assert len(f["masked_lm_positions"].int64_list.value) == 0  # a static reader fails on it
    assert list(f["token_boundary"].int64_list.value[:n]) == [
        1 if t in (CLS, SEP) else int(word_start[t]) for t in ids[:n]]
    count += 1
  assert count == 200


def test_masks_follow_the_creation_time_distribution_on_real_instances(unmasked):
  """The in-graph masks and `ngram_mask`'s, on the same real instances: the same mean count,
  n-gram lengths and 80/10/10 split, within sampling error."""
  o = DynamicMaskingOptions(vocab_size=VOCAB, mask_id=MASK, cls_id=CLS, sep_id=SEP,
                            max_predictions_per_seq=PRED)
  tokenizer = tokenization.FullTokenizer(spm_model_file=str(SPM), do_lower_case=True)
  word_start = tuple(tokenizer.is_word_start(p) for p in tokenizer.convert_ids_to_tokens(
      range(tokenizer.vocab_size)))
  python = MaskingOptions(vocab_size=VOCAB, mask_id=MASK, cls_id=CLS, sep_id=SEP,
                          word_start=word_start, max_predictions_per_seq=PRED)
  records = list(tf.data.TFRecordDataset(str(unmasked)).take(400).map(lambda r: (
      tf.io.parse_single_example(r, {k: tf.io.FixedLenFeature([SEQ], tf.int64) for k in (
          "input_ids", "input_mask", "token_boundary")}))).as_numpy_iterator())
  passes = 8

  def summary(results):
    """Mean count per instance, shares of [MASK] / kept / random, mean masked run length."""
    counts, split, runs = [], [0, 0, 0], 0
    for ids, (output, positions) in results:
      counts.append(len(positions))
      for p in positions:
        split[0 if output[p] == MASK else 1 if output[p] == ids[p] else 2] += 1
      runs += sum(1 for p in positions if p - 1 not in positions)
    total = sum(split)
    return np.mean(counts), [x / total for x in split], total / max(runs, 1), total

  python_results, graph_results = [], []
  graph = tf.function(lambda ids, mask, boundary, seed: mask_example(
      ids, mask, boundary, make_draws(seed, SEQ, VOCAB), o))
  for k, r in enumerate(records):
    ids = r["input_ids"].astype(np.int32)
    n = int(r["input_mask"].sum())
    for rep in range(passes):
      output, positions, _, _ = ngram_mask(list(ids[:n]), random.Random(f"{k}/{rep}"), python)
      python_results.append((ids, (output + [0] * (SEQ - n), positions)))
      got = graph(ids, r["input_mask"].astype(np.int32), r["token_boundary"].astype(np.int32),
                  tf.constant([k, rep], tf.int64))
      weights = got["masked_lm_weights"].numpy()
      graph_results.append((ids, (got["input_ids"].numpy(),
                                  got["masked_lm_positions"].numpy()[weights > 0].tolist())))
  py_mean, py_split, py_run, py_total = summary(python_results)
  tf_mean, tf_split, tf_run, _ = summary(graph_results)
  # Counts: each instance's count is almost always its budget; allow 5 standard errors of a
  # difference of two means of ~3200 counts in [0, PRED].
  assert abs(py_mean - tf_mean) < 5 * math.sqrt(2 * (PRED ** 2 / 4) / len(python_results))
  for share_py, share_tf, p in zip(py_split, tf_split, (0.8, 0.1, 0.1)):
    assert abs(share_py - share_tf) < 5 * math.sqrt(2 * p * (1 - p) / py_total)
  # Mean length of contiguous masked runs (n-grams, in tokens): ~6,000 runs per side with a
  # spread under 1 token, so 0.1 is over 5 standard errors of the difference.
  assert abs(py_run - tf_run) < 0.1


def test_dataset_masks_each_epoch_anew_and_reproducibly_from_the_seed(unmasked):
  o = DynamicMaskingOptions(vocab_size=VOCAB, mask_id=MASK, cls_id=CLS, sep_id=SEP,
                            max_predictions_per_seq=PRED)
  records = sum(1 for _ in tf.data.TFRecordDataset(str(unmasked)))

  def two_epochs(seed):
    # One file and shuffle_buffer=1 keep the file's order: batch e is epoch e, row r record r.
    iterator = iter(pretraining_dataset([str(unmasked)], SEQ, PRED, records, True, seed=seed,
                                        shuffle_buffer=1, masking=o))
    return next(iterator), next(iterator)

  first, second = two_epochs(5)
  again, _ = two_epochs(5)
  other, _ = two_epochs(6)
  for key in ("input_mask", "input_type_ids", "next_sentence_labels"):
    assert (first[key].numpy() == second[key].numpy()).all()  # the same records
  positions = [b["masked_lm_positions"].numpy() for b in (first, second, again, other)]
  assert (positions[0] == positions[2]).all()  # the seed reproduces the masks
  assert (positions[0] != positions[1]).any(1).mean() > 0.5  # a new epoch, new masks
  assert (positions[0] != positions[3]).any(1).mean() > 0.5  # another seed, other masks
  ids, labels = first["input_word_ids"].numpy(), first["masked_lm_ids"].numpy()
  weights = first["masked_lm_weights"].numpy()
  assert (weights.sum(1) >= 1).all() and (ids == MASK).any()
  assert ((labels != MASK) | (weights == 0)).all()  # the labels are the unmasked ids
  # A checkpointed iterator resumes the masks where it stopped (training saves it).
  iterator = iter(pretraining_dataset([str(unmasked)], SEQ, PRED, 8, True, shuffle_buffer=1,
                                      masking=o))
  next(iterator)
  checkpoint = tf.train.Checkpoint(iterator=iterator)
  saved = checkpoint.write(str(unmasked.parent / "iterator" / "ckpt"))
  expected = next(iterator)["masked_lm_positions"].numpy()
  resumed = iter(pretraining_dataset([str(unmasked)], SEQ, PRED, 8, True, shuffle_buffer=1,
                                     masking=o))
  tf.train.Checkpoint(iterator=resumed).read(saved).assert_consumed()
  assert (next(resumed)["masked_lm_positions"].numpy() == expected).all()
  evaluation = [next(iter(pretraining_dataset([str(unmasked)], SEQ, PRED, 8, False,
                                              masking=o)))["masked_lm_positions"].numpy()
                for _ in range(2)]
  assert (evaluation[0] == evaluation[1]).all()  # eval masks are the same every time


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
  from albert_tf import AlbertConfig  # pylint: disable=import-outside-toplevel
  path = tmp_path_factory.mktemp("config") / "tiny.json"
  AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").to_json_file(path)
  return path


def _options(config, data, out, **changes):
  base = dict(albert_config_file=str(config), input_file=str(data), output_dir=str(out),
              max_seq_length=SEQ, max_predictions_per_seq=PRED, do_train=True, do_eval=True,
              train_batch_size=16, eval_batch_size=16, num_train_steps=30, num_warmup_steps=5,
              learning_rate=0.01, save_checkpoints_steps=30, iterations_per_loop=10,
              max_eval_steps=4, seed=3, log_every_seconds=0, dynamic_masking=True)
  base.update(changes)
  return PretrainingOptions(**base)


def test_run_pretraining_trains_on_unmasked_records_and_refuses_mismatched_modes(
    unmasked, tiny_config, tmp_path):
  history = []
  _, evaluation = run_pretraining(_options(tiny_config, unmasked, tmp_path / "run"),
                                  history=history)
  assert history[-1]["loss"] < history[0]["loss"]
  assert 0 < evaluation["masked_lm_accuracy"] <= 1 and math.isfinite(evaluation["loss"])
  with pytest.raises(ValueError, match=r"made with --no_masking.*pass --dynamic_masking"):
    Run(PretrainingTask(_options(tiny_config, unmasked, tmp_path / "static",
                                 dynamic_masking=False)))
  masked = tmp_path / "masked.tfrecord"
  create_pretraining_data([str(BOOK)], [str(masked)], CreationOptions(
      spm_model_file=str(SPM), max_seq_length=SEQ, max_predictions_per_seq=PRED,
      dupe_factor=1, num_workers=1))
  with pytest.raises(ValueError, match=r"already masked.*--no_masking"):
    Run(PretrainingTask(_options(tiny_config, masked, tmp_path / "dynamic")))
  with pytest.raises(ValueError, match=r"--masked_lm_prob=0.0"):
    Run(PretrainingTask(_options(tiny_config, unmasked, tmp_path / "zero", masked_lm_prob=0.0)))
