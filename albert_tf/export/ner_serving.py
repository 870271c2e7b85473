"""An NER SavedModel for serving: raw text in, entities with character offsets out.

    tagger = tf.saved_model.load(path).signatures["serving_default"]
    out = tagger(text=tf.constant(["EU rejects German call to boycott British lamb ."]))
    # out["num_entities"]  [1]: 3
    # out["entity_text"]   [[b"EU", b"German", b"British"]]
    # out["entity_type"]   [[b"ORG", b"MISC", b"MISC"]]
    # out["start"], ["end"] [[0, 11, 34]], [[2, 17, 41]]   characters, end exclusive
    # out["score"]         [[0.98, 0.91, 0.95]]

Every output is padded to the batch's largest entity count: `num_entities` [batch] says how
many of a row are real; the padding is "" for the strings, -1 for `start` / `end` and 0 for
`score` (a signature cannot return a ragged tensor, and a padded one reads the same from TF
Serving's REST and gRPC clients). Entities come in the order of the text.

What `run_ner.py --do_predict` does happens in the graph, so the two agree on the same text:
- the text is cut into the words the model was trained on (`word_split`): at whitespace
  (`whitespace`: CoNLL-style English, text = the words joined by spaces), or one word per
  character, spaces included (`characters`: CLUENER, and Chinese one-character-per-line data);
- each word is tokenized alone (a word with no piece, a lone control character or a space,
  becomes one [UNK]) and tagged at its first piece;
- a text longer than `max_seq_length - 2` pieces is cut into windows of whole words every
  `doc_stride` pieces (data/ner_features.window_bounds) and each word takes its tag from the
  window where it has the most context (merge_windows);
- the tags are read as conlleval reads them (an I-X that continues nothing opens an entity;
  a CRF head never decodes one), and each entity spans the raw characters from its first
  word's first character to its last word's last, so `text[start:end] == entity_text`.

`score` is the mean, over the entity's words, of the softmax of the head's emissions at the
decoded tag (with a CRF this is the emission softmax, not the CRF's marginal). An empty or
blank text has no entities, as `--do_predict` gives it; invalid UTF-8 is read with U+FFFD in
place of each bad sequence (offsets count characters of that repaired text). The one malformed
request (export/requests.py) is a text holding a NUL byte under the `whitespace` split: the
split cannot read past one (tensorflow_text's regex_split_with_offsets stops there), so the
words after it would silently go untagged; it is an INVALID_ARGUMENT naming the row.

`serve_examples(examples)` answers the same from serialized tf.train.Examples holding a text
bytes feature each (export/examples.py), for batch inference pipelines.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data.ner import OUTSIDE, check_tag_set
from albert_tf.data.ner_features import WORD_SPLITS
from albert_tf.export import requests
from albert_tf.export.examples import parse_examples
from albert_tf.export.saving import save_atomically
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.token_classifier import WORD_POSITIONS
from albert_tf.tokenization.in_graph import InGraphTokenizer, contains, valid_utf8, whitespace_class

_NUL = "\x00"


def entity_types(labels):
  """The entity types of BIO `labels`, in their first appearance's order."""
  types = []
  for label in labels:
    if label != OUTSIDE and label[2:] not in types:
      types.append(label[2:])
  return types


