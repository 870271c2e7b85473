"""What the in-graph tokenizer's tests and the preprocessing SavedModel's share (test support):
the tiny WordPiece vocabulary, string batches, and packing by the graph and by Python. The
tokenizers themselves are session fixtures in conftest.py (spm_graph, tiny_python, ...)."""

import string

import tensorflow as tf

from albert_tf.tokenization import encode_pair
from albert_tf.tokenization.in_graph import pack_inputs

TINY_VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "σ", "ς", "##σ", "##ς", "南", ","]
              + list(string.ascii_lowercase) + ["##" + c for c in string.ascii_lowercase]
              + ["the", "##ing", "play", "a", ""])  # a duplicate and a blank line, as in the wild


def spm_model(shared_data):
  return shared_data / "sentencepiece" / "spiece.model"


def encode(texts):
  return tf.constant([t.encode("utf-8") for t in texts], tf.string)


def python_packed(tokenizer, texts_a, texts_b, max_seq_length):
  rows = [encode_pair(tokenizer, a, b, max_seq_length)
          for a, b in zip(texts_a, texts_b or [None] * len(texts_a))]
  return {"input_word_ids": [r["input_ids"] for r in rows],
          "input_mask": [r["input_mask"] for r in rows],
          "input_type_ids": [r["segment_ids"] for r in rows]}


def graph_packed(tokenizer, texts_a, texts_b, max_seq_length):
  ids_a = tokenizer.tokenize(encode(texts_a))
  ids_b = None if texts_b is None else tokenizer.tokenize(encode(texts_b))
  packed = pack_inputs(ids_a, ids_b, max_seq_length=max_seq_length, cls_id=tokenizer.cls_id,
                       sep_id=tokenizer.sep_id)
  for value in packed.values():
    assert value.dtype == tf.int32 and value.shape == (len(texts_a), max_seq_length)
  return {key: value.numpy().tolist() for key, value in packed.items()}


def a_words(n):
  """`n` words "a" joined by spaces: `n` tokens."""
  return " ".join(["a"] * n)
