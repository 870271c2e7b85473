"""A SQuAD SavedModel for serving: (question, context) strings in, the answer out.

    tf.saved_model.load(path).signatures["serving_default"](
        question=tf.constant(["Who wrote it?"]), context=tf.constant(["It was written by ..."]))
    # {"answer": [b"..."], "start": [17], "end": [29], "score": [...], "null_score": [...]}

Everything `run_squad.py --do_predict` does happens in the graph: the question is tokenized and
cut to max_query_length; the context is split at whitespace and each word tokenized (the same
pieces as tokenizing the whole text: SentencePiece never joins across a space); the pieces are
cut into windows every doc_stride; each window is packed `[CLS] question [SEP] window [SEP]`;
spans are scored as the original does (n-best starts x ends for v1, the beam for v2, only from
the window where the start has the most context) and the best over all windows wins. For v2
the answer is empty when the smallest `cls_logits` over windows (the null score) is at least
the exported `null_score_diff_threshold`.

`start`/`end` are character offsets in the context (end exclusive), -1 for an empty answer.
An empty (or whitespace) context has the empty answer, as `--do_predict` gives it; question
and context of different row counts are an INVALID_ARGUMENT naming both (export/requests.py).
`serve_examples(examples)` answers the same from serialized tf.train.Examples holding a
question and a context bytes feature each (export/examples.py).
Piece offsets are those of `tokenization.offsets` (what run_squad uses) except in the rare
word whose characters normalise differently alone than together (a character whose NFKD
form holds a space): there every piece spans the whole word.

With a WordPiece vocabulary (albert_zh: unspaced Chinese) the context is first cut into
BERT's basic words with their byte offsets (at whitespace; each CJK character and punctuation
mark a word of its own), each word tokenized alone, and a piece spans the raw characters of
its part of the word (`##` pieces included, an [UNK] the whole word), as in
`tokenization.offsets`. The same caveat holds for the rare character that becomes
punctuation only once lowercased and stripped of accents: its word's pieces span the word.
"""

import functools

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.export import requests
from albert_tf.export.examples import parse_examples
from albert_tf.export.saving import save_atomically
from albert_tf.tokenization import SPIECE_UNDERLINE, FullTokenizer
from albert_tf.tokenization.in_graph import (InGraphTokenizer, gather_runs, valid_utf8,
                                             whitespace_class, wordpiece_classes)
from albert_tf.tokenization.offsets import wordpiece_char_length

_NEG_INF = float("-inf")


@functools.lru_cache(maxsize=None)
def _wordpiece_char_lengths(do_lower_case):
  """`wordpiece_char_length` of every code point, as runs: (first code points, lengths)."""
  starts, lengths = [], []
  for cp in range(0x110000):
    n = 1 if 0xD800 <= cp < 0xE000 else wordpiece_char_length(chr(cp), do_lower_case)
    if not lengths or lengths[-1] != n:
      starts.append(cp)
      lengths.append(n)
  return starts, lengths


def _argmax_over_windows(scores):
  """argmax over axis 1 of `scores` [batch, windows, ...], 0 where a row has no window: one
  -inf window is appended, as a request whose contexts are all empty has none at all."""
  shape = tf.concat([tf.shape(scores)[:1], [1], tf.shape(scores)[2:]], 0)
  return tf.argmax(tf.concat([scores, tf.fill(shape, _NEG_INF)], 1), axis=1)


def _column(value, rows, dtype=tf.int32):
  """A ragged [rows, (1)] filled with `value`."""
  return tf.RaggedTensor.from_row_lengths(tf.fill([rows], tf.constant(value, dtype)),
                                          tf.ones([rows], tf.int64), validate=False)


