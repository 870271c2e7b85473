"""ALBERT's tokenizer as TensorFlow ops: strings -> ids -> packed model inputs, in the graph.

  tokenizer = InGraphTokenizer(spm_model_file="spiece.model", do_lower_case=True)
  ids = tokenizer.tokenize(tf.constant(["In 1990, the", "Hello World"]))  # int32 ragged
  inputs = pack_inputs(ids, max_seq_length=16, cls_id=tokenizer.cls_id,
                       sep_id=tokenizer.sep_id)                  # three [2, 16] int32

The graph gives exactly the ids of the Python `FullTokenizer.encode_ids` and the packing of
`encode_pair` (SPEC.md, "Tokenization"), so a served model sees what it was fine-tuned on.
Unicode behaviour is not left to ICU: every character property the Python tokenizer consults
(`str.isspace`, NFKD/NFD, `unicodedata.combining`, categories, `str.lower` with its final-sigma
rule) is evaluated with this Python's `unicodedata` when the tokenizer is built, and written
into the graph as lookup tables and RE2 character classes. The served graph therefore matches
the Python tokenizer of the Python that exported it, whatever ICU version TensorFlow links.
The same tables serve the exports' own text work (`whitespace_class`, `wordpiece_classes`,
`valid_utf8`, ...); the SavedModels themselves are export/'s (export/preprocessing.py).

Bytes that are not valid utf-8 never fail the graph: each invalid sequence becomes U+FFFD,
exactly as Python's `bytes.decode("utf-8", errors="replace")` (the Python tokenizer itself
raises UnicodeDecodeError on such input), and the ids are those of that decoded text: the spm
model's normaliser turns U+FFFD into a space, WordPiece's cleaning drops it.

One difference remains possible in SentencePiece mode: where two segmentations have exactly
the same float score, the Python package and tensorflow_text's FastSentencepieceTokenizer may
break the tie differently (as sentencepiece versions do among themselves). None of the 148k
lines of the real English test corpora hits it; 3 of 50k wikitext lines stuffed with runs
such as "666" or "ddd" did (with tensorflow_text's SentencepieceTokenizer: 1870).

Not imported by `albert_tf.tokenization` itself: it needs TensorFlow and tensorflow_text.
"""

import functools
import re
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization import tokenizer as py_tokenizer

# The original's limit for one WordPiece word (`wordpiece_tokenize`), in characters.
_MAX_CHARS_PER_WORD = 200
_NUM_CODEPOINTS = 0x110000
_SURROGATES = range(0xD800, 0xE000)
_CAPITAL_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
_ASCII_ONLY = r"[\x00-\x7f]*"


# ---------------------------------------------------------------------------------------------
# Character properties, from this Python's unicodedata (computed once per process).


def _ranges(codepoints):
  """Sorted (start, end) runs of consecutive code points."""
  runs = []
  for cp in sorted(codepoints):
    if runs and runs[-1][1] == cp - 1:
      runs[-1][1] = cp
    else:
      runs.append([cp, cp])
  return runs


