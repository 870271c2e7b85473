"""Every signature of every export checks its request before anything else, the same way
through `tf.saved_model.load` and through a Session over the MetaGraph (saved_model_cli's and
TF Serving's path): an input of another rank is an INVALID_ARGUMENT naming it and the rank it
must have (export/requests.py's `signature`), another dtype is refused before any op runs,
an empty batch has empty outputs, and empty texts are answered as `--do_predict` answers them
or named where the export's rule refuses them.

The exports are tiny (configs/tiny.json, the real SentencePiece model), one of each kind;
all but the encoder and preprocessing are conftest.py's, shared with the tests of what they
compute.
"""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import requests
from albert_tf.export.preprocessing import save_preprocessing_model
from albert_tf.tokenization import FullTokenizer
from conftest import SPM_MODEL, float32_atol
from serving_requests import (assert_other_dtype_refused, assert_rejected, empty_request,
                              run_both_ways, serialized_example)

SPM = str(SPM_MODEL)
IDS = {"input_word_ids": [[2, 9, 3]], "input_mask": [[1, 1, 1]], "input_type_ids": [[0, 0, 0]]}
TEXT = ["EU rejects German call to boycott British lamb ."]
# Every signature of every export, with a request it answers.
REQUESTS = {
    ("encoder", "serving_default"): IDS,
    ("encoder", "lean"): IDS,
    ("encoder", "mlm"): dict(IDS, masked_lm_positions=[[1]]),
    ("preprocessing", "serving_default"): {"text_a": ["a premise"]},
    ("preprocessing", "encode_pair"): {"text_a": ["a premise"], "text_b": ["a hypothesis"]},
    ("fill_mask", "serving_default"): {"text": ["the [MASK] sat on the mat"]},
    ("classifier", "serving_default"): {"text_a": ["a gripping film"]},
    ("classifier", "text_pair"): {"text_a": ["a gripping film"], "text_b": ["it was"]},
    ("classifier", "encoded"): IDS,
    ("classifier", "serve_examples"): {"examples": [serialized_example(
        text_a="a gripping film", text_b="it was")]},
    ("classifier", "embed"): {"text": ["a gripping film"]},
    ("embed", "serving_default"): {"text": ["a gripping film"]},
    ("squad", "serving_default"): {"question": ["Who wrote it?"], "context": ["Tom wrote it."]},
    ("squad", "serve_examples"): {"examples": [serialized_example(
        question="Who wrote it?", context="Tom wrote it.")]},
    ("race", "serving_default"): {"article": ["Tom went to the park."],
                                  "question": ["Where did Tom go?"],
                                  "options": [["park", "zoo", "school", "shop"]]},
    ("race", "serve_examples"): {"examples": [serialized_example(
        article="Tom went to the park.", question="Where did Tom go?",
        options=["park", "zoo", "school", "shop"])]},
    ("ner", "serving_default"): {"text": TEXT},
    ("ner", "serve_examples"): {"examples": [serialized_example(text=TEXT[0])]},
    ("ner_crf", "serving_default"): {"text": TEXT},
    ("ner_crf", "serve_examples"): {"examples": [serialized_example(text=TEXT[0])]},
}


@pytest.fixture(scope="module")
def preprocessing_export(tmp_path_factory):
  export_dir = save_preprocessing_model(str(tmp_path_factory.mktemp("pre") / "export"),
                                        spm_model_file=SPM, max_seq_length=8)
  return None, export_dir, tf.saved_model.load(export_dir)


def _export(request, kind):
  """(export_dir, loaded) of an export kind, built on first use."""
  _, export_dir, loaded = request.getfixturevalue(f"{kind}_export")
  return export_dir, loaded


SIGNATURES = pytest.mark.parametrize("kind, signature", list(REQUESTS),
                                     ids=[f"{k}-{s}" for k, s in REQUESTS])


def _is_text(value):
  return np.asarray(value).dtype.kind in "US"  # str, or bytes (serialized Examples)


