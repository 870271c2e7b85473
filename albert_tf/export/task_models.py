"""Raw-text-in SavedModels for serving: fill-mask, sentence (pair) classification and
sentence embeddings.

Both tokenize in-graph with `InGraphTokenizer` (ids equal to the Python tokenizer's), so TF
Serving can be sent plain strings: `{"instances": [{"text": "the [MASK] sat on the mat"}]}`.
"""

import tensorflow as tf

from albert_tf.data.batch_length import trim_batch
from albert_tf.export import requests
from albert_tf.export.examples import parse_examples
from albert_tf.export.saving import save_atomically
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.tokenization import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer, pack_inputs

MASK_TOKEN = "[MASK]"


def encode_with_masks(tokenizer, texts, mask_id):
  """Ids of texts in which the literal "[MASK]" stands for the mask token: the text between
  masks is tokenized piece by piece (the same rule `FullTokenizer` users apply in Python)."""
  parts = tf.strings.split(texts, MASK_TOKEN)  # [batch, (parts)]
  ids = tokenizer.tokenize(parts.flat_values)  # [parts, (tokens)]
  # Every part but the last of its text is followed by one [MASK].
  is_last = tf.scatter_nd(tf.expand_dims(parts.row_limits() - 1, 1),
                          tf.ones_like(parts.row_limits(), tf.bool),
                          tf.shape(parts.flat_values, out_type=tf.int64))
  masks = tf.RaggedTensor.from_row_lengths(
      tf.fill([tf.reduce_sum(tf.cast(~is_last, tf.int32))], tf.cast(mask_id, ids.dtype)),
      tf.cast(~is_last, tf.int64))
  with_masks = tf.concat([ids, masks], axis=1)
  return tf.RaggedTensor.from_row_splits(with_masks, parts.row_splits).merge_dims(1, 2)


class FillMaskModel(tf.Module):
  """Text with [MASK]s -> the top-k tokens and probabilities at each mask (up to max_masks).

  Outputs, batch first: `masked_positions` int32 [batch, max_masks] (-1 after a text's last
  mask), `top_ids` int32 [batch, max_masks, k], `top_tokens` string [batch, max_masks, k],
  `top_scores` float32 [batch, max_masks, k] (softmax probabilities).

  A text with no [MASK] (say one written with "<mask>"), more than max_masks of them, or one
  past the max_seq_length - 2 tokens read is an INVALID_ARGUMENT naming its row: each would
  otherwise lose masks without a word.
  """

  def __init__(self, pretrainer, tokenizer, mask_id, vocab_pieces, max_seq_length=128, top_k=5,
               max_masks=8):
    super().__init__(name="fill_mask")
    self.encoder = pretrainer.encoder
    self.masked_lm = pretrainer.masked_lm
    self.tokenizer = tokenizer
    self.mask_id = int(mask_id)
    self.max_seq_length, self.top_k, self.max_masks = max_seq_length, top_k, max_masks
    self.vocab = tf.constant(list(vocab_pieces))

  @requests.signature(text="string [batch]")
  def __call__(self, text):
    ids = encode_with_masks(self.tokenizer, text, self.mask_id)
    # At the request's longest text (`trim_padding`): every [MASK] read is a real token.
    inputs = trim_padding(pack_inputs(ids, max_seq_length=self.max_seq_length,
                                      cls_id=self.tokenizer.cls_id, sep_id=self.tokenizer.sep_id))
    is_mask = tf.equal(inputs["input_word_ids"], self.mask_id)
    masks = tf.reduce_sum(tf.cast(tf.equal(ids, self.mask_id), tf.int32), axis=1)
    read = tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1)
    rules = [
        requests.every_row(masks > 0, "text row {} has no [MASK] to fill (write the literal "
                           "[MASK] where a token is wanted)"),
        requests.every_row(tf.equal(read, masks), "text row {} has a [MASK] after the "
                           f"{self.max_seq_length - 2} tokens this model reads "
                           "(max_seq_length)"),
        requests.every_row(masks <= self.max_masks, "text row {} has {} [MASK]s; this model "
                           f"fills at most {self.max_masks} (max_masks)", masks)]
    inputs, is_mask = requests.checked((inputs, is_mask), rules)
    positions = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask)
    positions = positions.to_tensor(default_value=-1,
                                    shape=[None, self.max_masks])
    outputs = self.encoder(inputs, training=False)
    logits = self.masked_lm(outputs["sequence_output"], tf.maximum(positions, 0))
    scores, top_ids = tf.math.top_k(tf.nn.softmax(tf.cast(logits, tf.float32)), self.top_k)
    valid = tf.expand_dims(positions >= 0, -1)
    return {"masked_positions": positions,
            "top_ids": tf.where(valid, top_ids, -1),
            "top_tokens": tf.where(valid, tf.gather(self.vocab, top_ids), ""),
            "top_scores": tf.where(valid, scores, 0.0)}


