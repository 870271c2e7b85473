"""Tests for albert_tf.tokenization.train_spm (and its command line, albert_tf.cli.train_spm):
the original ALBERT SentencePiece recipe.

Models are trained small (a few hundred pieces) on real text from ../shared/data/corpus_en,
about a second each.
"""

import os

import pytest
import sentencepiece
from sentencepiece import sentencepiece_model_pb2

from albert_tf.cli.train_spm import main
from albert_tf.tokenization import FullTokenizer, preprocess_text
from albert_tf.tokenization.train_spm import RECIPE, train_sentencepiece

VOCAB_SIZE = 400
USER_SYMBOLS = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]


def _wikitext(shared_data):
  path = shared_data / "corpus_en" / "wikitext-2" / "valid.txt"
  if not path.exists():
    raise FileNotFoundError(f"real test data not found: {path}")  # never skip
  return path


def _gutenberg(shared_data, name):
  path = shared_data / "corpus_en" / "nltk_gutenberg" / name
  if not path.exists():
    raise FileNotFoundError(f"real test data not found: {path}")
  return path


def _proto(model_file):
  proto = sentencepiece_model_pb2.ModelProto()
  with open(model_file, "rb") as f:
    proto.ParseFromString(f.read())
  return proto


@pytest.fixture(scope="module")
def trained(shared_data, tmp_path_factory):
  """A lowercased model trained on wikitext-2 valid, with the messages it logged."""
  messages = []
  prefix = tmp_path_factory.mktemp("spm") / "wiki"
  model_file = train_sentencepiece(str(_wikitext(shared_data)), prefix, VOCAB_SIZE,
                                   do_lower_case=True, log=messages.append, num_threads=4)
  return model_file, messages


def test_real_data_special_ids_follow_the_original(trained):
  sp = sentencepiece.SentencePieceProcessor(model_file=trained[0])
  assert [sp.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]",
                                                   "[MASK]"]
  assert (sp.pad_id(), sp.unk_id()) == (0, 1)
  assert all(sp.is_control(i) for i in (2, 3, 4))
  assert sp.get_piece_size() == VOCAB_SIZE


def test_real_data_model_has_no_bos_or_eos(trained):
  sp = sentencepiece.SentencePieceProcessor(model_file=trained[0])
  assert (sp.bos_id(), sp.eos_id()) == (-1, -1)
  assert sp.piece_to_id("<s>") == sp.unk_id()
  assert sp.piece_to_id("</s>") == sp.unk_id()


def test_real_data_user_symbols_are_single_user_defined_pieces(trained):
  sp = sentencepiece.SentencePieceProcessor(model_file=trained[0])
  pieces = _proto(trained[0]).pieces
  user_type = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
  for offset, symbol in enumerate(USER_SYMBOLS):
    assert sp.piece_to_id(symbol) == 5 + offset
    assert pieces[5 + offset].type == user_type
  assert sp.encode_as_pieces("(a)")[-3:] == ["(", "a", ")"]
  assert "\u20ac" in sp.encode_as_pieces("\u20ac5")


def test_real_data_trainer_spec_is_the_recipe(trained):
  proto = _proto(trained[0])
  spec = proto.trainer_spec
  assert spec.model_type == sentencepiece_model_pb2.TrainerSpec.UNIGRAM
  assert spec.character_coverage == pytest.approx(0.99995)
  assert spec.shuffle_input_sentence
  assert list(spec.control_symbols) == ["[CLS]", "[SEP]", "[MASK]"]
  assert list(spec.user_defined_symbols) == USER_SYMBOLS
  assert proto.normalizer_spec.name == RECIPE["normalization_rule_name"]


def test_real_data_lowercased_model_has_no_uppercase_piece(trained):
  sp = sentencepiece.SentencePieceProcessor(model_file=trained[0])
  pieces = [sp.id_to_piece(i) for i in range(5, sp.get_piece_size())]
  assert [p for p in pieces if p != p.lower()] == []


def test_real_data_full_tokenizer_loads_the_model_and_lowercases(trained):
  tok = FullTokenizer(spm_model_file=trained[0], do_lower_case=True)
  upper = tok.convert_tokens_to_ids(tok.tokenize("THE CITY OF LONDON WAS FOUNDED (IN 1990)"))
  lower = tok.convert_tokens_to_ids(tok.tokenize("the city of london was founded (in 1990)"))
  assert upper == lower
  assert tok.unk_id not in lower
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)


