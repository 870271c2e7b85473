"""Text -> pieces -> ids, in ALBERT's two tokenization modes.

  tok = FullTokenizer(spm_model_file="spiece.model")
  tok.tokenize("In 1990, the")            # ['▁in', '▁1990', ',', '▁the']
  tok.convert_tokens_to_ids(['▁in'])      # [19]
  encode_pair(tok, "a premise", "a hypothesis", max_seq_length=16)["segment_ids"]

SentencePiece mode (`spm_model_file`, ALBERT's English models) normalises the text with
`preprocess_text` and splits pieces that end in "<digit>," the way the original's
`encode_pieces` does. WordPiece mode (`vocab_file`, e.g. albert_zh) is BERT's basic tokenizer
(cleaning, CJK splitting, optional lowercasing and accent stripping, punctuation splitting)
followed by greedy longest-match-first word pieces. See SPEC.md, "Tokenization".
"""

import os
import re
import unicodedata

import sentencepiece

SPIECE_UNDERLINE = "\u2581"
_DIGIT_COMMA = re.compile(r"\d,")

# Special tokens of each mode; their ids are looked up, never assumed.
SPM_SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
WORDPIECE_SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]",
                      "mask": "[MASK]"}

# The original's `_is_start_piece` set: ASCII punctuation without "'", "<", "=" and ">".
# Kept verbatim, so a piece such as "?'" starts a word exactly as in the original.
_SPM_START_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_SPM_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SPM_START_PUNCTUATION

# Fine-tuning features pad with 0 (the original writes a literal 0, not the pad token's id).
PAD_ID = 0


def _to_text(text):
  if isinstance(text, bytes):
    return text.decode()  # utf-8, whatever the locale
  if isinstance(text, str):
    return text
  raise TypeError(f"expected str or bytes, got {type(text).__name__}")


def preprocess_text(text, lower=False):
  """Normalises raw text before SentencePiece, as the original's `preprocess_text`.

  Collapses whitespace runs to one space and strips the ends, applies NFKD and drops
  combining marks (so "é" -> "e"), then lowercases if `lower`. Accepts str or utf-8 bytes;
  returns str.
  """
  # Unlike XLNet and Hugging Face's AlbertTokenizer, the original keeps `` and '' as they
  # are (no '"'); its pretraining data and fine-tuning features were made this way.
  outputs = " ".join(_to_text(text).split())
  if not outputs.isascii():  # ASCII is already NFKD and has no combining marks
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join(c for c in outputs if not unicodedata.combining(c))
  if lower:
    outputs = outputs.lower()
  return outputs


def is_digit_comma_piece(piece):
  """True for a piece the original's encode step splits: longer than one character, ending
  in a digit and ","."""
  return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def split_digit_comma_piece(sp_model, piece):
  """The pieces that replace a digit-comma piece: "▁1990," -> "▁1990", ","."""
  cur_pieces = sp_model.encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
  # The re-encoding gets spm's dummy "▁" prefix; a piece from inside a word must not.
  if piece[0] != SPIECE_UNDERLINE and cur_pieces and cur_pieces[0][0] == SPIECE_UNDERLINE:
    if len(cur_pieces[0]) == 1:
      cur_pieces = cur_pieces[1:]
    else:
      cur_pieces[0] = cur_pieces[0][1:]
  return cur_pieces + [piece[-1]]


def encode_pieces(sp_model, text):
  """SentencePiece pieces with the original's digit-comma split ("▁1990," -> "▁1990", ",")."""
  new_pieces = []
  for piece in sp_model.encode_as_pieces(text):
    if is_digit_comma_piece(piece):
      new_pieces.extend(split_digit_comma_piece(sp_model, piece))
    else:
      new_pieces.append(piece)
  return new_pieces


# utf-8, a leading byte-order mark dropped (some vocab.txt files carry one).
_VOCAB_ENCODING = "utf-8-sig"


