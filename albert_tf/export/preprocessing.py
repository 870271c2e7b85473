"""The preprocessing SavedModel: raw strings -> the encoder's three int32 inputs, and TF Hub's
text-preprocessor API (`tokenize`, `bert_pack_inputs`).

  save_preprocessing_model("/tmp/albert_preprocessing", spm_model_file="spiece.model")
  loaded = tf.saved_model.load("/tmp/albert_preprocessing")
  loaded.signatures["encode_pair"](text_a=tf.constant(["a premise"]),
                                   text_b=tf.constant(["a hypothesis"]))

Tokenization and packing are tokenization/in_graph.py's (`InGraphTokenizer`, `pack_inputs`:
the ids and packing of the Python tokenizer); this module saves them with signatures whose
requests are checked by export/requests.py.
"""

import tensorflow as tf

from albert_tf.export import requests
from albert_tf.export.saving import save_atomically
from albert_tf.tokenization.in_graph import InGraphTokenizer, pack_inputs


def bert_pack_inputs(segments, seq_length, cls_id, sep_id):
  """TF Hub's `bert_pack_inputs` on our packing rules: a list of one or two token-id
  RaggedTensors `[batch, (tokens)]` (or `[batch, (words), (pieces)]`, flattened) ->
  the three `[batch, seq_length]` inputs, exactly as fine-tuning packs them."""
  if not 1 <= len(segments) <= 2:
    raise ValueError(f"bert_pack_inputs takes 1 or 2 segments (ALBERT's fine-tuning packs "
                     f"pairs), got {len(segments)}")
  flat = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
  flat = requests.checked(flat, requests.same_rows(
      **{f"segment {i}": segment for i, segment in enumerate(flat)}))
  return pack_inputs(*flat, max_seq_length=seq_length, cls_id=cls_id, sep_id=sep_id)


class BertPackInputs(tf.Module):
  """`preprocessor.bert_pack_inputs(segments, seq_length=N)` of TF Hub's text preprocessor
  API, saved with the preprocessing model.

    tokenize = hub.KerasLayer(preprocessor.tokenize)
    pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=64))
    inputs = pack([tokenize(premises), tokenize(hypotheses)])

  `segments`: a list of one or two int32 RaggedTensors of token ids (ragged rank 1 or 2, as
  `tokenize` gives). `seq_length` defaults to the model's max_seq_length. Packing and
  truncation are fine-tuning's (`pack_inputs`).
  """

  def __init__(self, tokenizer, default_seq_length, name=None):
    super().__init__(name=name)
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id

    # A default that is a Python value, so the call works with or without seq_length.
    @tf.function
    def call(inputs, seq_length=default_seq_length):
      return bert_pack_inputs(list(inputs), seq_length, cls_id, sep_id)

    self.__call__ = call
    # The SavedModel keeps traced signatures only: one per segment count and ragged rank.
    for ragged_rank in (1, 2):
      for num_segments in (1, 2):
        spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32,
                                   ragged_rank=ragged_rank)
        call.get_concrete_function([spec] * num_segments,
                                   seq_length=tf.TensorSpec([], tf.int32))


class PreprocessingModel(tf.Module):
  """Strings -> the three int32 model inputs, with SavedModel signatures.

    model = PreprocessingModel(InGraphTokenizer(spm_model_file="spiece.model"), 128)
    model(tf.constant(["a sentence"]))["input_word_ids"]                # [1, 128]
    model.encode_pair(tf.constant(["a premise"]), tf.constant(["a hypothesis"]))
    model.bert_pack_inputs([model.tokenize(premises), model.tokenize(hypotheses)],
                           seq_length=64)

  `__call__(text_a)` packs one segment, `encode_pair(text_a, text_b)` two; a row whose
  text_b has no tokens is packed as one segment, as in `encode_pair`, and an empty text_a is
  `[CLS] [SEP]` (this model only prepares inputs; what they mean is the task model's rule).
  text_a and text_b (or the segments of `bert_pack_inputs`) of different row counts are an
  INVALID_ARGUMENT naming them (export/requests.py). Both take string
  [batch] and return `input_word_ids`, `input_mask`, `input_type_ids`, int32
  [batch, max_seq_length]. `tokenize` (strings -> int32 RaggedTensor [batch, (tokens)]) and
  `bert_pack_inputs` are TF Hub's preprocessor API (see `BertPackInputs`).
  """

  def __init__(self, tokenizer, max_seq_length=128, name=None):
    super().__init__(name=name)
    if max_seq_length < 3:
      raise ValueError(f"max_seq_length must be >= 3, got {max_seq_length}")
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length
    self.tokenize = tokenizer.tokenize
    self.bert_pack_inputs = BertPackInputs(tokenizer, max_seq_length)

  def _pack(self, ids_a, ids_b=None):
    return pack_inputs(ids_a, ids_b, max_seq_length=self.max_seq_length,
                       cls_id=self.tokenizer.cls_id, sep_id=self.tokenizer.sep_id)

  @requests.signature(text_a="string [batch]")
  def __call__(self, text_a):
    return self._pack(self.tokenizer.tokenize(text_a))

  @requests.signature(text_a="string [batch]", text_b="string [batch]")
  def encode_pair(self, text_a, text_b):
    text_a, text_b = requests.checked((text_a, text_b),
                                      requests.same_rows(text_a=text_a, text_b=text_b))
    return self._pack(self.tokenizer.tokenize(text_a), self.tokenizer.tokenize(text_b))


def save_preprocessing_model(export_dir, spm_model_file=None, vocab_file=None,
                             do_lower_case=True, max_seq_length=128):
  """Writes a self-contained preprocessing SavedModel; returns `export_dir`.

    save_preprocessing_model("/tmp/pre", spm_model_file="spiece.model")
    loaded = tf.saved_model.load("/tmp/pre")
    loaded.signatures["serving_default"](text_a=tf.constant(["a sentence"]))
    loaded.signatures["encode_pair"](text_a=..., text_b=...)

  Signatures `serving_default` (text_a) and `encode_pair` (text_a, text_b). The loaded
  object is also TF Hub's text preprocessor: `loaded(strings)`, `loaded.tokenize(strings)`
  (-> int32 RaggedTensor of ids) and `loaded.bert_pack_inputs(segments, seq_length=N)`, each
  usable through `hub.KerasLayer`. The model or vocab file is copied to `assets/`.
  """
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  model = PreprocessingModel(tokenizer, max_seq_length)
  signatures = {
      "serving_default": model.__call__.get_concrete_function(),
      "encode_pair": model.encode_pair.get_concrete_function(),
  }
  save_atomically(model, export_dir, signatures)
  return export_dir
