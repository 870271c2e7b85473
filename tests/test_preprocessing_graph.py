"""Tests for albert_tf.export.preprocessing: the preprocessing SavedModel and TF Hub's packer.

Its tokenization and packing are tokenization/in_graph.py's, tested for parity with the Python
tokenizer in test_in_graph_tokenizer.py; here the saved model must give the same, wherever its
folder goes. The tokenizers are conftest.py's session fixtures. Tests whose names contain
"real_data" read ../shared/data.
"""

import shutil

import pytest
import tensorflow as tf

from albert_tf.export import preprocessing
from albert_tf.export.preprocessing import PreprocessingModel, save_preprocessing_model
from in_graph_support import a_words, encode, graph_packed, python_packed, spm_model
from reference_tokenization import ReferenceTokenizer


def _assert_saved_model_matches(export_dir, tokenizer, python, texts_a, texts_b,
                                max_seq_length):
  loaded = tf.saved_model.load(str(export_dir))
  assert set(loaded.signatures) == {"serving_default", "encode_pair"}
  single = loaded.signatures["serving_default"](text_a=encode(texts_a))
  pair = loaded.signatures["encode_pair"](text_a=encode(texts_a), text_b=encode(texts_b))
  expected_single = graph_packed(tokenizer, texts_a, None, max_seq_length)
  expected_pair = graph_packed(tokenizer, texts_a, texts_b, max_seq_length)
  assert {k: v.numpy().tolist() for k, v in single.items()} == expected_single
  assert {k: v.numpy().tolist() for k, v in pair.items()} == expected_pair
  assert expected_pair == python_packed(python, texts_a, texts_b, max_seq_length)
  assert (loaded.tokenizer.tokenize(encode(texts_a)).to_list()
          == python.encode_ids(texts_a))
  return loaded


def test_saved_preprocessing_model_works_after_moving_its_folder_real_data(
    spm_graph, spm_python, shared_data, tmp_path):
  export_dir = save_preprocessing_model(str(tmp_path / "saved"),
                                        spm_model_file=spm_model(shared_data),
                                        max_seq_length=32)
  moved = tmp_path / "elsewhere" / "preprocessing"
  shutil.copytree(export_dir, moved)
  shutil.rmtree(export_dir)
  assert (moved / "assets" / "spiece.model").is_file()
  texts_a = ["In 1990, the Café opened.", "", "Hello   World " * 20, "naïve ``quotes''"]
  texts_b = ["A second sentence.", "b only", "", "x " * 40]
  loaded = _assert_saved_model_matches(moved, spm_graph, spm_python, texts_a, texts_b, 32)
  # Held to the original's rules too, not only to our Python tokenizer ("``quotes''").
  reference = ReferenceTokenizer(spm_model(shared_data), do_lower_case=True)
  assert (loaded.tokenizer.tokenize(encode(texts_a)).to_list()
          == [reference.encode_ids(t) for t in texts_a])


def test_saved_wordpiece_preprocessing_model_keeps_its_vocab_as_an_asset(
    tiny_graph, tiny_python, tiny_vocab_file, tmp_path):
  export_dir = tmp_path / "saved"
  model = PreprocessingModel(tiny_graph, max_seq_length=8)
  tf.saved_model.save(model, str(export_dir), signatures={
      "serving_default": model.__call__.get_concrete_function(),
      "encode_pair": model.encode_pair.get_concrete_function()})
  assert (export_dir / "assets" / tiny_vocab_file.name).read_bytes() == (
      tiny_vocab_file.read_bytes())
  texts_a = ["the playing", "南京 Σ", "", a_words(12)]
  texts_b = ["a b", "", "c", a_words(12)]
  _assert_saved_model_matches(export_dir, tiny_graph, tiny_python, texts_a, texts_b, 8)
  # Segments of different rows are named (the saved signatures' requests are
  # test_serving_requests.py's).
  spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
  pack = tf.function(lambda a, b: preprocessing.bert_pack_inputs(
      [a, b], 8, tiny_graph.cls_id, tiny_graph.sep_id), input_signature=[spec, spec])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"assertion failed: \[segment 1 has 1 rows but segment 0 has 2"):
    pack(tiny_graph.tokenize(tf.constant(["a", "b"])), tiny_graph.tokenize(tf.constant(["c"])))