def _regex_class(codepoints, negate=False):
  """An RE2 character class matching exactly `codepoints` (or all others, if `negate`)."""
  parts = [rf"\x{{{a:x}}}" if a == b else rf"\x{{{a:x}}}-\x{{{b:x}}}"
           for a, b in _ranges(codepoints)]
  if not parts:
    raise ValueError("an empty character class")
  return "[" + ("^" if negate else "") + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def assigned_characters():
  """Every code point with properties (not unassigned, surrogate or private use), as a
  one-character str: the characters the tables below are read off (and tests draw from)."""
  return tuple(chr(cp) for cp in range(_NUM_CODEPOINTS)
               if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co"))


@functools.lru_cache(maxsize=None)
def whitespace_class():
  """An RE2 class of `str.split()`'s whitespace, which `preprocess_text` collapses: serving
  graphs split words at it (`whitespace_class() + "+"`) exactly where Python splits them."""
  return _regex_class(ord(c) for c in assigned_characters() if c.isspace())


@functools.lru_cache(maxsize=None)
def _decimal_class():
  """Python re's `\\d` in `encode_ids`' digit-comma gate (any Unicode decimal digit)."""
  return _regex_class(ord(c) for c in assigned_characters() if re.fullmatch(r"\d", c))


@functools.lru_cache(maxsize=None)
def _nfkd_without_combining_table():
  """char -> NFKD(char) without combining marks, where that differs (`preprocess_text`).

  Per character is exact for the whole string: NFKD only decomposes and then reorders
  characters of non-zero combining class, and those are all dropped.
  """
  table = {}
  for char in assigned_characters():
    if char.isascii():
      continue
    mapped = "".join(c for c in unicodedata.normalize("NFKD", char)
                      if not unicodedata.combining(c))
    if mapped != char:
      table[ord(char)] = mapped
  return table


@functools.lru_cache(maxsize=None)
def _lower_table():
  """char -> `char.lower()` where that differs (full case mapping, e.g. "İ" -> "i̇")."""
  return {ord(c): c.lower() for c in assigned_characters() if c.lower() != c}


@functools.lru_cache(maxsize=None)
def _final_sigma_pattern():
  """RE2 pattern and rewrite turning each final capital sigma into "ς", as `str.lower()`.

  CPython lowers "Σ" to "ς" when the closest character before it that is not
  case-ignorable is cased, and no such character after it is cased. The classes are read
  off `str.lower()` itself: in "AΣx", "Σ" stays non-final exactly when x is cased and not
  case-ignorable; in "AΣxB" it does when x is either of those or case-ignorable.
  """
  cased, ignorable = [], []
  for char in assigned_characters():
    if ("A\u03a3" + char).lower()[1] == "\u03c3":
      cased.append(ord(char))
    elif ("A\u03a3" + char + "B").lower()[1] == "\u03c3":
      ignorable.append(ord(char))
  cased_class = _regex_class(cased)
  ignorable_class = _regex_class(ignorable)
  other_class = _regex_class(cased + ignorable, negate=True)
  # Matches never overlap: the cased character before a final sigma is the last
  # non-ignorable one before it, and cannot be a final sigma or what follows one.
  pattern = (f"({cased_class})({ignorable_class}*){_CAPITAL_SIGMA}"
             f"({ignorable_class}*)({other_class}|$)")
  return pattern, rf"\1\2{_FINAL_SIGMA}\3\4"


@functools.lru_cache(maxsize=None)
def wordpiece_classes():
  """RE2 classes of the Python `basic_tokenize`'s character tests, from its own predicates:
  `(dropped, whitespace, cjk, punctuation)`. Cleaning deletes `dropped`, the words are cut at
  `whitespace`, and each CJK character and punctuation mark is a word of its own."""
  is_dropped, is_whitespace = py_tokenizer.is_dropped, py_tokenizer.is_whitespace
  is_cjk_char, is_punctuation = py_tokenizer.is_cjk_char, py_tokenizer.is_punctuation
  dropped, spaces, cjk, punctuation = [], [], [], []
  for cp in range(_NUM_CODEPOINTS):
    if cp in _SURROGATES:
      continue
    char = chr(cp)
    if is_dropped(char):
      dropped.append(cp)
    elif is_whitespace(char) or char.isspace():
      # str.split() also splits at the survivors of cleaning that are not BERT whitespace
      # (U+2028, U+2029).
      spaces.append(cp)
    if is_cjk_char(cp):
      cjk.append(cp)
    if is_punctuation(char):
      punctuation.append(cp)
  return (_regex_class(dropped), _regex_class(spaces), _regex_class(cjk),
          _regex_class(punctuation))


@functools.lru_cache(maxsize=None)
def _nfd_tables():
  """NFD and the dropping of Mn marks that follows it under do_lower_case (WordPiece).

  Returns `(table, swaps, ccc0_marks_class)`: `table` maps a char to its NFD without the Mn
  marks of non-zero combining class; `swaps` are (pattern, rewrite) pairs that do NFD's
  canonical reordering for the few non-Mn characters of non-zero class (Mc, e.g. U+1D16D),
  applied until none matches; then `ccc0_marks_class` (Mn of class 0) is deleted. Mn marks
  of class 0 stay until the reordering because they end a reordering run.
  """
  table = {}
  kept_marks = {}  # non-Mn characters of non-zero combining class -> class
  ccc0_marks = []
  for char in assigned_characters():
    category, ccc = unicodedata.category(char), unicodedata.combining(char)
    if ccc and category != "Mn":
      kept_marks[ord(char)] = ccc
    if category == "Mn" and not ccc:
      ccc0_marks.append(ord(char))
    if char.isascii():
      continue
    mapped = "".join(c for c in unicodedata.normalize("NFD", char)
                     if not (unicodedata.category(c) == "Mn" and unicodedata.combining(c)))
    if mapped != char:
      table[ord(char)] = mapped
  swaps = []
  for ccc in sorted(set(kept_marks.values())):
    higher = [cp for cp, c in kept_marks.items() if c > ccc]
    if higher:
      lower = [cp for cp, c in kept_marks.items() if c == ccc]
      swaps.append((f"({_regex_class(higher)})({_regex_class(lower)})", r"\2\1"))
  return table, tuple(swaps), _regex_class(ccc0_marks)


# ---------------------------------------------------------------------------------------------
# Graph helpers.


class _CharMap:
  """Replaces each character of utf-8 strings found in a table (code point -> string)."""

  def __init__(self, table):
    keys = sorted(table)
    self._keys = tf.constant(keys, tf.int32)
    self._values = tf.constant([table[k].encode("utf-8") for k in keys])
    self._last = len(keys) - 1

  def __call__(self, strings):
    codepoints = tf.strings.unicode_decode(strings, "UTF-8")
    flat = codepoints.flat_values
    position = tf.minimum(tf.searchsorted(self._keys, flat), self._last)
    found = tf.equal(tf.gather(self._keys, position), flat)
    chars = tf.strings.unicode_encode(tf.expand_dims(flat, -1), "UTF-8")
    mapped = tf.where(found, tf.gather(self._values, position), chars)
    return tf.strings.reduce_join(codepoints.with_flat_values(mapped), axis=-1)


def valid_utf8(strings):
  """`strings` [batch] with each invalid utf-8 sequence replaced by U+FFFD, as Python's
  `bytes.decode("utf-8", errors="replace")`: what a graph reads instead of failing."""
  return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)