@SIGNATURES
def test_an_input_of_another_rank_is_named_with_the_rank_it_must_have(request, kind,
                                                                      signature):
  """One more dimension and one fewer, on each input: both ways an INVALID_ARGUMENT from the
  rank rule, which runs before any op that reads the input (a [None] signature called eagerly
  would otherwise run on a [1, 1] tensor, or fail in a strided_slice)."""
  export_dir, loaded = _export(request, kind)
  good = REQUESTS[kind, signature]
  for name, value in good.items():
    value = np.asarray(value)
    rank = value.ndim
    for bad in (value[None], value[0]):
      shape = " ".join(str(d) for d in bad.shape)
      assert_rejected(export_dir, loaded, signature, dict(good, **{name: bad.tolist()}),
                      rf"{name} has rank {bad.ndim} \(shape \[{shape}\]\); this signature "
                      rf"takes {'string' if _is_text(value) else 'int32'} \[[\w, ]+\] "
                      rf"\(rank {rank}\)\]")


@SIGNATURES
def test_an_input_of_another_dtype_is_refused_before_any_op_runs(request, kind, signature):
  """No rule of a graph can see another dtype (a placeholder has one): TensorFlow refuses it
  first, in the words serving_requests.assert_other_dtype_refused documents."""
  export_dir, loaded = _export(request, kind)
  good = REQUESTS[kind, signature]
  for name, value in good.items():
    value = np.asarray(value)
    other = np.ones(value.shape, np.int32) if _is_text(value) else np.full(value.shape, "a")
    assert_other_dtype_refused(export_dir, loaded, signature, good, name, other)


@SIGNATURES
def test_an_empty_batch_gets_empty_outputs_both_ways(request, kind, signature):
  export_dir, loaded = _export(request, kind)
  out = run_both_ways(export_dir, loaded, signature, empty_request(REQUESTS[kind, signature]))
  assert out and all(v.shape[0] == 0 for v in out.values()), {k: v.shape for k, v in out.items()}
  if (kind, signature) == ("fill_mask", "serving_default"):
    assert out["top_ids"].shape == (0, 4, 3) and out["masked_positions"].shape == (0, 4)
  if kind == "race":
    assert out["probabilities"].shape == (0, 4) and out["answer_index"].shape == (0,)
  if kind == "preprocessing":
    assert {k: v.shape for k, v in out.items()} == {k: (0, 8) for k in out}


def test_a_declared_size_is_checked_and_the_declared_shape_is_static():
  """`signature`'s rule on its own: a number in the declaration is a size the input must have
  (the encoder exported with max_seq_length); the function sees the declared static shape."""
  seen = []

  @requests.signature(ids="int32 [batch, 4]")
  def width(ids):
    seen.append(ids.shape.as_list())
    return tf.shape(ids)[1]

  assert width(tf.zeros([2, 4], tf.int32)).numpy() == 4 and seen == [[None, 4]]
  for shape in ([2, 3], [4], [1, 4, 1]):
    rank = len(shape)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"ids has rank {rank} \(shape \[{' '.join(map(str, shape))}\]\); "
                             r"this signature takes int32 \[batch, 4\] \(rank 2\)"):
      width(tf.zeros(shape, tf.int32))


def test_the_signatures_walked_are_every_signature_of_every_export(request):
  kinds = {kind for kind, _ in REQUESTS}
  for kind in kinds:
    _, loaded = _export(request, kind)
    assert set(loaded.signatures) == {s for k, s in REQUESTS if k == kind}, kind


def test_token_ids_of_no_column_are_named(encoder_export, classifier_export):
  """The encoder's empty text: rows of no token."""
  for (_, export_dir, loaded), signature in ((encoder_export, "serving_default"),
                                             (classifier_export, "encoded")):
    assert_rejected(export_dir, loaded, signature, {k: [[]] for k in IDS},
                    r"input_word_ids has 0 columns; this model reads 1 to 64 tokens per row")


def test_empty_texts_the_text_models_refuse_are_named(fill_mask_export, classifier_export):
  """A fill-mask text without a [MASK] and a classifier's text_a without a token are named; an
  empty text_b is one segment, as in fine-tuning."""
  _, export_dir, loaded = fill_mask_export
  assert_rejected(export_dir, loaded, "serving_default", {"text": ["the [MASK] sat", " \t"]},
                  r"text row 1 has no \[MASK\] to fill")
  _, export_dir, loaded = classifier_export
  for signature, request in [("serving_default", {"text_a": [""]}),
                             ("text_pair", {"text_a": [" \t"], "text_b": ["c"]})]:
    assert_rejected(export_dir, loaded, signature, request,
                    r"text_a row 0 has no tokens \(it is empty or only whitespace\)")
  out = run_both_ways(export_dir, loaded, "text_pair", {"text_a": ["a"], "text_b": [""]})
  assert out["probabilities"].shape == (1, 2)