def trim_padding(inputs):
  """The packed `inputs` (int32 `[batch, seq]`, or RACE's `[batch, choices, seq]`, each) cut to
  the request's longest row: a request of short texts is computed at their length, not at
  `max_seq_length`. For a per-example or per-real-token output the result is the same:
  padded positions are masked keys, whose attention weights are exactly zero (exp of about
  -10000), and [CLS] sits at position 0 either way; only the order of float32 sums may differ.
  Unlike training batches (`data.batch_length`), the length is not rounded up: a serving
  signature runs without XLA, and every length shares its one graph."""
  mask = inputs["input_mask"]
  return trim_batch({name: inputs[name] for name in INPUT_NAMES}, INPUT_NAMES,
                    tf.shape(mask)[-1], multiple=1)


def sentence_embeddings(outputs, input_mask):
  """A sentence's vectors from the encoder's `outputs` on inputs of `input_mask` (int32
  [batch, seq]), float32 [batch, hidden] each: `mean_embedding`, the mean of sequence_output
  over the real tokens ([CLS] and [SEP] included, padding not), and `pooled_output`; each also
  L2-normalised (`..._normalized`: unit length, so a dot product is the cosine similarity)."""
  mask = tf.cast(input_mask, tf.float32)[:, :, None]
  sequence = tf.cast(outputs["sequence_output"], tf.float32)
  mean = tf.reduce_sum(sequence * mask, 1) / tf.reduce_sum(mask, 1)
  pooled = tf.cast(outputs["pooled_output"], tf.float32)
  return {"mean_embedding": mean, "pooled_output": pooled,
          "mean_embedding_normalized": tf.math.l2_normalize(mean, -1),
          "pooled_output_normalized": tf.math.l2_normalize(pooled, -1)}


def embed_text(encoder, tokenizer, text, max_seq_length):
  """`sentence_embeddings` of `text` (string [batch]), each packed `[CLS] text [SEP]` as
  fine-tuning packs one segment (cut to max_seq_length; an empty text is [CLS] [SEP]) and
  computed at the batch's longest row (`trim_padding`: the same vectors)."""
  inputs = trim_padding(pack_inputs(tokenizer.tokenize(text), max_seq_length=max_seq_length,
                                    cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id))
  return sentence_embeddings(encoder(inputs, training=False), inputs["input_mask"])


class EmbeddingModel(tf.Module):
  """Raw text -> sentence vectors for similarity search: `serving_default(text)` returns
  `sentence_embeddings`' four outputs. export_savedmodel.py's bundle writes it as `embed/`."""

  def __init__(self, encoder, tokenizer, max_seq_length=128):
    super().__init__(name="embed")
    # The variables, not the Keras model: saving a tracked Keras model traces all its call
    # functions again, for no use here (race_serving.py measured it).
    self._encoder = lambda inputs, training: encoder(inputs, training=training)
    self.encoder_variables = list(encoder.variables)
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length

  @requests.signature(text="string [batch]")
  def __call__(self, text):
    return embed_text(self._encoder, self.tokenizer, text, self.max_seq_length)