def _where_rows(mask, strings, fn, otherwise=None):
  """`fn` on the rows of `strings` where `mask` holds, `otherwise` (or nothing) on the rest.

  Most English lines are ASCII, so the per-character Unicode work runs on few rows.
  """
  yes = tf.cast(tf.where(mask)[:, 0], tf.int32)
  no = tf.cast(tf.where(tf.logical_not(mask))[:, 0], tf.int32)
  rest = tf.gather(strings, no)
  if otherwise is not None:
    rest = otherwise(rest)
  return tf.dynamic_stitch([no, yes], [rest, fn(tf.gather(strings, yes))])


def _is_ascii(strings):
  return tf.strings.regex_full_match(strings, _ASCII_ONLY)


def contains(strings, char):
  """bool [batch]: whether each of `strings` holds the character `char` (newlines included)."""
  return tf.strings.regex_full_match(strings, "(?s).*" + re.escape(char) + ".*")


def gather_runs(values, starts, lengths):
  """`values[starts[i] : starts[i] + lengths[i]]` for each i, concatenated: a flat tensor of
  `sum(lengths)` values (`starts`, `lengths` int [n], the runs inside `values`)."""
  return tf.gather(values, tf.ragged.range(starts, starts + lengths).flat_values)


# ---------------------------------------------------------------------------------------------