class SquadServing(tf.Module):
  """The serving module; see the module docstring for what its signature computes."""

  def __init__(self, squad_model, tokenizer, reference, max_seq_length=384, doc_stride=128,
               max_query_length=64, n_best_size=20, max_answer_length=30,
               null_score_diff_threshold=None):
    super().__init__(name="squad")
    self.model = squad_model
    self.tokenizer = tokenizer
    self.version_2 = squad_model.version_2
    self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
    self.max_query_length, self.n_best_size = max_query_length, n_best_size
    self.max_answer_length = max_answer_length
    self.null_score_diff_threshold = null_score_diff_threshold
    self._space = whitespace_class() + "+"
    if reference.is_spm:
      self._build_spm(reference)
    else:
      self._build_wordpiece(reference)

  def _build_spm(self, reference):
    """Tables of the SentencePiece alignment: bytes per piece, the characters it knows."""
    pieces = reference.convert_ids_to_tokens(range(reference.vocab_size))
    # Bytes each piece covers in the normalised word; -1 for <unk> (its surface varies).
    lengths = [len(p.replace(SPIECE_UNDERLINE, "").encode("utf-8")) for p in pieces]
    lengths[reference.unk_id] = -1
    self._piece_bytes = tf.constant(lengths, tf.int64)
    sp_model = reference.sp_model
    known = sorted({p for i, p in enumerate(pieces) if len(p) == 1 and not (
        sp_model.is_control(i) or sp_model.is_unknown(i))})
    self._known_chars = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(known), tf.ones([len(known)], tf.int64)),
        default_value=0)

  def _build_wordpiece(self, reference):
    """Tables of the WordPiece alignment: characters per piece and per raw character."""
    pieces = reference.convert_ids_to_tokens(range(reference.vocab_size))
    # Characters each piece covers in its normalised word ("##" is no character of it);
    # -1 for [UNK] (it spans its whole word).
    lengths = [len(p) - 2 if p.startswith("##") and len(p) > 2 else len(p) for p in pieces]
    lengths[reference.unk_id] = -1
    self._piece_chars = tf.constant(lengths, tf.int64)
    starts, char_lengths = _wordpiece_char_lengths(reference.do_lower_case)
    self._char_run_starts = tf.constant(starts, tf.int32)
    self._char_run_lengths = tf.constant(char_lengths, tf.int64)
    _, space, cjk, punctuation = wordpiece_classes()
    self._word_split = f"{space}+|{cjk}|{punctuation}"
    self._word_keep = f"{cjk}|{punctuation}"

  # --- context pieces and their byte spans ---------------------------------------------------
  def _context_pieces(self, context):
    """ids, first byte and last byte (inclusive) of every context piece: ragged [batch, (n)].

    SentencePiece here; WordPiece in `_wordpiece_context_pieces`.

    Within a word, pieces lie on the normalised word; each raw character is normalised on its
    own (as `tokenization.offsets` does) to learn which normalised bytes it became, and a piece
    spans the raw characters its bytes came from, plus the dropped ones (combining marks)
    before the next piece. Where that per-character view disagrees with the whole word's
    normalisation, its pieces span the whole word.
    """
    if not self.tokenizer.is_spm:
      return self._wordpiece_context_pieces(context)
    words, begin, end = tf_text.regex_split_with_offsets(context, self._space, "")
    flat_words = words.flat_values
    n_words = tf.shape(flat_words, out_type=tf.int64)[0]
    ids = self.tokenizer.tokenize(flat_words)  # [words, (pieces)]
    word_of_piece = ids.value_rowids()
    piece_len = tf.gather(self._piece_bytes, tf.cast(ids.flat_values, tf.int64))
    normalized_words = self.tokenizer.preprocess_text(flat_words)
    normalized = tf.cast(tf.strings.length(normalized_words), tf.int64)
    # SentencePiece turns each run of characters it does not know into one <unk>: the k-th
    # <unk> of a word covers the word's k-th run of unknown characters.
    norm_chars = tf.strings.unicode_split(normalized_words, "UTF-8")
    unknown = tf.equal(self._known_chars.lookup(norm_chars.flat_values), 0)
    previous = tf.concat([[False], unknown[:-1]], 0)
    is_row_start = tf.scatter_nd(tf.expand_dims(norm_chars.row_starts(), 1),
                                 tf.ones_like(norm_chars.row_starts(), tf.bool),
                                 tf.shape(unknown, out_type=tf.int64))
    run_start = unknown & (is_row_start | ~previous)
    run_id = tf.math.cumsum(tf.cast(run_start, tf.int64)) - 1
    n_runs = tf.reduce_sum(tf.cast(run_start, tf.int64))
    char_bytes = tf.cast(tf.strings.length(norm_chars.flat_values), tf.int64)
    run_bytes = tf.math.unsorted_segment_sum(tf.where(unknown, char_bytes, 0),
                                             tf.where(unknown, run_id, n_runs), n_runs + 1)
    runs_in_word = tf.math.unsorted_segment_sum(tf.cast(run_start, tf.int64),
                                                norm_chars.value_rowids(), n_words)
    first_run = tf.math.cumsum(runs_in_word, exclusive=True)
    is_unk = tf.cast(piece_len < 0, tf.int64)
    unk_rank = tf.math.cumsum(is_unk, exclusive=True)
    unk_rank -= tf.gather(tf.concat([unk_rank, [0]], 0), tf.gather(ids.row_starts(),
                                                                   word_of_piece))
    n_unknown = tf.math.unsorted_segment_sum(is_unk, word_of_piece, n_words)
    run_of_piece = tf.minimum(tf.gather(first_run, word_of_piece) + unk_rank, n_runs)
    length = tf.where(piece_len < 0, tf.gather(run_bytes, run_of_piece), piece_len)
    consistent = (tf.equal(n_unknown, runs_in_word)
                  & tf.equal(tf.math.unsorted_segment_sum(length, word_of_piece, n_words),
                             normalized))
    piece_start = tf.math.cumsum(length, exclusive=True)  # in the normalised word
    piece_start -= tf.gather(piece_start, tf.gather(ids.row_starts(), word_of_piece))
    piece_end = piece_start + length

    chars = tf.strings.unicode_split(flat_words, "UTF-8")  # [words, (chars)]
    char_raw = tf.cast(tf.strings.length(chars.flat_values), tf.int64)
    char_norm = tf.cast(tf.strings.length(self.tokenizer.preprocess_text(chars.flat_values)),
                        tf.int64)
    consistent &= tf.equal(tf.math.unsorted_segment_sum(char_norm, chars.value_rowids(),
                                                        n_words), normalized)
    return _piece_byte_spans(words, ids, chars, char_raw, char_norm, word_of_piece, begin, end,
                             consistent, piece_start, piece_end, length)

  def _wordpiece_context_pieces(self, context):
    """`_context_pieces` for WordPiece: the pieces of each basic word lie one after another
    on the word's normalised characters; each raw character counts the characters it
    normalises to alone (0 when dropped: a dropped one joins the piece before it). A word
    with an [UNK], or whose pieces do not add up to its characters, has every piece span it.
    """
    # regex_split_with_offsets stops at a NUL byte; U+0001 is as long and as dropped.
    context = tf.strings.regex_replace(context, r"\x00", "\x01")
    words, begin, end = tf_text.regex_split_with_offsets(context, self._word_split,
                                                         self._word_keep)
    flat_words = words.flat_values
    n_words = tf.shape(flat_words, out_type=tf.int64)[0]
    ids = self.tokenizer.tokenize(flat_words)  # [words, (pieces)]
    word_of_piece = ids.value_rowids()
    length = tf.gather(self._piece_chars, tf.cast(ids.flat_values, tf.int64))
    codepoints = tf.strings.unicode_decode(flat_words, "UTF-8")  # [words, (chars)]
    cp = codepoints.flat_values
    run = tf.searchsorted(self._char_run_starts, cp, side="right") - 1
    char_norm = tf.gather(self._char_run_lengths, run)
    char_raw = tf.cast(1 + tf.cast(cp >= 0x80, tf.int32) + tf.cast(cp >= 0x800, tf.int32)
                       + tf.cast(cp >= 0x10000, tf.int32), tf.int64)  # utf-8 bytes
    char_word = codepoints.value_rowids()
    normalized = tf.math.unsorted_segment_sum(char_norm, char_word, n_words)
    consistent = (tf.equal(tf.math.unsorted_segment_sum(tf.cast(length < 0, tf.int64),
                                                        word_of_piece, n_words), 0)
                  & tf.equal(tf.math.unsorted_segment_sum(length, word_of_piece, n_words),
                             normalized))
    length = tf.maximum(length, 0)
    piece_start = tf.math.cumsum(length, exclusive=True)  # in the normalised word
    piece_start -= tf.gather(piece_start, tf.gather(ids.row_starts(), word_of_piece))
    piece_end = piece_start + length

    return _piece_byte_spans(words, ids, codepoints, char_raw, char_norm, word_of_piece, begin,
                             end, consistent, piece_start, piece_end, length)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="context")])
  def context_pieces(self, context):
    """Ids of each context's pieces and the bytes they cover (first, last): ragged
    [batch, (n)] each. Not a signature; for inspecting the alignment after loading."""
    return self._context_pieces(valid_utf8(context))

  # --- the serving function ------------------------------------------------------------------
  @requests.signature(question="string [batch]", context="string [batch]")
  def __call__(self, question, context):
    question, context = requests.checked(
        (question, context), requests.same_rows(question=question, context=context))
    return self._answer(question, context)

  @requests.signature(examples="string [batch]")
  def serve_examples(self, examples):
    return self._answer(**parse_examples(examples, {"question": 1, "context": 1}))

  def _answer(self, question, context):
    """The answers to `question`s about `context`s (string [batch] each, as many rows)."""
    seq = self.max_seq_length
    context = valid_utf8(context)
    batch = tf.shape(context, out_type=tf.int64)[0]
    query = self.tokenizer.tokenize(question)[:, :self.max_query_length]
    doc, first_byte, last_byte = self._context_pieces(context)

    # Windows, as squad_data.doc_spans.
    n = doc.row_lengths()
    room = seq - query.row_lengths() - 3
    stride = tf.minimum(room, self.doc_stride)
    count = tf.where(n > 0, 1 + (tf.maximum(n - room, 0) + stride - 1) // stride, 0)
    window_index = tf.ragged.range(count)
    example = window_index.value_rowids()  # example of each window
    k = window_index.flat_values
    w_start = k * tf.gather(stride, example)
    w_len = tf.minimum(tf.gather(room, example), tf.gather(n, example) - w_start)
    doc_base = tf.gather(doc.row_starts(), example)
    windows = tf.shape(example, out_type=tf.int64)[0]
    tokens = tf.RaggedTensor.from_row_lengths(
        gather_runs(doc.flat_values, doc_base + w_start, w_len), w_len, validate=False)
    q = tf.gather(query, example)
    doc_offset = q.row_lengths() + 2
    cls_col = _column(self.tokenizer.cls_id, windows)
    sep_col = _column(self.tokenizer.sep_id, windows)
    word_ids = tf.concat([cls_col, q, sep_col, tokens, sep_col], axis=1)
    type_ids = tf.concat([tf.zeros_like(cls_col), tf.zeros_like(q), tf.zeros_like(sep_col),
                          tf.ones_like(tokens), tf.ones_like(sep_col)], axis=1)
    p_mask = tf.concat([tf.zeros_like(cls_col), tf.ones_like(q), tf.ones_like(sep_col),
                        tf.zeros_like(tokens), tf.ones_like(sep_col)], axis=1)
    shape = [None, seq]
    inputs = {"input_word_ids": word_ids.to_tensor(0, shape=shape),
              "input_mask": tf.ones_like(word_ids).to_tensor(0, shape=shape),
              "input_type_ids": type_ids.to_tensor(0, shape=shape)}
    if self.version_2:
      inputs["p_mask"] = p_mask.to_tensor(1, shape=shape)
    outputs = self.model(inputs, training=False)

    # Which window gives each context piece its most context (first window on ties).
    longest = tf.reduce_max(tf.concat([n, [0]], 0))
    i = tf.range(longest)[None, :] - w_start[:, None]  # [windows, longest]
    inside = (i >= 0) & (i < w_len[:, None])
    score = (tf.cast(tf.minimum(i, w_len[:, None] - 1 - i), tf.float32)
             + 0.01 * tf.cast(w_len[:, None], tf.float32))
    score = tf.where(inside, score, _NEG_INF)
    dense = tf.RaggedTensor.from_value_rowids(score, example, nrows=batch).to_tensor(_NEG_INF)
    best_window = _argmax_over_windows(dense)  # [batch, longest]

    position = tf.range(seq, dtype=tf.int64)[None, :]
    in_doc = (position >= doc_offset[:, None]) & (position < (doc_offset + w_len)[:, None])
    piece = tf.clip_by_value(w_start[:, None] + position - doc_offset[:, None], 0,
                             tf.maximum(longest - 1, 0))
    best_of_piece = tf.gather(tf.gather(best_window, example), piece, batch_dims=1)
    max_context = in_doc & tf.equal(best_of_piece, k[:, None])

    if self.version_2:
      span_score, start, end = self._best_v2(outputs, in_doc, max_context)
    else:
      span_score, start, end = self._best_v1(outputs, in_doc, max_context)

    # The best window of each example, then the answer's bytes and characters.
    per_example = tf.RaggedTensor.from_value_rowids(span_score, example, nrows=batch)
    has_window = count > 0
    best_k = _argmax_over_windows(per_example.to_tensor(_NEG_INF))
    best_k = tf.where(has_window, best_k, 0)
    chosen = tf.minimum(window_index.row_starts() + best_k, tf.maximum(windows - 1, 0))
    score = tf.where(has_window, tf.gather(tf.concat([span_score, [_NEG_INF]], 0),
                                           tf.where(has_window, chosen, windows)), _NEG_INF)
    found = tf.math.is_finite(score)
    chosen_start = tf.gather(tf.concat([start, [0]], 0), tf.where(found, chosen, windows))
    chosen_end = tf.gather(tf.concat([end, [0]], 0), tf.where(found, chosen, windows))
    base = tf.gather(tf.concat([doc_base + w_start - doc_offset, [0]], 0),
                     tf.where(found, chosen, windows))
    flat_first = tf.concat([first_byte.flat_values, [0]], 0)
    flat_last = tf.concat([last_byte.flat_values, [0]], 0)
    none = tf.shape(first_byte.flat_values, out_type=tf.int64)[0]
    begin = tf.gather(flat_first, tf.where(found, base + chosen_start, none))
    finish = tf.gather(flat_last, tf.where(found, base + chosen_end, none))
    raw = tf.strings.substr(context, begin, tf.maximum(finish - begin + 1, 0))
    lead = tf.strings.length(raw) - tf.strings.length(
        tf.strings.regex_replace(raw, "^" + self._space, ""))
    text = tf.strings.regex_replace(tf.strings.regex_replace(raw, "^" + self._space, ""),
                                    self._space + "$", "")
    begin = begin + tf.cast(lead, tf.int64)
    answer = tf.where(found, text, "")
    outputs_ = {"score": score}
    if self.version_2:
      null_score = tf.math.unsorted_segment_min(outputs["cls_logits"], example, batch)
      null_score = tf.where(has_window, null_score, 1e6)
      outputs_["null_score"] = null_score
      if self.null_score_diff_threshold is not None:
        answer = tf.where(null_score >= self.null_score_diff_threshold, "", answer)
    answer = tf.where(has_window, answer, "")
    start_char = tf.strings.length(tf.strings.substr(context, tf.zeros_like(begin), begin),
                                   unit="UTF8_CHAR")
    end_char = start_char + tf.strings.length(answer, unit="UTF8_CHAR")
    empty = tf.equal(tf.strings.length(answer), 0)
    outputs_.update(answer=answer, start=tf.where(empty, -1, start_char),
                    end=tf.where(empty, -1, end_char))
    return outputs_

  def _best_v1(self, outputs, in_doc, max_context):
    """Best (score, start, end) of each window from v1 logits [windows, seq]."""
    start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]
    top = min(self.n_best_size, self.max_seq_length)
    in_top_start = start_logits >= tf.math.top_k(start_logits, top).values[:, -1:]
    in_top_end = end_logits >= tf.math.top_k(end_logits, top).values[:, -1:]
    can_start = in_top_start & max_context
    can_end = in_top_end & in_doc
    seq, span = self.max_seq_length, self.max_answer_length
    end = tf.range(seq, dtype=tf.int64)[:, None] + tf.range(span, dtype=tf.int64)[None, :]
    valid_end = end < seq  # [seq, span]
    end = tf.minimum(end, seq - 1)
    end_ok = tf.gather(can_end, end, axis=1) & valid_end[None]  # [windows, seq, span]
    ok = can_start[:, :, None] & end_ok
    pair = start_logits[:, :, None] + tf.gather(end_logits, end, axis=1)
    pair = tf.reshape(tf.where(ok, pair, _NEG_INF), [-1, seq * span])
    best = tf.argmax(pair, axis=1)
    return (tf.reduce_max(pair, axis=1), best // span,
            tf.gather(tf.reshape(end, [-1]), best))

  def _best_v2(self, outputs, in_doc, max_context):
    """Best (score, start, end) of each window from the v2 beam."""
    start_index = tf.cast(outputs["start_top_index"], tf.int64)  # [windows, k]
    end_index = tf.cast(outputs["end_top_index"], tf.int64)  # [windows, k * k_end]
    top_k = tf.shape(start_index, out_type=tf.int64)[1]
    end_k = tf.shape(end_index, out_type=tf.int64)[1] // top_k
    start = tf.repeat(start_index, end_k, axis=1)
    start_score = tf.repeat(outputs["start_top_log_probs"], end_k, axis=1)
    ok = (tf.gather(max_context, start, batch_dims=1) & tf.gather(in_doc, end_index, batch_dims=1)
          & (end_index >= start) & (end_index - start + 1 <= self.max_answer_length))
    pair = tf.where(ok, start_score + outputs["end_top_log_probs"], _NEG_INF)
    best = tf.argmax(pair, axis=1)
    return (tf.reduce_max(pair, axis=1), tf.gather(start, best, batch_dims=1),
            tf.gather(end_index, best, batch_dims=1))