def load_vocab(vocab_file):
  """Reads a WordPiece vocab: one token per line, id = line number.

  Returns `(vocab, inv_vocab)`: a dict token -> id (the first line wins for a duplicated
  token) and the list of tokens by id. Raises ValueError naming the file when it is empty
  or not utf-8.
  """
  try:
    with open(vocab_file, encoding=_VOCAB_ENCODING) as reader:
      inv_vocab = [line.strip() for line in reader]
  except UnicodeDecodeError as e:
    raise ValueError(f"vocab_file {vocab_file!r} is not valid utf-8: {e}") from e
  if not any(inv_vocab):
    raise ValueError(f"vocab_file {vocab_file!r} is empty: expected one token per line")
  vocab = {}
  for index, token in enumerate(inv_vocab):
    vocab.setdefault(token, index)
  return vocab, inv_vocab


def _check_file(path, argument):
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{argument} not found: {path!r}")


# ---------------------------------------------------------------------------------------------
# BERT's basic tokenizer and WordPiece, used when no SentencePiece model is given.


def is_whitespace(char):
  """BERT's whitespace: space, tab, newline, carriage return and the Zs category. Not
  `str.isspace()` (which also takes U+2028, U+0085, ...)."""
  if char in ("\t", "\n", "\r"):  # control characters to Unicode; the space is Zs
    return True
  return unicodedata.category(char) == "Zs"


def is_control(char):
  """BERT's control characters, which its cleaning drops: the Cc and Cf categories but tab,
  newline and carriage return (whitespace to BERT). Unassigned (Cn), private-use (Co) and
  surrogate (Cs) code points are kept, as in the original."""
  if char in ("\t", "\n", "\r"):  # whitespace, not control, for BERT
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


# NUL and the replacement character (U+FFFD, what undecodable bytes become).
_DROPPED_CODEPOINTS = frozenset((0, 0xFFFD))


def is_dropped(char):
  """Whether BERT's cleaning drops `char`: NUL, U+FFFD and the control characters."""
  return ord(char) in _DROPPED_CODEPOINTS or is_control(char)


# BERT's four ASCII ranges (33-47, 58-64, 91-96, 123-126): the printable non-alphanumerics.
_ASCII_SYMBOLS = frozenset(chr(cp) for cp in range(33, 127) if not chr(cp).isalnum())


def is_punctuation(char):
  """BERT's punctuation, split off as a word of its own: the P* categories and all non-letter,
  non-digit ASCII symbols."""
  # Non-letter ASCII such as "^", "$" and "`" count as punctuation, as in BERT.
  return char in _ASCII_SYMBOLS or unicodedata.category(char).startswith("P")


def is_cjk_char(cp):
  """CJK Unified Ideographs blocks (not Hangul, Hiragana or Katakana), as in BERT."""
  # BERT's eight ranges; its three adjacent Extension C, D and E ranges written as one.
  return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
      or 0x2A700 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, do_lower_case):
  """BERT's BasicTokenizer: clean, isolate CJK chars, lowercase/strip accents, split punct."""
  chars = []
  for char in text:
    if is_dropped(char):
      continue
    if is_whitespace(char):
      chars.append(" ")
    elif is_cjk_char(ord(char)):
      chars.extend((" ", char, " "))
    else:
      chars.append(char)
  tokens = []
  for token in "".join(chars).split():
    if do_lower_case:
      token = unicodedata.normalize("NFD", token.lower())
      token = "".join(c for c in token if unicodedata.category(c) != "Mn")
    current = []
    for char in token:
      if is_punctuation(char):
        if current:
          tokens.append("".join(current))
          current = []
        tokens.append(char)
      else:
        current.append(char)
    if current:
      tokens.append("".join(current))
  return tokens


def wordpiece_tokenize(word, vocab, unk_token, max_input_chars_per_word=200):
  """Greedy longest-match-first split of one word; the whole word is `unk_token` on failure."""
  if len(word) > max_input_chars_per_word:
    return [unk_token]
  pieces = []
  start = 0
  while start < len(word):
    end = len(word)
    piece = None
    while start < end:
      candidate = word[start:end]
      if start > 0:
        candidate = "##" + candidate
      if candidate in vocab:
        piece = candidate
        break
      end -= 1
    if piece is None:
      return [unk_token]
    pieces.append(piece)
    start = end
  return pieces


# ---------------------------------------------------------------------------------------------