class InGraphTokenizer(tf.Module):
  """`FullTokenizer.encode_ids` as TensorFlow ops: strings [batch] -> int32 ids [batch, (n)].

    tok = InGraphTokenizer(spm_model_file="spiece.model")
    tok.tokenize(tf.constant(["In 1990, the"]))   # <tf.RaggedTensor [[19, 961, 15, 14]]>
    zh = InGraphTokenizer(vocab_file="albert_zh/vocab.txt")

  SentencePiece mode (`spm_model_file`) runs `preprocess_text` in the graph, then
  tensorflow_text's FastSentencepieceTokenizer, then the original's digit-comma split. WordPiece
  mode (`vocab_file`) runs BERT's basic tokenizer in the graph, then tensorflow_text's
  FastWordpieceTokenizer (greedy longest-match-first, as `wordpiece_tokenize`). The model
  or vocab file is kept as a SavedModel asset (`tok.spm_model_file` / `tok.vocab_file`),
  though the graph holds its content and does not read it.

  Args:
    spm_model_file: SentencePiece model, e.g. ALBERT's `30k-clean.model`.
    vocab_file: WordPiece vocab, one token per line; used when `spm_model_file` is None.
    do_lower_case: as `FullTokenizer`'s.
    name: module name.

  Attributes (Python ints, not saved): `cls_id`, `sep_id`, `unk_id`, `vocab_size`.
  """

  def __init__(self, spm_model_file=None, vocab_file=None, do_lower_case=True, name=None):
    super().__init__(name=name)
    reference = py_tokenizer.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case,
                                           spm_model_file=spm_model_file)
    self.do_lower_case = bool(do_lower_case)
    self.is_spm = reference.is_spm
    self.cls_id, self.sep_id = reference.cls_id, reference.sep_id
    self.unk_id, self.vocab_size = reference.unk_id, reference.vocab_size
    if self.is_spm:
      self.spm_model_file = tf.saved_model.Asset(reference.spm_model_file)
      self._build_spm(reference)
    else:
      self.vocab_file = tf.saved_model.Asset(reference.vocab_file)
      self._build_wordpiece(reference)

  # SentencePiece ------------------------------------------------------------------------

  def _build_spm(self, reference):
    # FastSentencepieceTokenizer, not SentencepieceTokenizer: the latter's bundled
    # sentencepiece breaks exact score ties differently from the Python package's optimised
    # Viterbi ("▁2.666" -> "66", "6" instead of "6", "66" in a QNLI sentence); the former
    # agrees with it on every line of the real corpora, and also runs in TFLite.
    with open(reference.spm_model_file, "rb") as f:
      self._sentencepiece = tf_text.FastSentencepieceTokenizer(f.read())
    self._space_pattern = whitespace_class() + "+"
    self._nfkd = _CharMap(_nfkd_without_combining_table())
    self._lower = _CharMap(_lower_table())
    self._final_sigma = _final_sigma_pattern()
    self._digit_comma_gate = "(?s).*" + _decimal_class() + ",.*"
    # Every piece the digit-comma split rewrites, and what it becomes: ids of replacement i
    # are _replacement_values[_replacement_starts[i] : +_replacement_lengths[i]].
    replacements = _digit_comma_replacements(reference)
    starts, lengths, values = [0] * self.vocab_size, [0] * self.vocab_size, []
    for piece_id, ids in sorted(replacements.items()):
      starts[piece_id], lengths[piece_id] = len(values), len(ids)
      values.extend(ids)
    self._is_digit_comma = tf.constant([i in replacements for i in range(self.vocab_size)])
    self._replacement_starts = tf.constant(starts, tf.int64)
    self._replacement_lengths = tf.constant(lengths, tf.int64)
    self._replacement_values = tf.constant(values or [0], tf.int32)

  def preprocess_text(self, strings):
    """`preprocess_text(text, lower=do_lower_case)`: strings [batch] -> strings [batch].

    SentencePiece mode only; the text that SentencePiece then encodes.
    """
    if not self.is_spm:
      raise ValueError("preprocess_text belongs to SentencePiece mode; this tokenizer is "
                       "WordPiece (see basic_tokenize)")
    text = tf.strings.regex_replace(valid_utf8(strings), self._space_pattern, " ")
    text = tf.strings.regex_replace(text, "^ | $", "")
    # ASCII is its own NFKD, so (as in Python) only other rows go through the tables.
    return _where_rows(tf.logical_not(_is_ascii(text)), text, self._normalize_unicode,
                       tf.strings.lower if self.do_lower_case else None)

  def _normalize_unicode(self, text):
    text = self._nfkd(text)
    if self.do_lower_case:
      text = _where_rows(contains(text, _CAPITAL_SIGMA), text,
                         lambda t: tf.strings.regex_replace(t, *self._final_sigma))
      text = self._lower(text)  # the table has A-Z too
    return text

  def _split_digit_comma(self, text, ids):
    """`encode_ids`' digit-comma split: rows with a digit before "," get `encode_pieces`."""
    gate = tf.strings.regex_full_match(text, self._digit_comma_gate)
    flat = ids.flat_values
    rewrite = tf.logical_and(tf.repeat(gate, ids.row_lengths()),
                             tf.gather(self._is_digit_comma, flat))
    flat64 = tf.cast(flat, tf.int64)
    lengths = tf.where(rewrite, tf.gather(self._replacement_lengths, flat64), 1)
    rewritten = gather_runs(self._replacement_values,
                                    tf.gather(self._replacement_starts, flat64), lengths)
    # Tokens kept as they are read themselves: put them among the rewritten runs.
    kept = tf.repeat(tf.where(rewrite, -1, flat), lengths)
    new_flat = tf.where(kept >= 0, kept, rewritten)
    row_lengths = tf.math.unsorted_segment_sum(lengths, ids.value_rowids(), ids.nrows())
    return tf.RaggedTensor.from_row_lengths(new_flat, row_lengths, validate=False)

  def _tokenize_spm(self, strings):
    text = self.preprocess_text(strings)
    return self._split_digit_comma(text, self._sentencepiece.tokenize(text))

  # WordPiece ----------------------------------------------------------------------------

  def _build_wordpiece(self, reference):
    (self._dropped_class, self._wordpiece_space_class, self._cjk_class,
     self._punctuation_class) = wordpiece_classes()
    if self.do_lower_case:
      self._lower = _CharMap(_lower_table())
      self._final_sigma = _final_sigma_pattern()
      nfd_table, self._nfd_swaps, self._ccc0_marks_class = _nfd_tables()
      self._nfd = _CharMap(nfd_table)
      self._needs_swap = "(?s).*(?:" + "|".join(p for p, _ in self._nfd_swaps) + ").*"
    # FastWordpieceTokenizer wants each token once; ids are mapped back to the line numbers
    # `load_vocab` gives (the first line of a duplicated token). "##" alone can never match
    # in `wordpiece_tokenize` (a suffix candidate has a character after "##").
    vocab, inv_vocab = py_tokenizer.load_vocab(reference.vocab_file)
    tokens = [t for i, t in enumerate(inv_vocab) if t and t != "##" and vocab[t] == i]
    self._unk_token = reference.convert_ids_to_tokens([reference.unk_id])[0]
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=tokens, suffix_indicator="##", unknown_token=self._unk_token,
        max_bytes_per_word=4 * _MAX_CHARS_PER_WORD, token_out_type=tf.int64,
        no_pretokenization=True)
    self._wordpiece_ids = tf.constant([vocab[t] for t in tokens], tf.int32)

  def _lower_and_strip_accents(self, text):
    """The Python `basic_tokenize`'s `NFD(token.lower())` without Mn marks, on non-ASCII rows."""
    text = _where_rows(contains(text, _CAPITAL_SIGMA), text,
                       lambda t: tf.strings.regex_replace(t, *self._final_sigma))
    text = self._nfd(self._lower(text))
    swaps = self._nfd_swaps

    def reorder(t):
      for pattern, rewrite in swaps:
        t = tf.strings.regex_replace(t, pattern, rewrite)
      return (t,)

    def unsorted(t):
      return tf.reduce_any(tf.strings.regex_full_match(t, self._needs_swap))

    if swaps:
      (text,) = tf.while_loop(unsorted, reorder, (text,))
    return tf.strings.regex_replace(text, self._ccc0_marks_class, "")

  def basic_tokenize(self, strings):
    """The Python `basic_tokenize`: strings [batch] -> words, string RaggedTensor [batch, (words)].

    WordPiece mode only; the words that WordPiece then splits into pieces.
    """
    if self.is_spm:
      raise ValueError("basic_tokenize belongs to WordPiece mode; this tokenizer is "
                       "SentencePiece (see preprocess_text)")
    text = tf.strings.regex_replace(valid_utf8(strings), self._dropped_class, "")
    text = tf.strings.regex_replace(text, self._wordpiece_space_class, " ")
    text = tf.strings.regex_replace(text, f"({self._cjk_class})", r" \1 ")
    if self.do_lower_case:
      text = _where_rows(tf.logical_not(_is_ascii(text)), text,
                         self._lower_and_strip_accents, tf.strings.lower)
    text = tf.strings.regex_replace(text, f"({self._punctuation_class})", r" \1 ")
    words = tf.strings.split(text, sep=" ")
    return tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)

  def _tokenize_wordpiece(self, strings):
    words = self.basic_tokenize(strings)
    # A word over the limit is one unknown token: feed the unknown token itself.
    flat_words = words.flat_values
    too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > _MAX_CHARS_PER_WORD
    flat_words = tf.where(too_long, self._unk_token, flat_words)
    pieces = self._wordpiece.tokenize(flat_words)
    pieces = pieces.with_flat_values(tf.gather(self._wordpiece_ids, pieces.flat_values))
    return words.with_flat_values(pieces).merge_dims(1, 2)

  # --------------------------------------------------------------------------------------

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def tokenize(self, strings):
    """utf-8 strings [batch] -> int32 RaggedTensor [batch, (tokens)] of `encode_ids`' ids."""
    if self.is_spm:
      return self._tokenize_spm(strings)
    return self._tokenize_wordpiece(strings)


