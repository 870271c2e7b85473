"""Token ids of a raw text with each piece's span in that raw text.

    ids, starts, ends = encode_with_offsets(tokenizer, "The Café, in 1990, ...")
    text[starts[i]:ends[i] + 1]   # the raw characters piece i came from

SQuAD needs answers as character spans of the original context, while the model sees pieces
of `preprocess_text(context)` (whitespace collapsed, NFKD, accents dropped, lowercased). The
original recovers the link with a character-level LCS between the context and the joined
pieces; here it is exact instead: the normalisation is replayed character by character,
remembering where each output character came from, and SentencePiece reports each piece's
span in the normalised text. The pieces and ids are `FullTokenizer.tokenize`'s (with the
digit-comma split), so features built from them match the original's.

WordPiece (`vocab_file`, e.g. albert_zh over unspaced Chinese) replays BERT's basic tokenizer
the same way: cleaning, CJK splitting, lowercasing and accent stripping, punctuation splitting,
each output character remembering its raw one; a word piece then spans the raw characters of
its part of the word (`##` pieces included) and an [UNK] the whole word.
"""

import bisect
import unicodedata

from albert_tf.tokenization.tokenizer import (SPIECE_UNDERLINE, is_cjk_char, is_digit_comma_piece,
                                              is_dropped, is_punctuation, is_whitespace,
                                              preprocess_text, split_digit_comma_piece,
                                              wordpiece_tokenize)


def normalize_with_offsets(text, lower):
  """`preprocess_text(text, lower)` and, for each of its characters, the index in `text` of
  the character it came from."""
  chars, origins = [], []
  for i, c in enumerate(text):  # whitespace runs -> one space, ends stripped
    if c.isspace():
      if chars and chars[-1] != " ":
        chars.append(" ")
        origins.append(i)
    else:
      chars.append(c)
      origins.append(i)
  if chars and chars[-1] == " ":
    chars.pop()
    origins.pop()
  # NFKD character by character is NFKD of the whole: it only differs in the order of
  # combining marks, which are all dropped.
  pieces = chars
  if not "".join(chars).isascii():
    pieces = ["".join(d for d in unicodedata.normalize("NFKD", c)
                      if not unicodedata.combining(d)) for c in chars]
  if lower:
    pieces = [p.lower() for p in pieces]
  out_chars, out_origins = [], []
  for piece, origin in zip(pieces, origins):
    out_chars.extend(piece)
    out_origins.extend([origin] * len(piece))
  normalized = "".join(out_chars)
  expected = preprocess_text(text, lower=lower)
  if normalized != expected:
    # Context-dependent lowercasing (a final sigma) keeps lengths: take the whole-string result.
    if len(normalized) != len(expected):
      raise ValueError(f"cannot align the normalised text of {text[:60]!r}...")
    normalized = expected
  return normalized, out_origins


def _char_index_of_bytes(text):
  """byte offset in utf-8 -> character index, for every byte offset (and the end)."""
  index = []
  for i, c in enumerate(text):
    index.extend([i] * len(c.encode("utf-8")))
  index.append(len(text))
  return index


def _piece_spans(sp_model, normalized):
  """(piece, start, end) of SentencePiece's encoding, end exclusive, in characters of
  `normalized`; a piece's span includes the space its "▁" stands for."""
  proto = sp_model.encode(normalized, return_type="proto")
  char_of = _char_index_of_bytes(normalized)
  return [(p.piece, char_of[p.begin], char_of[p.end]) for p in proto.pieces]


def encode_with_offsets(tokenizer, text):
  """Ids of `tokenizer.tokenize(text)` with each piece's inclusive character span in `text`.

  Returns (ids, starts, ends): lists of equal length. SentencePiece: a piece that stands for
  a space plus a word starts at that space (as in the original); spans of consecutive pieces
  do not overlap except where one raw character becomes several pieces (a ligature such as
  "ﬁ"). Combining marks and whitespace that normalisation drops belong to the piece before
  them. WordPiece: pieces never span whitespace; each CJK character and punctuation mark is
  its own piece; characters the cleaning or accent stripping drops belong to the piece before
  them in their word; an [UNK] spans its whole word.
  """
  if not tokenizer.is_spm:
    return _wordpiece_with_offsets(tokenizer, text)
  normalized, origins = normalize_with_offsets(text, tokenizer.do_lower_case)
  if not normalized:
    return [], [], []
  sp_model = tokenizer.sp_model
  pieces, spans = [], []
  for piece, start, end in _piece_spans(sp_model, normalized):
    if is_digit_comma_piece(piece):
      parts = split_digit_comma_piece(sp_model, piece)
      body = normalized[start:end - 1]
      cursor = start
      texts = [p.replace(SPIECE_UNDERLINE, "") for p in parts[:-1]]
      if "".join(texts) == body.lstrip(" "):
        lead = len(body) - len(body.lstrip(" "))
        for k, (part, part_text) in enumerate(zip(parts[:-1], texts)):
          width = len(part_text) + (lead if k == 0 else 0)
          pieces.append(part)
          spans.append((cursor, cursor + width))
          cursor += width
      else:  # should not happen; keep the pieces, each spanning the number
        for part in parts[:-1]:
          pieces.append(part)
          spans.append((start, end - 1))
      pieces.append(parts[-1])
      spans.append((end - 1, end))
    else:
      pieces.append(piece)
      spans.append((start, end))
  ids = tokenizer.convert_tokens_to_ids(pieces)
  # The last raw character each normalised character accounts for: up to the next one's.
  n = len(normalized)
  last = [0] * n
  for k in range(n):
    following = origins[k + 1] - 1 if k + 1 < n else len(text) - 1
    last[k] = max(origins[k], following)
  starts, ends = [], []
  for s, e in spans:
    start = origins[s] if s < n else len(text)
    starts.append(start)
    # A zero-width piece (the "▁" SentencePiece puts before a text that starts with a
    # character it cannot join) covers no character: end = start - 1.
    ends.append(last[e - 1] if e > s else start - 1)
  return ids, starts, ends