class FullTokenizer:
  """ALBERT's tokenizer: SentencePiece when `spm_model_file` is given, else WordPiece.

    tok = FullTokenizer(spm_model_file="spiece.model", do_lower_case=True)
    tok.tokenize("Hello World")                     # ['▁hello', '▁world']
    zh = FullTokenizer(vocab_file="albert_zh/vocab.txt")
    zh.tokenize("南京")                              # ['南', '京']

  Args:
    vocab_file: WordPiece vocab (one token per line); ignored when `spm_model_file` is given.
    do_lower_case: lowercase (and in WordPiece mode strip accents) before splitting. The
     English spm model does not case-fold, so this must match how it was trained.
    spm_model_file: SentencePiece model, e.g. ALBERT's `30k-clean.model`.
  """

  def __init__(self, vocab_file=None, do_lower_case=True, spm_model_file=None):
    self.do_lower_case = do_lower_case
    self.vocab_file = None
    self.spm_model_file = None
    self.sp_model = None
    if spm_model_file is not None:
      spm_model_file = os.fspath(spm_model_file)
      _check_file(spm_model_file, "spm_model_file")
      self.spm_model_file = spm_model_file
      self.sp_model = sentencepiece.SentencePieceProcessor()
      try:
        self.sp_model.load(spm_model_file)
      except (OSError, RuntimeError) as e:
        raise ValueError(f"spm_model_file {spm_model_file!r} is not a SentencePiece "
                 f"model: {e}") from e
      self._inv_vocab = [self.sp_model.id_to_piece(i)
                for i in range(self.sp_model.get_piece_size())]
      self._vocab = {piece: i for i, piece in enumerate(self._inv_vocab)}
      self._specials = SPM_SPECIALS
    elif vocab_file is not None:
      vocab_file = os.fspath(vocab_file)
      _check_file(vocab_file, "vocab_file")
      self.vocab_file = vocab_file
      self._vocab, self._inv_vocab = load_vocab(vocab_file)
      self._specials = WORDPIECE_SPECIALS
      if self._specials["unk"] not in self._vocab:
        raise ValueError(f"vocab_file {vocab_file!r} has no {self._specials['unk']} "
                 "token, which WordPiece needs for words it cannot split")
    else:
      raise ValueError("FullTokenizer needs spm_model_file (SentencePiece) or vocab_file "
               "(WordPiece); both are None")

  @classmethod
  def from_spm(cls, spm_model_file, do_lower_case=True):
    """A SentencePiece tokenizer."""
    return cls(do_lower_case=do_lower_case, spm_model_file=spm_model_file)

  @classmethod
  def from_vocab(cls, vocab_file, do_lower_case=True):
    """A WordPiece tokenizer."""
    return cls(vocab_file=vocab_file, do_lower_case=do_lower_case)

  @property
  def is_spm(self):
    """True in SentencePiece mode, False in WordPiece mode."""
    return self.sp_model is not None

  def tokenize(self, text):
    """Splits str or utf-8 bytes into a list of pieces (str)."""
    text = _to_text(text)
    if self.is_spm:
      return encode_pieces(self.sp_model, preprocess_text(text, lower=self.do_lower_case))
    unk = self._specials["unk"]
    pieces = []
    for word in basic_tokenize(text, self.do_lower_case):
      pieces.extend(wordpiece_tokenize(word, self._vocab, unk))
    return pieces

  def encode_ids(self, texts):
    """Ids of many texts: `convert_tokens_to_ids(tokenize(t))` for each, much faster.

    SentencePiece mode encodes the batch in C++ and redoes with pieces only the texts where
    the digit-comma split can apply (a digit followed by ",").
    """
    if not self.is_spm:
      return [self.convert_tokens_to_ids(self.tokenize(t)) for t in texts]
    normalised = [preprocess_text(t, lower=self.do_lower_case) for t in texts]
    ids = self.sp_model.encode(normalised)
    for i, text in enumerate(normalised):
      if _DIGIT_COMMA.search(text):
        ids[i] = self.convert_tokens_to_ids(encode_pieces(self.sp_model, text))
    return ids

  def convert_tokens_to_ids(self, tokens):
    """Ids of `tokens`; a token outside the vocab gets `unk_id` (as spm's piece_to_id does)."""
    unk_id = self.unk_id
    return [self._vocab.get(token, unk_id) for token in tokens]

  def convert_ids_to_tokens(self, ids):
    """Tokens of `ids`; raises IndexError for an id outside [0, vocab_size)."""
    tokens = []
    for i in ids:
      i = int(i)
      if not 0 <= i < len(self._inv_vocab):
        raise IndexError(f"token id {i} is outside the vocabulary "
                 f"[0, {len(self._inv_vocab)})")
      tokens.append(self._inv_vocab[i])
    return tokens

  def is_word_start(self, piece):
    """Whether `piece` begins a word, for token_boundary and whole-word masking.

    SentencePiece (the original's `_is_start_piece`): starts with "▁" or "<", is a single
    punctuation character, or has a character whose lowercase is outside a-z and the
    original's punctuation set (so digits, CJK and "'" make a piece a start). WordPiece:
    anything not starting with "##". [CLS]/[SEP] are the caller's business.
    """
    if not self.is_spm:
      return not piece.startswith("##")
    # As the original states it; the last rule alone would also start these pieces ("▁" and
    # "<" are outside a-z and the punctuation), so this line's mutants are equivalent.
    if piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<"):  # pragma: no mutate
      return True
    if piece in _SPM_START_PUNCTUATION:
      return True
    return not all(c.lower() in _SPM_WORD_CHARS for c in piece)

  @property
  def vocab(self):
    """dict token -> id (a copy)."""
    return dict(self._vocab)

  @property
  def vocab_size(self):
    """Number of ids: spm pieces, or lines of the vocab file."""
    return len(self._inv_vocab)

  def _special_id(self, name):
    token = self._specials[name]
    if token not in self._vocab:
      source = self.spm_model_file or self.vocab_file
      raise KeyError(f"special token {token!r} is not in {source!r}")
    return self._vocab[token]

  @property
  def pad_id(self):
    return self._special_id("pad")

  @property
  def unk_id(self):
    return self._special_id("unk")

  @property
  def cls_id(self):
    return self._special_id("cls")

  @property
  def sep_id(self):
    return self._special_id("sep")

  @property
  def mask_id(self):
    return self._special_id("mask")

  @property
  def cls_token(self):
    return self._specials["cls"]

  @property
  def sep_token(self):
    return self._specials["sep"]

  @property
  def mask_token(self):
    return self._specials["mask"]