class NerServing(tf.Module):
  """The serving module; see the module docstring for what its signature computes.

  Args:
    model: an AlbertTokenClassifier.
    tokenizer: an InGraphTokenizer with the vocabulary the model was trained with.
    max_seq_length, doc_stride: the windows of `run_ner.py` (pieces).
    word_split: one of WORD_SPLITS.
  """

  def __init__(self, model, tokenizer, max_seq_length=128, doc_stride=64,
               word_split="whitespace"):
    super().__init__(name="ner")
    if word_split not in WORD_SPLITS:
      raise ValueError(f"word_split={word_split!r}: one of {', '.join(WORD_SPLITS)}")
    self.model, self.tokenizer = model, tokenizer
    self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
    self.word_split = word_split
    labels = list(model.labels)
    types = entity_types(labels)
    # Per tag id: its entity type's index (-1 for O) and whether it is a B- tag.
    self._type_of_tag = tf.constant([-1 if t == OUTSIDE else types.index(t[2:])
                                     for t in labels], tf.int64)
    self._opens = tf.constant([t.startswith("B-") for t in labels])
    self._types = tf.constant(types + [""], tf.string)
    self._space = whitespace_class() + "+"

  # --- the request and its words ------------------------------------------------------------
  def _rules(self, text):
    """The rules of a request (see the module docstring): none with the `characters` split."""
    if self.word_split != "whitespace":
      return []
    return [requests.every_row(
        tf.logical_not(contains(text, _NUL)),
        "text row {} holds a NUL byte (U+0000); this model splits text into words at "
        "whitespace and cannot read past one")]

  def _words(self, text):
    """Words ragged [batch, (words)] with their first byte and end byte in `text`."""
    if self.word_split == "whitespace":
      return tf_text.regex_split_with_offsets(text, self._space, "")
    chars, begin = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
    words = tf.strings.unicode_encode(tf.expand_dims(chars, -1), "UTF-8")
    return words, begin, begin + tf.cast(tf.strings.length(words), tf.int64)

  def _word_pieces(self, flat_words):
    """Piece ids of each word alone, ragged [words, (pieces)]: [UNK] for a word with none."""
    ids = self.tokenizer.tokenize(flat_words)
    n = tf.cast(ids.row_lengths(), tf.int64)
    counts = tf.maximum(n, 1)
    index = tf.ragged.range(counts)
    word = index.value_rowids()
    source = tf.gather(tf.cast(ids.row_starts(), tf.int64), word) + index.flat_values
    values = tf.concat([ids.flat_values, [self.tokenizer.unk_id]], 0)
    total = tf.shape(ids.flat_values, out_type=tf.int64)[0]
    flat = tf.gather(values, tf.where(tf.gather(n, word) > 0, source, total))
    return tf.RaggedTensor.from_row_lengths(flat, counts, validate=False)

  def _windows(self, counts, word_rows, example_of_word):
    """(example, first word, end word) of every window, words as flat indices.

    `counts` [words]: pieces per word; `word_rows`: row splits of the words per example;
    `example_of_word` [words]: each word's example.
    As data/ner_features.window_bounds: a window takes words while their pieces fit
    `max_seq_length - 2` (at least one word), the next starts at the first word at least
    `doc_stride` pieces on (at most at this one's end), until a window reaches the last word.
    """
    room = self.max_seq_length - 2
    offsets = tf.concat([[0], tf.math.cumsum(counts)], 0)  # [words + 1], strictly rising
    n_words = tf.shape(counts, out_type=tf.int64)[0]
    limit = tf.gather(word_rows[1:], example_of_word)  # each word's example's end
    word = tf.range(n_words)
    base = offsets[:-1]
    fit = tf.searchsorted(offsets, base + room, side="right", out_type=tf.int64) - 1
    end_of = tf.clip_by_value(fit, word + 1, limit)
    ahead = tf.searchsorted(offsets, base + self.doc_stride, side="left", out_type=tf.int64)
    next_of = tf.clip_by_value(ahead, word + 1, end_of)

    starts = word_rows[:-1]
    active = word_rows[1:] > starts  # a text without words has no window
    last = tf.maximum(n_words - 1, 0)
    step = lambda values, at: tf.gather(tf.concat([values, [0]], 0), tf.minimum(at, n_words))

    def body(i, start, active, out_start, out_end, out_active):
      end = step(end_of, start)
      out_start, out_end = out_start.write(i, start), out_end.write(i, end)
      out_active = out_active.write(i, active)
      more = active & (end < step(limit, tf.minimum(start, last)))
      return i + 1, tf.where(more, step(next_of, start), start), more, out_start, out_end, \
          out_active

    arrays = [tf.TensorArray(dtype, size=0, dynamic_size=True)
              for dtype in (tf.int64, tf.int64, tf.bool)]
    _, _, _, out_start, out_end, out_active = tf.while_loop(
        # One round at least: a TensorArray of no rounds cannot be stacked.
        lambda i, start, active, *_: tf.equal(i, 0) | tf.reduce_any(active), body,
        [tf.constant(0), starts, active] + arrays)
    # [rounds, batch] -> [batch, rounds]: windows in example order, then window order.
    keep = tf.transpose(out_active.stack())
    where = tf.where(keep)
    pick = lambda array: tf.gather_nd(tf.transpose(array.stack()), where)
    return where[:, 0], pick(out_start), pick(out_end)

  # --- the serving function -----------------------------------------------------------------
  @requests.signature(text="string [batch]")
  def __call__(self, text):
    return self._entities(text)

  @requests.signature(examples="string [batch]")
  def serve_examples(self, examples):
    return self._entities(parse_examples(examples, {"text": 1})["text"])

  def _entities(self, text):
    """The entities of each `text` (string [batch]): the outputs the module docstring lists."""
    text = requests.checked(text, self._rules(text))
    room = self.max_seq_length - 2
    text = valid_utf8(text)
    batch = tf.shape(text, out_type=tf.int64)[0]
    words, first_byte, end_byte = self._words(text)
    word_rows = tf.cast(words.row_splits, tf.int64)
    pieces = self._word_pieces(words.flat_values)
    counts = pieces.row_lengths()
    offsets = tf.concat([[0], tf.math.cumsum(counts)], 0)
    example_of_word = tf.ragged.row_splits_to_segment_ids(word_rows)
    example, w_start, w_end = self._windows(counts, word_rows, example_of_word)

    # Pack each window: [CLS] its words' pieces (cut to the room) [SEP]; each word's first
    # piece position.
    piece_start = tf.gather(offsets, w_start)
    n_pieces = tf.minimum(tf.gather(offsets, w_end) - piece_start, room)
    window_pieces = tf.RaggedTensor.from_row_lengths(
        tf.gather(pieces.flat_values, tf.ragged.range(piece_start, piece_start + n_pieces)
                  .flat_values), n_pieces, validate=False)
    windows = tf.shape(example, out_type=tf.int64)[0]
    column = lambda value: tf.fill([windows, 1], tf.constant(value, tf.int32))
    ids = tf.concat([column(self.tokenizer.cls_id), tf.cast(window_pieces, tf.int32),
                     column(self.tokenizer.sep_id)], 1)
    window_words = tf.ragged.range(w_start, w_end)  # flat word indices
    positions = 1 + tf.gather(offsets, window_words) - tf.expand_dims(piece_start, 1)
    # Padded to the request's longest window, not to max_seq_length (at most that): padded
    # keys get exactly zero attention weight, so a short sentence's tags are those of the
    # full-width call up to the order of float32 sums, at a fraction of its cost.
    word_ids = ids.to_tensor(0)
    width = tf.shape(word_ids)[1]

    def padded_to_width(ragged):
      dense = ragged.to_tensor(0)
      return tf.pad(dense, [[0, 0], [0, width - tf.shape(dense)[1]]])
    inputs = {"input_word_ids": word_ids, "input_mask": tf.ones_like(ids).to_tensor(0),
              "input_type_ids": tf.zeros_like(ids).to_tensor(0),
              WORD_POSITIONS: padded_to_width(tf.cast(positions, tf.int32))}
    word_mask = padded_to_width(tf.ones_like(positions, tf.int32))
    emissions = self.model({k: inputs[k] for k in INPUT_NAMES + (WORD_POSITIONS,)},
                           training=False)
    tags = tf.cast(self.model.predict_tags(emissions, word_mask), tf.int64)
    probs = tf.gather(tf.nn.softmax(emissions), tags, batch_dims=2)

    # Each word's tag from the window where it has the most context (first on ties).
    k = tf.ragged.range(w_end - w_start)
    length = tf.gather(w_end - w_start, k.value_rowids())
    context = (tf.cast(tf.minimum(k.flat_values, length - 1 - k.flat_values), tf.float64)
               + 0.01 * tf.cast(length, tf.float64))
    flat_word = window_words.flat_values
    n_words = tf.shape(counts, out_type=tf.int64)[0]
    best = tf.math.unsorted_segment_max(context, flat_word, n_words)
    pair = tf.range(tf.shape(flat_word, out_type=tf.int64)[0])
    chosen = tf.math.unsorted_segment_min(
        tf.where(tf.equal(context, tf.gather(best, flat_word)), pair, tf.int64.max), flat_word,
        n_words)
    pair_index = tf.stack([k.value_rowids(), k.flat_values], 1)
    word_tag = tf.gather(tf.gather_nd(tags, pair_index), chosen)
    word_prob = tf.gather(tf.gather_nd(probs, pair_index), chosen)

    # Entities, read as conlleval reads tags.
    kind = tf.gather(self._type_of_tag, word_tag)
    first_word = tf.equal(tf.range(n_words), tf.gather(word_rows[:-1], example_of_word))
    before = tf.where(first_word, tf.constant(-1, tf.int64), tf.concat([[-1], kind[:-1]], 0))
    opens = (kind >= 0) & (tf.gather(self._opens, word_tag) | tf.not_equal(before, kind))
    entity = tf.math.cumsum(tf.cast(opens, tf.int64)) - 1
    n_entities = tf.reduce_sum(tf.cast(opens, tf.int64))
    inside = kind >= 0
    segment = tf.where(inside, entity, n_entities)  # O words go to a spare segment
    last_word = tf.math.unsorted_segment_max(tf.range(n_words), segment, n_entities + 1)[:-1]
    entity_first = tf.boolean_mask(tf.range(n_words), opens)
    score = tf.math.unsorted_segment_mean(word_prob, segment, n_entities + 1)[:-1]
    entity_example = tf.gather(example_of_word, entity_first)
    begin = tf.gather(first_byte.flat_values, entity_first)
    finish = tf.gather(end_byte.flat_values, last_word)
    source = tf.gather(text, entity_example)
    entity_text = tf.strings.substr(source, begin, finish - begin)
    start = tf.strings.length(tf.strings.substr(source, tf.zeros_like(begin), begin),
                              unit="UTF8_CHAR")
    end = start + tf.strings.length(entity_text, unit="UTF8_CHAR")

    def padded(values, default):
      return tf.RaggedTensor.from_value_rowids(values, entity_example, nrows=batch,
                                               validate=False).to_tensor(default)
    return {"entity_text": padded(entity_text, ""),
            "entity_type": padded(tf.gather(self._types, tf.gather(kind, entity_first)), ""),
            "start": padded(tf.cast(start, tf.int64), -1),
            "end": padded(tf.cast(end, tf.int64), -1),
            "score": padded(score, 0.0),
            "num_entities": tf.math.bincount(tf.cast(entity_example, tf.int32),
                                             minlength=tf.cast(batch, tf.int32),
                                             maxlength=tf.cast(batch, tf.int32),
                                             dtype=tf.int64)}


def export_ner(model, export_dir, spm_model_file=None, vocab_file=None, do_lower_case=True,
               max_seq_length=128, doc_stride=64, word_split="whitespace"):
  """Writes the raw-text NER SavedModel of `model` (an AlbertTokenClassifier) atomically and
  returns its path. SentencePiece with `spm_model_file`, else WordPiece with `vocab_file`.
  Labels that are not BIO tag names (LABEL_0 ..) are refused: no entity can be read from
  them."""
  check_tag_set(list(model.labels), f"the model exported to {export_dir}")
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  module = NerServing(model, tokenizer, max_seq_length, doc_stride, word_split)
  return save_atomically(module, export_dir, {
      "serving_default": module.__call__.get_concrete_function(),
      "serve_examples": module.serve_examples.get_concrete_function()})
