"""NER examples -> model windows, and window predictions -> one tag per word.

Each word is tokenized alone and tagged at its first piece (later pieces are not scored); a
word the tokenizer turns into no piece at all (a lone control character) becomes one [UNK], so
every word keeps a place and a tag. A sentence whose pieces do not fit `max_seq_length - 2` is
cut into windows of whole words, each starting at least `doc_stride` pieces after the previous
one, so nothing is cut off; after prediction every word takes the tag of the window where it has
the most context (the fewer words on its shorter side, the less; ties go to the longer window),
as SQuAD's windows do for answer starts.

A window's arrays (all int32 [max_seq_length]): `input_word_ids` `[CLS] pieces [SEP]` padded,
`input_mask`, `input_type_ids` (zeros), `word_positions` (the first piece of each of the
window's words, 0 after them), `label_ids` (tag ids of those words, 0 after them) and
`label_mask` (1 on the window's words).
"""

import dataclasses

import numpy as np

# How raw text becomes words (the serving export): at whitespace, or one word per character.
WORD_SPLITS = ("whitespace", "characters")
FEATURE_NAMES = ("input_word_ids", "input_mask", "input_type_ids", "word_positions",
                 "label_ids", "label_mask")


@dataclasses.dataclass
class Window:
  """Words [start, end) of example `example_index`, and their arrays."""
  example_index: int
  start: int
  end: int
  arrays: dict


def word_pieces(tokenizer, words):
  """Piece ids of each word, tokenized alone ([UNK] for a word with none)."""
  pieces = []
  for word in words:
    ids = tokenizer.encode_ids([word])[0]
    pieces.append(ids or [tokenizer.unk_id])
  return pieces


def window_bounds(piece_counts, room, doc_stride):
  """(start, end) word ranges covering every word: each holds at most `room` pieces (a
  single word longer than that is cut to its first `room` pieces) and starts at least
  `doc_stride` pieces after the previous start, at a word boundary, until the last word fits."""
  n = len(piece_counts)
  if not n:
    return []  # a sentence without words has no window (and no tags to predict)
  offsets = np.concatenate([[0], np.cumsum(piece_counts)])
  bounds, start = [], 0
  while True:
    end = start + 1
    while end < n and offsets[end + 1] - offsets[start] <= room:
      end += 1
    bounds.append((start, end))
    if end >= n:
      return bounds
    following = start + 1
    while following < end and offsets[following] - offsets[start] < doc_stride:
      following += 1
    start = following


def convert_example(example_index, words_pieces, tag_ids, tokenizer, max_seq_length,
                    doc_stride):
  """The windows of one example: `words_pieces` from `word_pieces`, `tag_ids` a list of ints
  (None for unlabeled text, then label_ids are 0)."""
  room = max_seq_length - 2
  windows = []
  for start, end in window_bounds([len(p) for p in words_pieces], room, doc_stride):
    ids, positions = [tokenizer.cls_id], []
    for pieces in words_pieces[start:end]:
      positions.append(len(ids))
      ids.extend(pieces[:room - len(ids) + 1])
    ids.append(tokenizer.sep_id)
    arrays = {name: np.zeros(max_seq_length, np.int32) for name in FEATURE_NAMES}
    arrays["input_word_ids"][:len(ids)] = ids
    arrays["input_mask"][:len(ids)] = 1
    arrays["word_positions"][:len(positions)] = positions
    arrays["label_mask"][:len(positions)] = 1
    if tag_ids is not None:
      arrays["label_ids"][:len(positions)] = tag_ids[start:end]
    windows.append(Window(example_index, start, end, arrays))
  return windows


def convert_examples(examples, tokenizer, labels, max_seq_length, doc_stride):
  """All windows of `examples` (data.ner.NerExample), and the arrays stacked per feature."""
  label_ids = {label: i for i, label in enumerate(labels)}
  windows = []
  for index, example in enumerate(examples):
    tags = None if example.tags is None else [label_ids[t] for t in example.tags]
    windows += convert_example(index, word_pieces(tokenizer, example.words), tags, tokenizer,
                               max_seq_length, doc_stride)
  stacked = {name: np.stack([w.arrays[name] for w in windows]) if windows else
             np.zeros([0, max_seq_length], np.int32) for name in FEATURE_NAMES}
  return windows, stacked


def merge_windows(windows, window_tags, num_words):
  """Tag ids per word of every example: each word from the window where it has the most
  context. `window_tags[i]` are window i's predicted tag ids (per word of the window);
  `num_words[e]` is example e's word count."""
  best = [np.full(n, -1.0) for n in num_words]
  merged = [np.zeros(n, np.int32) for n in num_words]
  for window, tags in zip(windows, window_tags):
    length = window.end - window.start
    for k in range(length):
      score = min(k, length - 1 - k) + 0.01 * length
      word = window.start + k
      if score > best[window.example_index][word]:
        best[window.example_index][word] = score
        merged[window.example_index][word] = tags[k]
  return merged