class ClassifierServing(tf.Module):
  """Raw text (one or two fields) -> label ids, label names and probabilities (or a score).
  Each request is packed to its longest text (`trim_padding`), at most `max_seq_length`.

  A request whose text_a and text_b differ in rows, or with a text_a of no tokens (empty or
  whitespace), is an INVALID_ARGUMENT naming the input and row (an empty text_b is one
  segment, as in fine-tuning); texts past max_seq_length are cut as fine-tuning cuts them.
  `encoded` checks its ids as the encoder SavedModel does.

  Signatures: `serving_default(text_a)` and `text_pair(text_a, text_b)`; classification
  returns `label_ids` int32 [batch], `label_names` string [batch], `probabilities` float32
  [batch, num_labels]; regression returns `scores` float32 [batch]. `serve_examples(examples)`
  answers the same from serialized tf.train.Examples with a text_a and an optional text_b
  bytes feature (export/examples.py); an Example without text_b is text_a alone, as
  serving_default reads it. `encoded(input_word_ids, input_mask, input_type_ids)` takes token
  ids and returns `logits` (a distillation teacher's). `embed(text)` gives the fine-tuned
  encoder's `sentence_embeddings` of one text.
  """

  def __init__(self, classifier, tokenizer, labels=None, max_seq_length=128):
    super().__init__(name="classifier")
    self.classifier = classifier
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length
    self.labels = None if labels is None else tf.constant([str(l) for l in labels])

  def _predict(self, inputs):
    logits = self.classifier(trim_padding(inputs), training=False)
    if self.labels is None:
      return {"scores": logits}
    label_ids = tf.argmax(logits, -1, output_type=tf.int32)
    return {"label_ids": label_ids, "label_names": tf.gather(self.labels, label_ids),
            "probabilities": tf.nn.softmax(logits)}

  def _pack(self, ids_a, ids_b=None):
    ids_a = requests.checked(ids_a, [requests.has_tokens("text_a", ids_a)])
    return pack_inputs(ids_a, ids_b, max_seq_length=self.max_seq_length,
                       cls_id=self.tokenizer.cls_id, sep_id=self.tokenizer.sep_id)

  def _classify(self, text_a, text_b=None):
    ids_b = None if text_b is None else self.tokenizer.tokenize(text_b)
    return self._predict(self._pack(self.tokenizer.tokenize(text_a), ids_b))

  @requests.signature(text_a="string [batch]")
  def __call__(self, text_a):
    return self._classify(text_a)

  @requests.signature(**{name: "int32 [batch, seq]" for name in INPUT_NAMES})
  def encoded(self, input_word_ids, input_mask, input_type_ids):
    inputs = dict(zip(INPUT_NAMES, (input_word_ids, input_mask, input_type_ids)))
    inputs = requests.checked(inputs, requests.encoder_inputs(inputs, self.classifier.config))
    return {"logits": tf.cast(self.classifier(inputs, training=False), tf.float32)}

  @requests.signature(text_a="string [batch]", text_b="string [batch]")
  def text_pair(self, text_a, text_b):
    text_a, text_b = requests.checked((text_a, text_b),
                                      requests.same_rows(text_a=text_a, text_b=text_b))
    return self._classify(text_a, text_b)

  @requests.signature(examples="string [batch]")
  def serve_examples(self, examples):
    # An Example without text_b is text_a alone: text_pair packs an empty text_b as one
    # segment, so this answers as serving_default(text_a) does.
    return self._classify(**parse_examples(examples, {"text_a": 1}, optional=["text_b"]))

  @requests.signature(text="string [batch]")
  def embed(self, text):
    return embed_text(self.classifier.encoder, self.tokenizer, text, self.max_seq_length)


def export_fill_mask(pretrainer, export_dir, spm_model_file=None, vocab_file=None,
                     do_lower_case=True, max_seq_length=128, top_k=5, max_masks=8):
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  reference = FullTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                            do_lower_case=do_lower_case)
  module = FillMaskModel(pretrainer, tokenizer, reference.mask_id,
                         reference.convert_ids_to_tokens(range(reference.vocab_size)),
                         max_seq_length, top_k, max_masks)
  return save_atomically(module, export_dir,
                         {"serving_default": module.__call__.get_concrete_function()})


def export_classifier(classifier, export_dir, labels=None, spm_model_file=None,
                      vocab_file=None, do_lower_case=True, max_seq_length=128):
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  module = ClassifierServing(classifier, tokenizer, labels, max_seq_length)
  return save_atomically(module, export_dir, {
      "serving_default": module.__call__.get_concrete_function(),
      "text_pair": module.text_pair.get_concrete_function(),
      "serve_examples": module.serve_examples.get_concrete_function(),
      "encoded": module.encoded.get_concrete_function(),
      "embed": module.embed.get_concrete_function()})


def export_embedding(encoder, export_dir, spm_model_file=None, vocab_file=None,
                     do_lower_case=True, max_seq_length=128):
  """Writes the raw-text `EmbeddingModel` of `encoder` (an AlbertEncoder) atomically; returns
  `export_dir`."""
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  module = EmbeddingModel(encoder, tokenizer, max_seq_length)
  return save_atomically(module, export_dir,
                         {"serving_default": module.__call__.get_concrete_function()})