def _lower_and_strip_accents(text):
  """`basic_tokenize`'s normalisation of one word: NFD of the lowercase, no Mn marks."""
  text = unicodedata.normalize("NFD", text.lower())
  return "".join(c for c in text if unicodedata.category(c) != "Mn")


def wordpiece_char_length(char, do_lower_case):
  """How many characters of a word `basic_tokenize` makes of `char` found inside one: 0 for
  what the cleaning (or, lowercasing, the accent stripping) drops. Taken alone, as the
  alignment here (and the serving graph's) takes each character."""
  if is_dropped(char):
    return 0
  return len(_lower_and_strip_accents(char)) if do_lower_case else 1


def _basic_words_with_origins(text, do_lower_case):
  """`basic_tokenize(text)` as (word, firsts, lasts) triples: word[k] came from the raw
  characters firsts[k]..lasts[k] of `text` (inclusive): its own, plus those the cleaning or
  accent stripping dropped after it within its whitespace-delimited token."""
  # Cleaning and CJK splitting, one raw character at a time: (character or None, origin),
  # None for a character the cleaning drops (it still extends its token).
  chars = []
  for i, c in enumerate(text):
    cp = ord(c)
    if is_dropped(c):
      chars.append((None, i))
    elif is_whitespace(c):
      chars.append((" ", i))
    elif is_cjk_char(cp):
      chars.extend(((" ", i), (c, i), (" ", i)))
    else:
      chars.append((c, i))
  # Whitespace tokens, split as `str.split()` splits the joined text.
  tokens, current = [], []
  for c, i in chars:
    if c is not None and c.isspace():
      if current:
        tokens.append(current)
      current = []
    else:
      current.append((c, i))
  if current:
    tokens.append(current)
  words = []
  for token in tokens:
    kept = [(c, i) for c, i in token if c is not None]
    if not kept:
      continue
    raw = "".join(c for c, _ in kept)
    end = token[-1][1]  # dropped characters at the token's end belong to its last piece
    if do_lower_case:
      normalized = _lower_and_strip_accents(raw)
      parts = [_lower_and_strip_accents(c) for c, _ in kept]
      origins = [i for (_, i), part in zip(kept, parts) for _ in part]
    else:
      normalized, origins = raw, [i for _, i in kept]
    if not normalized:
      continue
    if len(origins) == len(normalized):
      # Each normalised character runs up to the raw character before the next one's.
      lasts = [max(o, n - 1) for o, n in zip(origins, origins[1:] + [end + 1])]
    else:  # the token normalises differently whole than character-wise: each spans it all
      origins, lasts = [kept[0][1]] * len(normalized), [end] * len(normalized)
    # Punctuation splitting, as `basic_tokenize`.
    begin = 0
    for k, c in enumerate(normalized):
      if is_punctuation(c):
        if k > begin:
          words.append((normalized[begin:k], origins[begin:k], lasts[begin:k]))
        words.append((c, origins[k:k + 1], lasts[k:k + 1]))
        begin = k + 1
    if begin < len(normalized):
      words.append((normalized[begin:], origins[begin:], lasts[begin:]))
  return words


def _wordpiece_with_offsets(tokenizer, text):
  """`encode_with_offsets` for a WordPiece tokenizer: the ids of `tokenizer.tokenize(text)`."""
  unk = tokenizer.convert_ids_to_tokens([tokenizer.unk_id])[0]
  vocab = tokenizer._vocab  # pylint: disable=protected-access
  pieces, starts, ends = [], [], []
  for word, origins, lasts in _basic_words_with_origins(text, tokenizer.do_lower_case):
    word_pieces = wordpiece_tokenize(word, vocab, unk)
    if word_pieces == [unk]:  # an unknown word is one [UNK]: it spans the whole word
      pieces.append(unk)
      starts.append(origins[0])
      ends.append(lasts[-1])
      continue
    cursor = 0
    for k, piece in enumerate(word_pieces):
      width = len(piece) - (2 if k else 0)  # a "##" continuation's text follows the "##"
      pieces.append(piece)
      starts.append(origins[cursor])
      ends.append(lasts[cursor + width - 1])
      cursor += width
  return tokenizer.convert_tokens_to_ids(pieces), starts, ends


def token_for_char(starts, ends, char_start, char_end):
  """First piece ending at or after `char_start` and last piece starting at or before
  `char_end` (inclusive character offsets): the pieces that cover an answer span."""
  first = bisect.bisect_left(ends, char_start)
  last = bisect.bisect_right(starts, char_end) - 1
  first = min(max(first, 0), len(ends) - 1)
  last = min(max(last, first), len(starts) - 1)
  return first, last
