"""The original ALBERT's SentencePiece tokenization, restated independently for tests.

    ReferenceTokenizer(spm_model_file, do_lower_case=True).encode_ids("In 1990, the")

Written from the rules of google-research/albert `tokenization.py` (`preprocess_text`,
`encode_pieces`, `encode_ids`) on top of the sentencepiece package alone, importing nothing
from albert_tf, so tests hold our tokenizers to the original and not to themselves.
"""

import functools
import random
import unicodedata

import sentencepiece

_UNDERLINE = "\u2581"


def preprocess_text(text, lower):
  """Whitespace runs -> one space, ends stripped, NFKD, combining marks dropped, lowercase.

  Nothing else: no `` or '' -> '"' (that is XLNet's and Hugging Face's, not ALBERT's).
  """
  text = " ".join(text.strip().split())
  text = "".join(c for c in unicodedata.normalize("NFKD", text)
                 if not unicodedata.combining(c))
  return text.lower() if lower else text


def encode_pieces(sp_model, text):
  """`EncodeAsPieces`, then every piece like "▁1990," (a digit before a final ",") becomes
  the pieces of its number, re-encoded, and ","."""
  pieces = []
  for piece in sp_model.EncodeAsPieces(text):
    if len(piece) < 2 or piece[-1] != "," or not piece[-2].isdigit():
      pieces.append(piece)
      continue
    number = sp_model.EncodeAsPieces(piece[:-1].replace(_UNDERLINE, ""))
    # Re-encoding adds a word-start "▁"; a piece from inside a word must not gain one. (The
    # original states this rule comparing str with utf-8 bytes, which only Python 2 honours.)
    if not piece.startswith(_UNDERLINE) and number[0].startswith(_UNDERLINE):
      number[0] = number[0][1:]
      if not number[0]:
        number.pop(0)
    pieces.extend(number + [","])
  return pieces


class ReferenceTokenizer:
  """Text -> ids as the original's FullTokenizer in SentencePiece mode, after the
  `preprocess_text` its callers apply."""

  def __init__(self, spm_model_file, do_lower_case=True):
    self.sp_model = sentencepiece.SentencePieceProcessor()
    self.sp_model.Load(str(spm_model_file))
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    return encode_pieces(self.sp_model, preprocess_text(text, self.do_lower_case))

  def encode_ids(self, text):
    return [self.sp_model.PieceToId(piece) for piece in self.tokenize(text)]


# Real lines with `` or '': none in corpus_en, so the PTB-style quotes of GLUE text.
# (file under glue/, text columns, has a header row)
_LATEX_QUOTE_SOURCES = (("SST-2/dev.tsv", (0,), True), ("SST-2/test.tsv", (1,), True),
                        ("STS-B/dev.tsv", (7, 8), True), ("STS-B/train.tsv", (7, 8), True),
                        ("CoLA/in_domain_train.tsv", (3,), False),
                        ("QNLI/test.tsv", (1, 2), True), ("SST-2/train.tsv", (0,), True))


def real_texts_with_latex_quotes(shared_data, count=400):
  """The first `count` real GLUE texts holding `` or '', in `_LATEX_QUOTE_SOURCES` order."""
  texts = []
  for name, columns, header in _LATEX_QUOTE_SOURCES:
    lines = (shared_data / "glue" / name).read_text(encoding="utf-8").splitlines()
    for line in lines[1 if header else 0:]:
      row = line.split("\t")
      texts.extend(row[c] for c in columns
                   if c < len(row) and ("``" in row[c] or "''" in row[c]))
      if len(texts) >= count:
        return texts[:count]
  return texts


@functools.lru_cache(maxsize=None)
def _assigned_characters():
  """Every code point that is not unassigned, a surrogate or private use, in order."""
  return tuple(chr(cp) for cp in range(0x110000)
               if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co"))


def random_unicode_texts(count, seed):
  """Test inputs: short strings mixing ASCII, every kind of assigned character, and the hard
  cases."""
  rng = random.Random(seed)
  assigned = _assigned_characters()
  hard = (list("\u03a3\u03c3\u03c2\u0391\u0392\u039f\u0394\u0308\u0301\u0342.'\u02b0\u00ad"
               "\u2028\u00a0\u3000\t\n\r``''\u0130\u03f91,2\u0345\u034f\u302e\ufffd\x00\x1c"
               "\u200b\ufeff\u0f39\u0334\uf900\u1e9e\ue000\u0378")
          + ["\U0001d16d", "\U0001d165", "\U0001d16e",  # sigma, marks, Mc of class 216/226
             "\U000f0001"])  # private use and unassigned (kept by cleaning, as the original)
  texts = []
  for _ in range(count):
    chars = []
    for _ in range(rng.randint(0, 12)):
      roll = rng.random()
      if roll < 0.4:
        chars.append(rng.choice(hard))
      elif roll < 0.6:
        chars.append(chr(rng.randint(32, 126)))
      else:
        chars.append(rng.choice(assigned))
    texts.append("".join(chars))
  return texts
