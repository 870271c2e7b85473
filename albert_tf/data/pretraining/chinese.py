"""Chinese word segmentation for whole-word masking (SPEC.md "Chinese (albert_zh) practice").

  load_jieba()
  ids, starts = encode_with_word_starts(tokenizer, "我们在北京。", cache={})
  # ids: the same as tokenizer.encode_ids(["我们在北京。"])[0], one id per character;
  # starts: [True, False, True, True, False, True] ("我们" / "在" / "北京" / "。")

albert_zh masks Chinese words whole: each line is segmented with jieba, and every character of
a multi-character Chinese word after the first does not start a word, so whole-word and n-gram
masking take the word as one unit. Only that flag changes: the ids stay the plain character
pieces WordPiece gives for the line (albert_zh's script writes `##X` label ids and groups at
most 3 characters; we follow neither quirk).
"""

import logging

import jieba

# The tokenizer's own test for the characters its basic tokenizer isolates, one piece each.
from albert_tf.tokenization.tokenizer import is_cjk_char


def load_jieba():
  """Loads jieba's default dictionary now (about a second), quietly.

  Every worker process calls this: jieba logs its loading to stderr once per process, which
  with several workers buries the job's own log.
  """
  jieba.setLogLevel(logging.WARNING)
  jieba.initialize()


def segmentation_metadata():
  """What reproducing the segmentation needs: jieba's version (its dictionary comes with it)."""
  return {"method": "jieba", "jieba_version": jieba.__version__, "dictionary": "default",
          "hmm": True}


def _all_cjk(text):
  return all(is_cjk_char(ord(c)) for c in text)


def _pieces(tokenizer, text, cache):
  """(ids, word starts) of `text`; short texts (single characters, punctuation) are cached."""
  found = cache.get(text)
  if found is None:
    pieces = tokenizer.tokenize(text)
    found = (tokenizer.convert_tokens_to_ids(pieces),
             [tokenizer.is_word_start(p) for p in pieces])
    if len(text) <= 2:
      cache[text] = found
  return found


def encode_with_word_starts(tokenizer, line, cache):
  """WordPiece ids of `line` and, for each, whether it starts a word after jieba segmentation.

  Args:
    tokenizer: a WordPiece `FullTokenizer`.
    line: raw text.
    cache: a dict this function fills (short texts -> their ids and word starts); pass the
      same one for every line of the same tokenizer.

  Returns:
    (ids, word_starts): lists of equal length. `ids` equals `tokenizer.encode_ids([line])[0]`;
    `word_starts[i]` is False for a character of a multi-character Chinese word after its first
    and for a `##` piece, else True.
  """
  ids, starts = [], []
  pending = []  # words between CJK ones, tokenized together

  def flush():
    if pending:
      found_ids, found_starts = _pieces(tokenizer, "".join(pending), cache)
      ids.extend(found_ids)
      starts.extend(found_starts)
      pending.clear()

  for word in jieba.lcut(line.strip()):
    if not _all_cjk(word):
      pending.append(word)
      continue
    # The basic tokenizer splits text around every CJK character, so tokenizing each CJK
    # character alone, and the text between them in one piece, gives the line's pieces.
    flush()
    for k, char in enumerate(word):
      char_ids, char_starts = _pieces(tokenizer, char, cache)
      ids.extend(char_ids)
      starts.extend(char_starts if k == 0 else [False] * len(char_ids))
  flush()
  return ids, starts
