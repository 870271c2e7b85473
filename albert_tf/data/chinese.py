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
from albert_tf.tokenization.tokenizer import _is_cjk_char


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


def is_chinese_word(word):
  """True for a jieba word of two or more characters, all CJK ideographs."""
  return len(word) > 1 and all(_is_cjk_char(ord(c)) for c in word)


def encode_with_word_starts(tokenizer, line, cache):
  """WordPiece ids of `line` and, for each, whether it starts a word after jieba segmentation.

  Args:
    tokenizer: a WordPiece `FullTokenizer`.
    line: raw text.
    cache: a dict this function fills (character -> its ids); pass the same one for every line.

  Returns:
    (ids, word_starts): lists of equal length. `ids` equals `tokenizer.encode_ids([line])[0]`;
    `word_starts[i]` is False for a character of a multi-character Chinese word after its first
    and for a `##` piece, else True.
  """
  ids, starts = [], []
  pending = []  # text between Chinese words, tokenized in one call

  def flush():
    if pending:
      pieces = tokenizer.tokenize("".join(pending))
      ids.extend(tokenizer.convert_tokens_to_ids(pieces))
      starts.extend(tokenizer.is_word_start(p) for p in pieces)
      pending.clear()

  for word in jieba.lcut(line.strip()):
    if not is_chinese_word(word):
      pending.append(word)
      continue
    # The basic tokenizer splits text around every CJK character, so tokenizing the text
    # between Chinese words apart, and each of their characters alone, gives the line's pieces.
    flush()
    for k, char in enumerate(word):
      char_ids = cache.get(char)
      if char_ids is None:
        char_ids = cache[char] = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(char))
      for piece_id in char_ids:
        ids.append(piece_id)
        starts.append(k == 0)
  flush()
  return ids, starts