def test_real_data_progress_counts_lines_and_skips_blank_ones(trained, shared_data):
  with open(_wikitext(shared_data), encoding="utf-8") as f:
    lines = f.readlines()
  non_blank = sum(1 for line in lines if preprocess_text(line))
  assert non_blank < len(lines)  # the corpus does have blank lines to skip
  messages = "\n".join(trained[1])
  assert f"read {len(lines):,} lines ({non_blank:,} non-blank)" in messages
  assert f"wrote {trained[0]}" in messages
  assert "<pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4" in messages


def test_real_data_case_is_kept_without_do_lower_case(shared_data, tmp_path):
  model_file = train_sentencepiece(_gutenberg(shared_data, "blake-poems.txt"),
                                   tmp_path / "cased", 300, do_lower_case=False,
                                   log=lambda message: None)
  sp = sentencepiece.SentencePieceProcessor(model_file=model_file)
  pieces = [sp.id_to_piece(i) for i in range(5, sp.get_piece_size())]
  assert any(p != p.lower() for p in pieces)


def test_real_data_cli_trains_from_a_glob_into_a_new_folder(shared_data, tmp_path, capsys):
  pattern = str(shared_data / "corpus_en" / "nltk_gutenberg" / "blake-*.txt")
  out_dir = tmp_path / "new" / "folder"
  status = main(["--input", pattern, "--model_prefix", str(out_dir / "spm"),
                 "--vocab_size", "300", "--num_threads", "2"])
  assert status == 0
  assert sorted(os.listdir(out_dir)) == ["spm.model", "spm.vocab"]  # no temporary left
  output = capsys.readouterr().out
  assert "read 1,441 lines" in output
  assert str(out_dir / "spm.model") in output
  sp = sentencepiece.SentencePieceProcessor(model_file=str(out_dir / "spm.model"))
  assert sp.get_piece_size() == 300
  assert sp.piece_to_id("[MASK]") == 4


def test_real_data_comma_list_reads_every_file(shared_data, tmp_path):
  messages = []
  inputs = ",".join(str(_gutenberg(shared_data, name))
                    for name in ("blake-poems.txt", "shakespeare-macbeth.txt"))
  train_sentencepiece(inputs, tmp_path / "two", 300, log=messages.append)
  assert "read 4,727 lines" in "\n".join(messages)  # 1,441 + 3,286
  assert "from 2 file(s)" in "\n".join(messages)


def test_glob_matching_nothing_is_an_error_naming_the_pattern(tmp_path, capsys):
  pattern = str(tmp_path / "missing" / "*.txt")
  with pytest.raises(FileNotFoundError, match=r"pattern .*missing/\*\.txt.* matches no file"):
    train_sentencepiece(pattern, tmp_path / "spm", 300)
  assert main(["--input", pattern, "--model_prefix", str(tmp_path / "spm")]) == 1
  assert pattern in capsys.readouterr().err
  assert not (tmp_path / "spm.model").exists()


def test_real_data_too_large_vocab_names_the_flag_and_keeps_the_old_model(shared_data,
                                                                          tmp_path):
  blake = _gutenberg(shared_data, "blake-poems.txt")
  model_file = train_sentencepiece(blake, tmp_path / "spm", 300, log=lambda message: None)
  before = open(model_file, "rb").read()
  with pytest.raises(ValueError, match=r"--vocab_size 50000 .*blake-poems\.txt"):
    train_sentencepiece(blake, tmp_path / "spm", 50000, log=lambda message: None)
  assert open(model_file, "rb").read() == before
  assert sorted(os.listdir(tmp_path)) == ["spm.model", "spm.vocab"]


def test_input_that_is_not_utf8_is_an_error_naming_the_file(tmp_path):
  corpus = tmp_path / "latin1.txt"
  # Valid lines first, so the bad byte is met while SentencePiece is already reading.
  corpus.write_bytes(b"the cat sat on the mat\n" * 2000 + "caf\u00e9\n".encode("latin-1"))
  with pytest.raises(ValueError, match=r"latin1\.txt.* not valid utf-8"):
    train_sentencepiece(corpus, tmp_path / "spm", 300, log=lambda message: None)
