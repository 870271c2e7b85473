"""The tf.Example and sentence-embedding signatures of the raw-text exports.

`serve_examples` (export/examples.py) answers serialized tf.train.Examples exactly as the text
signature answers the same texts; a missing or repeated feature is named with its row, and
the parse's own errors name the feature or the string. `embed` is the mean over real tokens
of the encoder's sequence_output, and its pooled_output, for the Python tokenizer's ids.
The exports are conftest.py's tiny ones; their rank, dtype and empty-batch requests are
test_serving_requests.py's.
"""

import numpy as np
import pytest
import tensorflow as tf
from conftest import SPM_MODEL, float32_atol, sentence_embeddings_python
from serving_requests import (
  TERMS,
  assert_rejected,
  assert_same_outputs,
  run,
  serialized_example,
  session_run,
)

from albert_tf.tokenization import FullTokenizer

# Collected by test_serving_requests.py (see there why): what it imports.
__all__ = [
    "test_classifier_examples_are_answered_as_serving_default_and_text_pair",
    "test_task_examples_are_answered_as_serving_default",
    "test_an_example_lacking_a_feature_or_holding_too_many_values_is_named",
    "test_a_string_that_is_no_example_or_a_feature_of_another_type_is_named_by_the_parse",
    "test_embed_is_the_encoders_mean_over_real_tokens_and_its_pooled_output",
]


def _examples(rows):
  return {"examples": [serialized_example(**row) for row in rows]}


def _assert_same_answers(got, want):
  assert_same_outputs(got, want)


A = ["A gripping, funny film.", "Dull.", "Only a"]
B = ["It was shown in 1990, twice.", "", "Only b"]


def test_classifier_examples_are_answered_as_serving_default_and_text_pair(classifier_export):
  """Examples without text_b answer as serving_default(text_a); with one (an empty one too),
  as text_pair; a feature the signature does not read (a label) is ignored."""
  _, _, loaded = classifier_export
  got = run(loaded, "serve_examples", **_examples([{"text_a": a, "label": 1} for a in A]))
  _assert_same_answers(got, run(loaded, "serving_default", text_a=A))
  rows = [{"text_a": A[0]}, {"text_a": A[1], "text_b": B[1]}, {"text_a": A[2], "text_b": B[2]}]
  got = run(loaded, "serve_examples", **_examples(rows))
  _assert_same_answers(got, run(loaded, "text_pair", text_a=A, text_b=["", B[1], B[2]]))


def test_task_examples_are_answered_as_serving_default(race_export, squad_export, ner_export):
  race = {"article": ["Tom went to the park.", "Ann read a book at home."],
          "question": ["Where did Tom go?", "Ann read _ ."],
          "options": [["park", "zoo", "school", "shop"], ["a book", "a map", "", "it"]]}
  squad = {"question": ["Who wrote it?", "When?"],
           "context": ["Tom wrote it in 1990.", "It was shown in 1990, twice, in Paris."]}
  ner = {"text": ["EU rejects German call to boycott British lamb .", "", "Peter Blackburn"]}
  for (_, _, loaded), request in ((race_export, race), (squad_export, squad),
                                  (ner_export, ner)):
    rows = [dict(zip(request, values)) for values in zip(*request.values())]
    _assert_same_answers(run(loaded, "serve_examples", **_examples(rows)),
                         run(loaded, "serving_default", **request))


def test_an_example_lacking_a_feature_or_holding_too_many_values_is_named(
    classifier_export, race_export, squad_export):
  for (_, export_dir, loaded), rows, pattern in [
      (classifier_export, [{"text_a": "good"}, {"text_b": "no text_a"}],
       r"examples row 1 holds 0 values of feature text_a; this signature reads 1\]"),
      (classifier_export, [{"text_a": "good", "text_b": ["one", "two"]}],
       (r"examples row 0 holds 2 values of feature text_b; this signature reads 1, or none "
        r"\(an empty text_b\)\]")),
      (squad_export, [{"question": "Who?", "context": "Tom."}, {"question": "Who?"}],
       r"examples row 1 holds 0 values of feature context; this signature reads 1\]"),
      (race_export, [{"article": "a", "question": "q", "options": ["x", "y", "z"]}],
       r"examples row 0 holds 3 values of feature options; this signature reads 4\]")]:
    assert_rejected(export_dir, loaded, "serve_examples", _examples(rows), pattern)


@pytest.mark.parametrize("example, message", [
    # Raw text sent where Examples are taken.
    (b"a gripping film", "Could not parse example input, value: 'a gripping film'"),
    (serialized_example(text_a=[7]),
     ("Key: text_a, Index: 1.  Data types don't match. Expected type: string, "
      "Actual type: int64"))], ids=["raw-text", "int64-feature"])
def test_a_string_that_is_no_example_or_a_feature_of_another_type_is_named_by_the_parse(
    classifier_export, example, message):
  """TensorFlow's own words, through both paths: they name the string or the feature."""
  _, export_dir, loaded = classifier_export
  examples = np.array([serialized_example(text_a="good"), example], dtype=object)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    loaded.signatures["serve_examples"](examples=tf.constant(examples))
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    session_run(export_dir, "serve_examples", {"examples": examples})


@pytest.mark.parametrize("kind, signature, seq", [("classifier", "embed", 24),
                                                  ("embed", "serving_default", 32)])
def test_embed_is_the_encoders_mean_over_real_tokens_and_its_pooled_output(request, kind,
                                                                           signature, seq):
  """The classifier's fine-tuned encoder and the bundle's embed model (a pretrainer's), on
  texts of different lengths and an empty one ([CLS] [SEP]); `_normalized` is each over its
  L2 norm."""
  model, _, loaded = request.getfixturevalue(f"{kind}_export")
  texts = ["A gripping, funny film, shown in 1990 twice.", "Dull.", ""]
  mean, pooled = sentence_embeddings_python(model.encoder,
                                            FullTokenizer(spm_model_file=SPM_MODEL), texts, seq)
  out = run(loaded, signature, text=texts)
  # The graph against the Keras encoder: float32 rounding of the model's chain (TERMS) and the
  # mean's sum over seq; a unit vector carries that error over its row's norm, and its own
  # rounding of the norm's sum over H, the square root and the division.
  for name, want in (("mean_embedding", mean), ("pooled_output", pooled)):
    terms = TERMS + (seq if name == "mean_embedding" else 0)
    np.testing.assert_allclose(out[name], want, rtol=0, atol=float32_atol(want, terms),
                               err_msg=name)
    unit = want / np.linalg.norm(want, axis=1, keepdims=True)
    atol = (float32_atol(want, terms) / np.linalg.norm(want, axis=1).min()
            + float32_atol(unit, 32 + 2))
    np.testing.assert_allclose(out[f"{name}_normalized"], unit, rtol=0, atol=atol, err_msg=name)