# ---------------------------------------------------------------------------------------------
# Packing for fine-tuning.


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens):
  """Pops tokens, in place, from the end of the longer list (B when equal) until they fit."""
  if max_num_tokens < 0:
    raise ValueError(f"max_num_tokens must be >= 0, got {max_num_tokens}")
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def encode_pair(tokenizer, text_a, text_b=None, max_seq_length=128):
  """Packs one or two texts as `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`.

  A single text is cut to max_seq_length - 2 pieces; a pair is cut with `truncate_seq_pair`
  to max_seq_length - 3. A `text_b` that is None, empty or has no pieces (e.g. only spaces)
  means a single segment, as the original's `if tokens_b:`.

  Returns a dict of python lists: `tokens` (unpadded), and `input_ids`, `input_mask`,
  `segment_ids` of length max_seq_length: segment 0 for [CLS], A and the first [SEP], 1 for B
  and the last [SEP]; padding has id 0, mask 0 and segment 0.
  """
  min_length = 3 if text_b else 2
  if max_seq_length < min_length:
    what = "a pair" if text_b else "one segment"
    raise ValueError(f"max_seq_length must be >= {min_length} to hold the special tokens "
             f"of {what}, got {max_seq_length}")
  tokens_a = tokenizer.tokenize(text_a)
  tokens_b = (tokenizer.tokenize(text_b) if text_b else None) or None
  if tokens_b is None:
    tokens_a = tokens_a[:max_seq_length - 2]
  else:
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)

  cls, sep = tokenizer.cls_token, tokenizer.sep_token
  tokens = [cls] + tokens_a + [sep]
  segment_ids = [0] * len(tokens)
  if tokens_b is not None:
    tokens += tokens_b + [sep]
    segment_ids += [1] * (len(tokens_b) + 1)

  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  input_mask = [1] * len(input_ids)
  padding = max_seq_length - len(input_ids)
  return {
    "input_ids": input_ids + [PAD_ID] * padding,
    "input_mask": input_mask + [0] * padding,
    "segment_ids": segment_ids + [0] * padding,
    "tokens": tokens,
  }