def export_squad(squad_model, export_dir, spm_model_file=None, do_lower_case=True,
                 max_seq_length=384, doc_stride=128, max_query_length=64, n_best_size=20,
                 max_answer_length=30, null_score_diff_threshold=None, vocab_file=None):
  """Writes the serving SavedModel (atomically) and returns its path. SentencePiece with
  `spm_model_file`, else WordPiece with `vocab_file`."""
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  reference = FullTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                            do_lower_case=do_lower_case)
  module = SquadServing(squad_model, tokenizer, reference, max_seq_length, doc_stride,
                        max_query_length, n_best_size, max_answer_length,
                        null_score_diff_threshold)
  return save_atomically(module, export_dir, {
      "serving_default": module.__call__.get_concrete_function(),
      "serve_examples": module.serve_examples.get_concrete_function()})


def _piece_byte_spans(words, ids, chars, char_raw, char_norm, word_of_piece, begin, end,
                      consistent, piece_start, piece_end, length):
  """(ids, first byte, last byte) of each piece in its context, ragged [batch, (n)] each.

  `chars` is ragged [words, (characters)]; `char_raw` / `char_norm` are each character's raw
  bytes and normalised length; `piece_start` / `piece_end` / `length` place each piece in its
  word's normalised text. A word whose pieces do not add up (`consistent` False) has every
  piece span the whole word. Shared by the SentencePiece and WordPiece alignments.
  """
  norm_end = chars.with_flat_values(tf.math.cumsum(char_norm))
  norm_end -= tf.expand_dims(tf.gather(tf.concat([[0], norm_end.flat_values], 0),
                                       chars.row_starts()), 1)
  raw_start = chars.with_flat_values(tf.math.cumsum(char_raw, exclusive=True))
  raw_start -= tf.expand_dims(tf.gather(raw_start.flat_values, chars.row_starts()), 1)
  raw_end = raw_start + chars.with_flat_values(char_raw)
  table = norm_end.to_tensor(tf.int64.max)

  def char_holding(position):  # per word: how many characters end at or before it
    found = tf.searchsorted(table, ids.with_flat_values(position).to_tensor(0), side="right",
                            out_type=tf.int64)
    return tf.RaggedTensor.from_tensor(found, lengths=ids.row_lengths()).flat_values
  first_char = char_holding(piece_start)
  # The character holding the piece's last position, or the last of the dropped characters
  # (normalised length 0) right after it when the piece ends where that character ends.
  last_char = tf.maximum(char_holding(piece_end - 1), char_holding(piece_end) - 1)
  n_chars = tf.gather(chars.row_lengths(), word_of_piece)
  first_char = tf.clip_by_value(first_char, 0, tf.maximum(n_chars - 1, 0))
  last_char = tf.clip_by_value(last_char, first_char, tf.maximum(n_chars - 1, 0))
  char_base = tf.gather(chars.row_starts(), word_of_piece)
  flat_raw_start = tf.concat([raw_start.flat_values, [0]], 0)
  flat_raw_end = tf.concat([raw_end.flat_values, [0]], 0)
  word_begin = tf.gather(begin.flat_values, word_of_piece)
  word_end = tf.gather(end.flat_values, word_of_piece)
  exact = tf.gather(consistent, word_of_piece)
  first = tf.where(exact, word_begin + tf.gather(flat_raw_start, char_base + first_char),
                   word_begin)
  last = tf.where(exact, word_begin + tf.gather(flat_raw_end, char_base + last_char) - 1,
                  word_end - 1)
  # A zero-width piece ("▁" before a character SentencePiece cannot join) covers nothing.
  last = tf.where(exact & tf.equal(length, 0), first - 1, last)

  def per_example(values):
    return tf.RaggedTensor.from_nested_row_splits(
        values, [words.row_splits, ids.row_splits], validate=False).merge_dims(1, 2)
  return per_example(ids.flat_values), per_example(first), per_example(last)
