"""SQuAD answers from the model's outputs: n-best spans, v2's null odds, the prediction files.

    results = {feature.unique_id: (start_logits, end_logits), ...}       # v1.1
    predictions, nbest = postprocess_v1(examples, features, results, 20, 30)
    write_json("predictions.json", predictions)

As the original's `squad_utils.py`: candidates are the best starts and ends of each window,
kept where both lie in the window's context, the start has its most context there and the span
is at most max_answer_length pieces; answers are the context's characters under the span.
"""

import collections
import math

import numpy as np

from albert_tf import files


def _softmax(scores):
  scores = np.asarray(scores, np.float64)
  if not scores.size:
    return []
  e = np.exp(scores - scores.max())
  return list(e / e.sum())


def _span_text(example, feature, start, end):
  """The context characters of window pieces start..end, stripped (the original's answer)."""
  begin = feature.tok_start_to_orig_index[start]
  finish = feature.tok_end_to_orig_index[end]
  raw = example.paragraph_text[begin:finish + 1]
  stripped = raw.lstrip()
  begin += len(raw) - len(stripped)
  stripped = stripped.rstrip()
  return stripped, begin, begin + len(stripped)


def _candidate_ok(feature, start, end, max_answer_length):
  """The original's filter: both ends in the window's context, start where it has the most
  context, end not before start, at most max_answer_length pieces."""
  n = len(feature.tok_start_to_orig_index)
  start -= feature.doc_offset
  end -= feature.doc_offset
  return (0 <= start < n and 0 <= end < n and feature.token_is_max_context[start]
          and end >= start and end - start + 1 <= max_answer_length)


def _nbest(example, candidates, features, n_best_size):
  """Best distinct answer texts of (score_start, score_end, feature_index, start, end)."""
  candidates.sort(key=lambda c: c[0] + c[1], reverse=True)
  nbest, seen = [], set()
  for start_score, end_score, feature_index, start, end in candidates:
    if len(nbest) >= n_best_size:
      break
    feature = features[feature_index]
    text, begin, finish = _span_text(example, feature, start - feature.doc_offset,
                                     end - feature.doc_offset)
    if text in seen:
      continue
    seen.add(text)
    nbest.append({"text": text, "start_log_prob": float(start_score),
                  "end_log_prob": float(end_score), "char_start": begin, "char_end": finish})
  return nbest


def _by_example(features):
  grouped = collections.defaultdict(list)
  for feature in features:
    grouped[feature.example_index].append(feature)
  return grouped


def postprocess_v1(examples, features, results, n_best_size=20, max_answer_length=30):
  """SQuAD v1.1 answers from start/end logits.

  `results` maps unique_id -> (start_logits [seq], end_logits [seq]). For each window, the
  n_best_size best starts and ends are paired and filtered; the answer is the best pair by
  start + end logit. Returns (predictions {qas_id: text}, nbest {qas_id: [entries]}); entries
  carry `text`, `probability`, `start_log_prob`, `end_log_prob` (the logits, as the
  original), and the answer's `char_start`/`char_end` in the context.
  """
  grouped = _by_example(features)
  predictions, all_nbest = collections.OrderedDict(), collections.OrderedDict()
  for example_index, example in enumerate(examples):
    candidates = []
    for feature_index, feature in enumerate(grouped[example_index]):
      start_logits, end_logits = (np.asarray(r) for r in results[feature.unique_id])
      best_starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
      best_ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
      for start in best_starts:
        for end in best_ends:
          if _candidate_ok(feature, start, end, max_answer_length):
            candidates.append((start_logits[start], end_logits[end], feature_index,
                               int(start), int(end)))
    nbest = _nbest(example, candidates, grouped[example_index], n_best_size)
    # The original writes "empty" when nothing is valid; an empty answer scores the same.
    nbest = nbest or [{"text": "", "start_log_prob": 0.0, "end_log_prob": 0.0}]
    for entry, p in zip(nbest, _softmax([e["start_log_prob"] + e["end_log_prob"]
                                         for e in nbest])):
      entry["probability"] = float(p)
    predictions[example.qas_id] = nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
  return predictions, all_nbest


def postprocess_v2(examples, features, results, n_best_size=20, max_answer_length=30,
                   null_score_diff_threshold=None):
  """SQuAD v2.0 answers from the beam outputs of the v2 head.

  `results` maps unique_id -> dict with `start_top_log_probs` [k], `start_top_index` [k],
  `end_top_log_probs` [k * k_end], `end_top_index` [k * k_end] and `cls_logits` (scalar).
  The null score of a question is its smallest `cls_logits` over windows (the original's
  `score_null`); the answer is empty when that is >= `null_score_diff_threshold` (never
  when the threshold is None). Returns (predictions, nbest, null_odds {qas_id: score}).
  """
  grouped = _by_example(features)
  predictions, all_nbest = collections.OrderedDict(), collections.OrderedDict()
  null_odds = collections.OrderedDict()
  for example_index, example in enumerate(examples):
    candidates, score_null = [], math.inf
    for feature_index, feature in enumerate(grouped[example_index]):
      result = results[feature.unique_id]
      score_null = min(score_null, float(result["cls_logits"]))
      start_top, start_index = result["start_top_log_probs"], result["start_top_index"]
      end_top, end_index = result["end_top_log_probs"], result["end_top_index"]
      end_n_top = len(end_top) // len(start_top)
      for i, start in enumerate(start_index):
        for j in range(end_n_top):
          end = end_index[i * end_n_top + j]
          if _candidate_ok(feature, start, end, max_answer_length):
            candidates.append((start_top[i], end_top[i * end_n_top + j], feature_index,
                               int(start), int(end)))
    nbest = _nbest(example, candidates, grouped[example_index], n_best_size)
    nbest = nbest or [{"text": "", "start_log_prob": -1e6, "end_log_prob": -1e6}]
    for entry, p in zip(nbest, _softmax([e["start_log_prob"] + e["end_log_prob"]
                                         for e in nbest])):
      entry["probability"] = float(p)
    if not grouped[example_index]:
      score_null = 1e6  # no context: nothing to answer from
    null_odds[example.qas_id] = score_null
    answer_null = (null_score_diff_threshold is not None
                   and score_null >= null_score_diff_threshold)
    predictions[example.qas_id] = "" if answer_null or not grouped[example_index] \
        else nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
  return predictions, all_nbest, null_odds


def write_json(path, value):
  """JSON with indent 4 (as the original), written atomically."""
  files.write_json(path, value, indent=4)