def _digit_comma_replacements(reference):
  """piece id -> ids that `encode_pieces` puts in its place, for each piece it splits.

  Mirrors `tokenizer.encode_pieces` for one piece, for every vocabulary piece it applies to
  (a piece longer than one character ending in a digit and ","); the piece alone decides.
  """
  sp_model = reference.sp_model
  replacements = {}
  for piece_id in range(sp_model.get_piece_size()):
    piece = sp_model.id_to_piece(piece_id)
    if py_tokenizer.is_digit_comma_piece(piece):
      replacements[piece_id] = reference.convert_tokens_to_ids(
          py_tokenizer.split_digit_comma_piece(sp_model, piece))
  return replacements


# ---------------------------------------------------------------------------------------------
# Packing.


def _truncated_pair_lengths(len_a, len_b, max_num_tokens):
  """Lengths `truncate_seq_pair` leaves, in closed form.

  It pops from the longer list (B on ties) until the total fits: the longer one is first cut
  down towards the shorter; if they meet, they then shrink alternately, B first, ending at
  ceil(max/2) for A and floor(max/2) for B.
  """
  fits = len_a + len_b <= max_num_tokens
  only_longer_cut = 2 * tf.minimum(len_a, len_b) <= max_num_tokens
  a_cut = tf.where(len_a > len_b, max_num_tokens - len_b, len_a)
  b_cut = tf.where(len_a > len_b, len_b, max_num_tokens - len_a)
  half_a = tf.cast((max_num_tokens + 1) // 2, len_a.dtype)
  half_b = tf.cast(max_num_tokens // 2, len_a.dtype)
  new_a = tf.where(fits, len_a, tf.where(only_longer_cut, a_cut, half_a))
  new_b = tf.where(fits, len_b, tf.where(only_longer_cut, b_cut, half_b))
  return new_a, new_b


def row_prefixes(ids, lengths):
  """The first `lengths[i]` ids of each row of `ids` (ragged [batch, (n)], `lengths` int64
  [batch], each at most its row's length): ragged [batch, (lengths)]."""
  values = gather_runs(ids.values, ids.row_starts(), lengths)
  return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)


def _column(value, row_lengths, dtype=tf.int32):
  """A ragged [batch, (0 or 1)] of `value`, one where row_lengths is 1."""
  values = tf.fill([tf.reduce_sum(row_lengths)], tf.constant(value, dtype))
  return tf.RaggedTensor.from_row_lengths(values, row_lengths, validate=False)


def pack_inputs(ids_a, ids_b=None, *, max_seq_length, cls_id, sep_id, has_b=None):
  """Packs token ids as `tokenization.encode_pair` (its in-graph twin): `[CLS] A [SEP]` or
  `[CLS] A [SEP] B [SEP]`, padded.

    pack_inputs(tok.tokenize(premises), tok.tokenize(hypotheses), max_seq_length=128,
                cls_id=tok.cls_id, sep_id=tok.sep_id)

  A single segment is cut to max_seq_length - 2 ids from its end; a pair as
  `truncate_seq_pair` does to max_seq_length - 3 (the longer loses ids from its end, B on
  ties), not as tensorflow_text's round-robin trimmer.

  Args:
    ids_a: int RaggedTensor [batch, (tokens)].
    ids_b: int RaggedTensor [batch, (tokens)] or None.
    max_seq_length: int >= 2 (>= 3 with ids_b): a Python int, or a scalar int tensor (the
      result's second dimension is then unknown until run time).
    cls_id, sep_id: ids of [CLS] and [SEP].
    has_b: optional bool [batch]: rows where False are packed as one segment, ignoring
      ids_b. Default: rows whose B has ids, as the original's `if tokens_b:` (so an empty B
      is one segment, as in `encode_pair`).

  Returns:
    dict of int32 [batch, max_seq_length]: `input_word_ids`, `input_mask` (1 on real
    tokens), `input_type_ids` (0 for [CLS] A [SEP], 1 for B [SEP]); padding is 0 in all.
  """
  min_length = 2 if ids_b is None else 3
  if isinstance(max_seq_length, int):
    if max_seq_length < min_length:
      raise ValueError(f"max_seq_length must be >= {min_length} to hold the special tokens, "
                       f"got {max_seq_length}")
    seq_length, shape = max_seq_length, [None, max_seq_length]
  else:
    seq_length = tf.cast(max_seq_length, tf.int64)
    tf.debugging.assert_greater_equal(
        seq_length, tf.constant(min_length, tf.int64),
        message=f"seq_length must be >= {min_length} to hold the special tokens")
    shape = tf.stack([tf.cast(ids_a.nrows(), tf.int64), seq_length])
  ids_a = tf.cast(ids_a, tf.int32)
  len_a = ids_a.row_lengths()
  single_a = tf.minimum(len_a, seq_length - 2)
  if ids_b is None:
    ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros_like(len_a))
    has_b = tf.zeros_like(len_a, tf.bool)
  ids_b = tf.cast(ids_b, tf.int32)
  if has_b is None:
    has_b = ids_b.row_lengths() > 0
  pair_a, pair_b = _truncated_pair_lengths(len_a, ids_b.row_lengths(), seq_length - 3)
  new_a = tf.where(has_b, pair_a, single_a)
  new_b = tf.where(has_b, pair_b, 0)
  one, b_sep = tf.ones_like(len_a), tf.cast(has_b, len_a.dtype)
  tokens_a, tokens_b = row_prefixes(ids_a, new_a), row_prefixes(ids_b, new_b)
  word_ids = tf.concat([_column(cls_id, one), tokens_a, _column(sep_id, one), tokens_b,
                        _column(sep_id, b_sep)], axis=1)
  type_ids = tf.concat([_column(0, one), tf.zeros_like(tokens_a), _column(0, one),
                        tf.ones_like(tokens_b), _column(1, b_sep)], axis=1)
  return {
      "input_word_ids": word_ids.to_tensor(py_tokenizer.PAD_ID, shape=shape),
      "input_mask": tf.ones_like(word_ids).to_tensor(0, shape=shape),
      "input_type_ids": type_ids.to_tensor(0, shape=shape),
  }