def test_empty_texts_are_packed_as_the_python_tokenizer_packs_them(preprocessing_export):
  """An empty text_a is [CLS] [SEP]; an empty text_b adds nothing."""
  _, export_dir, loaded = preprocessing_export
  tokenizer = FullTokenizer(spm_model_file=SPM)
  cls_sep = [tokenizer.cls_id, tokenizer.sep_id] + [0] * 6
  for signature, request in [("serving_default", {"text_a": ["", " \t "]}),
                             ("encode_pair", {"text_a": ["", " "], "text_b": ["", " \t"]})]:
    out = run_both_ways(export_dir, loaded, signature, request)
    assert out["input_word_ids"].tolist() == [cls_sep] * 2, signature
    assert out["input_mask"].tolist() == [[1, 1] + [0] * 6] * 2, signature


def test_inputs_of_different_rows_are_named(preprocessing_export, squad_export):
  for (_, export_dir, loaded), signature, request, pattern in [
      (preprocessing_export, "encode_pair", {"text_a": ["a", "b"], "text_b": ["c"]},
       "text_b has 1 rows but text_a has 2"),
      (squad_export, "serving_default", {"question": ["Who?", "When?"], "context": ["Tom."]},
       "context has 1 rows but question has 2")]:
    assert_rejected(export_dir, loaded, signature, request, pattern)


def test_empty_contexts_get_the_empty_answer_and_empty_questions_an_answer(squad_export):
  """As --do_predict answers them (test_run_squad.py: on a trained model)."""
  _, export_dir, loaded = squad_export
  out = run_both_ways(export_dir, loaded, "serving_default",
                      {"question": ["Who?", "Who?", ""], "context": ["", " \t\n", "Tom wrote."]})
  assert out["answer"][:2].tolist() == [b"", b""]
  assert out["start"][:2].tolist() == out["end"][:2].tolist() == [-1, -1]
  # An empty question is answered, not refused: with this random model, a span of the context
  # or, when every top candidate points outside it (the v1 rule), the empty answer at -1.
  answer, start, end = out["answer"][2], int(out["start"][2]), int(out["end"][2])
  assert (answer == "Tom wrote."[start:end].encode()) if start >= 0 else (answer, end) == (b"", -1)


def test_empty_race_texts_are_scored(race_export):
  _, export_dir, loaded = race_export
  out = run_both_ways(export_dir, loaded, "serving_default",
                      {"article": [""], "question": [" "], "options": [["", " ", "", "a"]]})
  # A softmax over the 4 options: its normaliser's 4 terms, then the probabilities' sum of 4.
  np.testing.assert_allclose(out["probabilities"].sum(-1), [1.0], rtol=0,
                             atol=float32_atol([1.0], 4 + 4))


def test_ner_texts_without_words_have_no_entities_with_softmax_and_crf_alike(ner_export,
                                                                             ner_crf_export):
  """A request whose texts hold no word (empty, blank), alone or beside texts with words:
  no entities for those rows, the same outputs from the softmax and the CRF export."""
  for texts in (["", " \t "], [" ", TEXT[0], ""]):
    outs = [run_both_ways(export_dir, loaded, "serving_default", {"text": texts})
            for _, export_dir, loaded in (ner_export, ner_crf_export)]
    for out in outs:
      assert out["num_entities"][0] == 0 and out["num_entities"][-1] == 0
      assert (out["start"][0] == -1).all() and (out["entity_text"][-1] == b"").all()
    if len(texts) == 2:  # no word at all: the same empty answer
      for out in outs:
        assert {k: v.shape for k, v in out.items()} == {
            k: (2,) if k == "num_entities" else (2, 0) for k in out}


# serve.py's tests over HTTP (serving_http.py), those of the serve_examples and embed
# signatures (serving_examples.py) and those of the ops every export uses (serving_ops.py) are
# collected in this module, so that one test process builds the tiny exports they share
# (conftest.py's) once: each export traced in a process keeps about half a gigabyte of its
# memory, and pytest-xdist's --dist loadfile would give each file to whichever worker is free.
from serving_examples import *  # noqa: E402,F401,F403  pylint: disable=wildcard-import,wrong-import-position
from serving_http import *  # noqa: E402,F401,F403  pylint: disable=wildcard-import,wrong-import-position
from serving_ops import *  # noqa: E402,F401,F403  pylint: disable=wildcard-import,wrong-import-position
