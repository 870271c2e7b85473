"""The CMRC 2018 metric: EM and F1 over mixed Chinese / English segments, 0-100.

    evaluate(json.load(open("cmrc2018_dev.json"))["data"], {"DEV_0_QUERY_0": "1990年"})
    # {"EM": ..., "F1": ..., "AVERAGE": ..., "TOTAL": ..., "SKIP": ...}

The official evaluator's rules (`cmrc2018_evaluate.py`, see SPEC.md "Chinese (albert_zh)
practice"): text is lowercased and stripped; "mixed segmentation" makes each character in
[\u4e00-\u9fa5] and each listed punctuation mark a segment of its own and splits the runs
between them with NLTK's word tokenizer. F1 is the best over gold answers of the F1 of the
longest common *substring* of the segment lists, punctuation removed; EM compares the strings
with punctuation removed. AVERAGE = (EM + F1) / 2; a question without a prediction scores 0.
"""

from nltk.tokenize import NLTKWordTokenizer

# The official list. It is matched one character at a time, so "……" (two characters) never
# matches and a lone "…" is not punctuation; "’" is listed but "‘" is not. Kept as is.
PUNCTUATION = frozenset([
    "-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=",
    "，", "。", "：", "？", "！", "“", "”", "；", "’", "《", "》", "……", "·", "、",
    "「", "」", "（", "）", "－", "～", "『", "』"])

# word_tokenize without its sentence splitter (which needs the punkt data download); the
# official script ran word_tokenize on short answer strings, where the two agree.
_WORD_TOKENIZER = NLTKWordTokenizer()


def _is_segment_char(char):
  return "\u4e00" <= char <= "\u9fa5"


def mixed_segmentation(text, remove_punctuation=False):
  """The official segments of `text`: CJK characters and punctuation marks one each, the
  runs between them NLTK words. With `remove_punctuation` the marks are dropped first, so
  the runs on either side of one join (as in the official script)."""
  segments, run = [], []
  for char in text.lower().strip():
    if remove_punctuation and char in PUNCTUATION:
      continue
    if _is_segment_char(char) or char in PUNCTUATION:
      if run:
        segments.extend(_WORD_TOKENIZER.tokenize("".join(run)))
        run = []
      segments.append(char)
    else:
      run.append(char)
  if run:
    segments.extend(_WORD_TOKENIZER.tokenize("".join(run)))
  return segments


def remove_punctuation(text):
  """`text` lowercased and stripped, without the listed punctuation marks."""
  return "".join(c for c in text.lower().strip() if c not in PUNCTUATION)


def longest_common_substring(a, b):
  """Length of the longest run of equal consecutive items that `a` and `b` share."""
  best, previous = 0, [0] * (len(b) + 1)
  for x in a:
    current = [0] * (len(b) + 1)
    for j, y in enumerate(b):
      if x == y:
        current[j + 1] = previous[j] + 1
        best = max(best, current[j + 1])
    previous = current
  return best


def f1_score(golds, prediction):
  """Best F1 (0-1) over `golds` of the longest common substring of the segments."""
  predicted = mixed_segmentation(prediction, remove_punctuation=True)
  best = 0.0
  for gold in golds:
    expected = mixed_segmentation(gold, remove_punctuation=True)
    common = longest_common_substring(expected, predicted)
    if common:
      precision, recall = common / len(predicted), common / len(expected)
      best = max(best, 2 * precision * recall / (precision + recall))
  return best


def exact_match(golds, prediction):
  """1.0 when `prediction` equals one of `golds` once punctuation is removed, else 0.0."""
  predicted = remove_punctuation(prediction)
  return float(any(remove_punctuation(gold) == predicted for gold in golds))


def evaluate(dataset, predictions):
  """EM, F1 and AVERAGE (0-100) of `predictions` {id: text} over every question of
  `dataset` (a SQuAD-style `data` list), with TOTAL questions and SKIP (those without a
  prediction, scored 0). Ids must be unique: `predictions` cannot tell two questions of one
  id apart (ValueError naming the ids)."""
  em = f1 = 0.0
  total = skipped = 0
  seen, shared = set(), []
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        if qa["id"] in seen:
          shared.append(qa["id"])
        seen.add(qa["id"])
  if shared:
    raise ValueError(f"question id(s) used more than once: {', '.join(map(str, shared[:10]))}"
                     f"{' ...' if len(shared) > 10 else ''}; predictions keyed by id cannot "
                     "score them")
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        total += 1
        if qa["id"] not in predictions:
          skipped += 1
          continue
        golds = [answer["text"] for answer in qa.get("answers") or []]
        prediction = str(predictions[qa["id"]])
        em += exact_match(golds, prediction)
        f1 += f1_score(golds, prediction)
  em, f1 = 100.0 * em / max(total, 1), 100.0 * f1 / max(total, 1)
  return {"EM": em, "F1": f1, "AVERAGE": (em + f1) / 2, "TOTAL": total, "SKIP": skipped}


def is_mostly_cjk(texts):
  """Whether most non-space characters of `texts` are CJK ideographs (Chinese contexts)."""
  cjk = other = 0  # pragma: no mutate (any common start compares alike)
  for text in texts:
    for char in text:
      if "\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf":
        cjk += 1
      elif not char.isspace():
        other += 1
  return cjk > other
