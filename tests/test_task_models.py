"""Raw-text SavedModels: fill-mask and classifier serving, against the Python path."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.export.task_models import ClassifierServing, FillMaskModel, export_classifier
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tokenization import FullTokenizer, encode_pair
from albert_tf.tokenization.in_graph import InGraphTokenizer
from conftest import ROOT, SHARED_DATA, encode_with_masks_python, float32_atol
from serving_requests import assert_rejected

SPM = str(SHARED_DATA / "sentencepiece" / "spiece.model")
TEXTS = ["The capital of [MASK] is Paris, in 1990, they said.",
         "[MASK] [MASK] sat on the mat",
         "[MASK]",
         "An ending mask [MASK]"]


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(spm_model_file=SPM)


# The exports: conftest.py's fill_mask_export (32 tokens, top 3, at most 4 masks) and
# classifier_export (labels negative, positive; 24 tokens). Their rank, dtype, empty batch and
# empty text requests are test_serving_requests.py's.
def logit_terms(config):
  """The longest chain of float32 additions behind a classifier's logit: the E-term embedding
  projection, per layer a sum over I and one over H, then the pooler's and the classifier's H."""
  return (config.embedding_size + config.num_hidden_layers * (config.intermediate_size
                                                              + config.hidden_size)
          + 2 * config.hidden_size)


@pytest.fixture(scope="module")
def fill_mask(fill_mask_export):
  return fill_mask_export


@pytest.fixture(scope="module")
def classifier(classifier_export):
  return classifier_export


def test_real_data_fill_mask_matches_the_python_path(fill_mask, tokenizer):
  model, _, loaded = fill_mask
  out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
  for row, text in enumerate(TEXTS):
    ids = [tokenizer.cls_id] + encode_with_masks_python(tokenizer, text)[:30] + [
        tokenizer.sep_id]
    ids += [0] * (32 - len(ids))
    positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_id]
    got_positions = [p for p in out["masked_positions"][row].numpy() if p >= 0]
    assert got_positions == positions, text
    assert (out["top_ids"][row, len(positions):].numpy() == -1).all()
    length = len(encode_with_masks_python(tokenizer, text)[:30]) + 2
    mask = [1] * length + [0] * (32 - length)
    logits = model({"input_word_ids": tf.constant([ids]), "input_mask": tf.constant([mask]),
                    "input_type_ids": tf.zeros([1, 32], tf.int32),
                    "masked_lm_positions": tf.constant([positions])},
                   training=False)["mlm_logits"][0]
    probs = tf.nn.softmax(logits).numpy()
    for j, _ in enumerate(positions):
      top = np.argsort(-probs[j])[:3]
      np.testing.assert_array_equal(out["top_ids"][row, j].numpy(), top)
      # As in test_fill_mask_computes_a_request_at_its_longest_text: 32 attention terms per
      # layer, then the vocabulary's exponentials.
      np.testing.assert_allclose(out["top_scores"][row, j].numpy(), probs[j][top], rtol=0,
                                 atol=float32_atol(probs[j], 32 * 2 + tokenizer.vocab_size))
      assert [t.decode() for t in out["top_tokens"][row, j].numpy()] == \
          tokenizer.convert_ids_to_tokens(top)


def test_fill_mask_names_a_text_that_would_lose_its_masks(fill_mask):
  """No [MASK] (a client writing "<mask>"), more than max_masks, or one past the tokens read:
  each an INVALID_ARGUMENT naming the row, where the answer would silently drop masks."""
  _, export_dir, loaded = fill_mask
  fine = "the [MASK] sat"
  for texts, pattern in [
      ([fine, "the <mask> sat"], "text row 1 has no \\[MASK\\] to fill"),
      (["[MASK] " * 5], "text row 0 has 5 \\[MASK\\]s; this model fills at most 4"),
      ([fine, "word " * 30 + "[MASK]"], "text row 1 has a \\[MASK\\] after the 30 tokens this "
                                        "model reads")]:
    assert_rejected(export_dir, loaded, "serving_default", {"text": texts}, pattern)


@pytest.mark.parametrize("labels", [["negative", "positive"], None])
def test_real_data_classifier_serving_takes_raw_text(tmp_path, tokenizer, labels, classifier):
  if labels:
    model, export_dir, loaded = classifier
  else:
    config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
    model = AlbertClassifier(config, 1)
    export_dir = export_classifier(model, str(tmp_path / "serving"), None,
                                   spm_model_file=SPM, max_seq_length=24)
    loaded = tf.saved_model.load(export_dir)
  assert set(loaded.signatures) == {"serving_default", "text_pair", "serve_examples", "encoded",
                                   "embed"}
  assert b"_XlaMustCompile" not in (pathlib.Path(export_dir) / "saved_model.pb").read_bytes()
  a = ["A gripping, funny film.", "Dull.", "Only a"]
  b = ["It was shown in 1990, twice.", "", "Only b"]
  single = loaded.signatures["serving_default"](text_a=tf.constant(a))
  pair = loaded.signatures["text_pair"](text_a=tf.constant(a), text_b=tf.constant(b))
  for out, texts_b in ((single, [None] * 3), (pair, b)):
    features = [encode_pair(tokenizer, x, y or None, 24) for x, y in zip(a, texts_b)]
    inputs = {"input_word_ids": tf.constant([f["input_ids"] for f in features]),
              "input_mask": tf.constant([f["input_mask"] for f in features]),
              "input_type_ids": tf.constant([f["segment_ids"] for f in features])}
    logits = model(inputs, training=False).numpy()
    terms = logit_terms(model.config)
    if labels:
      # A probability moves by at most a quarter of its logits' error; the softmax's 2 terms.
      probabilities = tf.nn.softmax(logits).numpy()
      np.testing.assert_allclose(out["probabilities"], probabilities, rtol=0,
                                 atol=float32_atol(probabilities, terms + 2))
      assert [n.decode() for n in out["label_names"].numpy()] == [
          labels[i] for i in logits.argmax(-1)]
    else:
      # Regression scores near 0 (random weights): the rounding at the scale of the score's
      # terms |pooled| |w|.
      pooled = model.encoder(inputs, training=False)["pooled_output"].numpy()
      scale = np.abs(pooled) @ np.abs(model.head.output_weights.numpy()).T
      np.testing.assert_allclose(out["scores"], logits, rtol=0, atol=float32_atol(scale, terms))


def test_classifier_serving_names_a_malformed_request(classifier):
  _, export_dir, loaded = classifier
  ok_ids = {"input_word_ids": [[2, 9, 3]], "input_mask": [[1, 1, 1]],
            "input_type_ids": [[0, 0, 0]]}
  for signature, request, pattern in [
      ("text_pair", {"text_a": ["a", "b"], "text_b": ["c"]},
       "text_b has 1 rows but text_a has 2"),
      ("text_pair", {"text_a": ["a", " \t"], "text_b": ["c", "d"]},
       "text_a row 1 has no tokens \\(it is empty or only whitespace\\)"),
      ("encoded", dict(ok_ids, input_word_ids=[[2, 30000, 3]]),
       "input_word_ids holds 30000 at \\[0 1\\]; word ids must be in \\[0, 30000\\) "
       "\\(vocab_size\\)"),
      ("encoded", dict(ok_ids, input_mask=[[1, 1]]),
       "input_mask has shape \\[1 2\\] but input_word_ids has \\[1 3\\]")]:
    assert_rejected(export_dir, loaded, signature, request, pattern)


def test_classifier_serving_computes_a_request_at_its_longest_text(tokenizer):
  """Requests are cut to their longest packed text: a model with 16 positions serves short
  texts under max_seq_length=64 (it could not run 64 columns), with the probabilities of the
  same texts padded to 16."""
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      max_position_embeddings=16)
  model = AlbertClassifier(config, 2)
  serving = ClassifierServing(model, InGraphTokenizer(spm_model_file=SPM), ["n", "p"], 64)
  texts = ["A gripping, funny film.", "Dull."]
  out = serving(tf.constant(texts))
  features = [encode_pair(tokenizer, t, None, 16) for t in texts]
  logits = model({"input_word_ids": tf.constant([f["input_ids"] for f in features]),
                  "input_mask": tf.constant([f["input_mask"] for f in features]),
                  "input_type_ids": tf.constant([f["segment_ids"] for f in features])},
                 training=False)
  probabilities = tf.nn.softmax(logits).numpy()
  np.testing.assert_allclose(out["probabilities"], probabilities, rtol=0,
                             atol=float32_atol(probabilities, logit_terms(config) + 2))


def test_fill_mask_computes_a_request_at_its_longest_text(tokenizer):
  """Requests are cut to their longest packed text: a pretrainer with 16 positions fills short
  texts under max_seq_length=64 (it could not run 64 columns), with the top tokens and
  probabilities of the same texts padded to 16, to float32 rounding."""
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      max_position_embeddings=16)
  model = AlbertPretrainer(config)
  fill_mask = FillMaskModel(model, InGraphTokenizer(spm_model_file=SPM), tokenizer.mask_id,
                            tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size)), 64,
                            top_k=3, max_masks=2)
  texts = ["A [MASK] film.", "[MASK] sat on the [MASK]."]
  out = fill_mask(tf.constant(texts))
  ids = [[tokenizer.cls_id] + encode_with_masks_python(tokenizer, t) + [tokenizer.sep_id]
         for t in texts]
  positions = [[i for i, t in enumerate(row) if t == tokenizer.mask_id] for row in ids]
  np.testing.assert_array_equal(out["masked_positions"], [positions[0] + [-1], positions[1]])
  logits = model({"input_word_ids": tf.constant([r + [0] * (16 - len(r)) for r in ids]),
                  "input_mask": tf.constant([[1] * len(r) + [0] * (16 - len(r)) for r in ids]),
                  "input_type_ids": tf.zeros([2, 16], tf.int32),
                  "masked_lm_positions": tf.constant([positions[0] + [0], positions[1]])},
                 training=False)["mlm_logits"]
  probs = tf.nn.softmax(logits).numpy()
  for row, j in ((0, 0), (1, 0), (1, 1)):
    top = np.argsort(-probs[row, j])[:3]
    np.testing.assert_array_equal(out["top_ids"][row, j], top)
    # A probability sums 16 attention terms per layer, then the vocabulary's exponentials.
    np.testing.assert_allclose(out["top_scores"][row, j], probs[row, j][top], rtol=0,
                               atol=float32_atol(probs[row, j], 16 * 2 + tokenizer.vocab_size))
