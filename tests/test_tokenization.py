"""Tests for albert_tf.tokenization: SentencePiece and WordPiece modes, and pair packing.

Tests whose names contain "real_data" read ../shared/data (ALBERT's spiece.model, the albert_zh
vocab, SST-2, Gutenberg); the others build a tiny vocab in a temporary folder.
"""

import pytest

from albert_tf.tokenization import (FullTokenizer, encode_pair, encode_pieces,
                  preprocess_text, truncate_seq_pair)
from conftest import SHARED_DATA
from reference_tokenization import ReferenceTokenizer, real_texts_with_latex_quotes

DATA = SHARED_DATA
SPM_MODEL = DATA / "sentencepiece" / "spiece.model"
ZH_VOCAB = DATA / "chinese" / "albert_zh" / "vocab.txt"
ZH_NEWS = DATA / "chinese" / "albert_zh" / "news_zh_1.txt"
SST2_DEV = DATA / "glue" / "SST-2" / "dev.tsv"
EMMA = DATA / "corpus_en" / "nltk_gutenberg" / "austen-emma.txt"

# Ids are line numbers: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 a=5 b=6 c=7 d=8 e=9 f=10 g=11.
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "f", "g",
       "play", "##ing", "##s", "##a", ",", "cafe", "南"]


def _need(path):
  if not path.exists():
    # Never skip: CI has ../shared/data, and a silent skip would hide a broken tokenizer.
    raise FileNotFoundError(f"real test data not found: {path}")
  return path


def _is_cjk(char):
  return 0x4E00 <= ord(char) <= 0x9FFF


@pytest.fixture(scope="module")
def spm_tok():
  return FullTokenizer(spm_model_file=_need(SPM_MODEL), do_lower_case=True)


@pytest.fixture(scope="module")
def spm_tok_cased():
  return FullTokenizer(spm_model_file=_need(SPM_MODEL), do_lower_case=False)


@pytest.fixture(scope="module")
def zh_tok():
  return FullTokenizer(vocab_file=_need(ZH_VOCAB), do_lower_case=True)


@pytest.fixture(scope="module")
def tiny_vocab_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def tiny_tok(tiny_vocab_file):
  return FullTokenizer(vocab_file=tiny_vocab_file, do_lower_case=True)


# --- preprocess_text ---------------------------------------------------------------------------


def test_preprocess_text_collapses_whitespace_and_strips():
  assert preprocess_text("  a \t b\n\n c  ") == "a b c"


def test_preprocess_text_keeps_latex_quotes_as_the_original_does():
  # XLNet and Hugging Face turn them into '"'; ALBERT's own preprocess_text does not.
  assert preprocess_text("``quoted''  ''") == "``quoted'' ''"


def test_preprocess_text_drops_accents_and_applies_nfkd():
  assert preprocess_text("Café naïve") == "Cafe naive"
  assert preprocess_text("\ufb01ne \uff21") == "fine A"  # ligature and full-width letter


def test_preprocess_text_lowercases_only_when_asked():
  assert preprocess_text("Hello World") == "Hello World"
  assert preprocess_text("Hello World", lower=True) == "hello world"


def test_preprocess_text_accepts_utf8_bytes():
  assert preprocess_text("Café".encode("utf-8"), lower=True) == "cafe"


# --- SentencePiece mode -----------------------------------------------------------------------


def test_real_data_spm_special_ids_come_from_the_model(spm_tok):
  assert (spm_tok.pad_id, spm_tok.unk_id, spm_tok.cls_id, spm_tok.sep_id, spm_tok.mask_id) == (
    0, 1, 2, 3, 4)
  assert spm_tok.convert_ids_to_tokens(range(5)) == ["<pad>", "<unk>", "[CLS]", "[SEP]",
                            "[MASK]"]
  assert spm_tok.vocab_size == 30000
  assert len(spm_tok.vocab) == 30000 and spm_tok.vocab["[MASK]"] == 4


def test_real_data_spm_lowercased_sentence_gives_whole_word_pieces(spm_tok):
  pieces = spm_tok.tokenize("Hello   World")
  assert pieces == ["▁hello", "▁world"]
  ids = spm_tok.convert_tokens_to_ids(pieces)
  assert ids == [spm_tok.sp_model.piece_to_id(p) for p in pieces]
  assert all(i > 4 for i in ids)
  assert spm_tok.convert_ids_to_tokens(ids) == pieces


def test_real_data_spm_accepts_bytes_and_strips_accents(spm_tok):
  assert spm_tok.tokenize("Café naïve".encode("utf-8")) == ["▁cafe", "▁naive"]


def test_real_data_spm_splits_trailing_comma_after_digit(spm_tok):
  # The raw model glues the comma to the number; the original's encode step splits it off.
  assert "▁1990," in spm_tok.sp_model.encode_as_pieces("in 1990, the")
  assert spm_tok.tokenize("In 1990, the") == ["▁in", "▁1990", ",", "▁the"]
  pieces = spm_tok.tokenize("the years 2,3, and 5,000, ok")
  assert not any(len(p) > 1 and p.endswith(",") and p[-2].isdigit() for p in pieces)
  assert pieces[:6] == ["▁the", "▁years", "▁2", ",", "3", ","]
  assert pieces[-4:] == ["▁and", "▁5,000", ",", "▁ok"]


class _StubSpm:
  """Maps text to fixed pieces, to reach the branch ALBERT's model never takes."""

  def __init__(self, table):
    self.table = table

  def encode_as_pieces(self, text):
    return list(self.table[text])


def test_encode_pieces_drops_dummy_prefix_when_comma_piece_is_inside_a_word():
  stub = _StubSpm({
    "ab12, x": ["▁ab", "12,", "▁x"],
    "12": ["▁12"],  # re-encoding adds spm's dummy "▁"; it must go
    "cd34,": ["▁cd", "34,"],
    "34": ["▁", "34"],  # a lone "▁" piece is dropped
    "in 1990,": ["▁in", "▁1990,"],
    "1990": ["▁19", "90"],  # word start keeps its "▁"
  })
  assert encode_pieces(stub, "ab12, x") == ["▁ab", "12", ",", "▁x"]
  assert encode_pieces(stub, "cd34,") == ["▁cd", "34", ","]
  assert encode_pieces(stub, "in 1990,") == ["▁in", "▁19", "90", ","]


def test_real_data_spm_do_lower_case_false_keeps_case(spm_tok, spm_tok_cased):
  cased = spm_tok_cased.tokenize("Hello World")
  assert cased != spm_tok.tokenize("Hello World")
  assert "H" in cased and "W" in cased  # the model has no "▁Hello": it does not case-fold
  assert spm_tok_cased.convert_tokens_to_ids(cased) != spm_tok.convert_tokens_to_ids(
    spm_tok.tokenize("Hello World"))
  assert spm_tok_cased.tokenize("hello world") == ["▁hello", "▁world"]
  # The named constructor: SentencePiece, its case as asked (lowercasing by default).
  assert FullTokenizer.from_spm(SPM_MODEL, do_lower_case=False).tokenize("Hello World") == cased
  assert FullTokenizer.from_spm(SPM_MODEL).tokenize("Hello World") == ["▁hello", "▁world"]
  assert (spm_tok.spm_model_file, spm_tok.vocab_file) == (str(SPM_MODEL), None)


def test_real_data_spm_round_trip_over_sst2_and_gutenberg_has_few_unknowns(spm_tok):
  sst2 = SST2_DEV.read_text(encoding="utf-8").splitlines()[1:201]
  lines = [line.split("\t")[0] for line in sst2]
  emma = _need(EMMA).read_text(encoding="utf-8").splitlines()
  lines += [line for line in emma if line.strip()][:200]
  assert len(lines) == 400
  total = unknown = 0
  for line in lines:
    pieces = spm_tok.tokenize(line)
    ids = spm_tok.convert_tokens_to_ids(pieces)
    back = spm_tok.convert_ids_to_tokens(ids)
    for piece, again, i in zip(pieces, back, ids):
      # spm returns a character it lacks (SST-2's "`") as a piece with the <unk> id.
      assert again == piece or (i == spm_tok.unk_id and again == "<unk>")
    # Pieces spell out the normalised text: nothing dropped or invented.
    assert "".join(pieces).replace("▁", " ").strip() == preprocess_text(line, lower=True)
    total += len(ids)
    unknown += ids.count(spm_tok.unk_id)
  assert total > 5000
  assert unknown / total < 0.01


def test_real_data_spm_is_word_start_follows_the_original_rule(spm_tok):
  starts = {"▁the": True, "<unk>": True, ",": True, "'": True, "ing": False, "ello": False,
       "12": True, "é": True, "ABC": False, "?'": True, "-": True, "a-b": False}
  assert {p: spm_tok.is_word_start(p) for p in starts} == starts
  pieces = spm_tok.tokenize("it's unbelievable")
  assert pieces == ["▁it", "'", "s", "▁un", "be", "liev", "able"]
  assert [spm_tok.is_word_start(p) for p in pieces] == [True, True, False, True, False, False,
                             False]


# --- WordPiece mode ---------------------------------------------------------------------------


def test_real_data_wordpiece_special_ids_of_albert_zh(zh_tok):
  assert zh_tok.vocab_size == 21128
  assert (zh_tok.pad_id, zh_tok.unk_id, zh_tok.cls_id, zh_tok.sep_id, zh_tok.mask_id) == (
    0, 100, 101, 102, 103)


def test_real_data_wordpiece_splits_every_cjk_char_and_ids_round_trip(zh_tok):
  lines = [line for line in _need(ZH_NEWS).read_text(encoding="utf-8").splitlines()
       if line.strip()]
  sample = lines[::3]
  checked = total = unknown = 0
  for line in sample:
    tokens = zh_tok.tokenize(line)
    ids = zh_tok.convert_tokens_to_ids(tokens)
    assert zh_tok.convert_ids_to_tokens(ids) == tokens
    assert all(len(t) == 1 for t in tokens if any(_is_cjk(c) for c in t))
    total += len(tokens)
    unknown += tokens.count("[UNK]")
    if "[UNK]" not in tokens:
      assert [t for t in tokens if _is_cjk(t[0])] == [c for c in line if _is_cjk(c)]
      checked += 1
  assert checked > len(sample) // 2
  # albert_zh's vocab lacks curly quotes (“ ” ‘ ’) and a few rare characters.
  assert unknown / total < 0.03


def test_real_data_wordpiece_continues_long_words_with_hashes(zh_tok):
  tokens = zh_tok.tokenize("Playable")
  assert tokens == ["play", "##able"]
  assert [zh_tok.is_word_start(t) for t in tokens] == [True, False]


def test_real_data_wordpiece_lowercases_and_strips_accents(zh_tok):
  assert zh_tok.tokenize("HELLO Café") == ["hello", "cafe"]
  cased = FullTokenizer(vocab_file=ZH_VOCAB, do_lower_case=False)
  assert cased.tokenize("HELLO Café") != ["hello", "cafe"]
  assert cased.tokenize("hello") == ["hello"]


def test_wordpiece_unknown_word_becomes_one_unk(tiny_tok):
  # "ab" has no "##b" piece, "xyz" has no pieces at all: each whole word is one [UNK].
  assert tiny_tok.tokenize("ab xyz cafe") == ["[UNK]", "[UNK]", "cafe"]
  assert tiny_tok.convert_tokens_to_ids(["[UNK]", "cafe"]) == [1, 17]


def test_wordpiece_greedy_longest_match_with_continuation(tiny_tok):
  assert tiny_tok.tokenize("playings plays aaa") == ["play", "##ing", "##s", "play", "##s",
                            "a", "##a", "##a"]


def test_wordpiece_words_over_200_chars_are_unk(tiny_tok):
  assert tiny_tok.tokenize("a" * 200) == ["a"] + ["##a"] * 199
  assert tiny_tok.tokenize("a" * 201) == ["[UNK]"]


def test_wordpiece_basic_tokenizer_cleans_and_splits(tiny_tok):
  # Control chars, NUL and U+FFFD vanish; punctuation and CJK chars become their own words.
  assert tiny_tok.tokenize("a\x00 b\ufffd c\x07 c,d\u3000南e") == ["a", "b", "c", "c", ",", "d",
                                    "南", "e"]
  assert tiny_tok.tokenize("A,B") == ["a", ",", "b"]


def test_wordpiece_do_lower_case_false_keeps_uppercase(tiny_vocab_file):
  cased = FullTokenizer(vocab_file=tiny_vocab_file, do_lower_case=False)
  assert cased.tokenize("A a Café") == ["[UNK]", "a", "[UNK]"]
  # The named constructors: WordPiece from a vocab, its case as asked (lowercasing by default).
  for tokenizer, pieces in ((FullTokenizer.from_vocab(tiny_vocab_file, do_lower_case=False),
                             ["[UNK]", "a", "[UNK]"]),
                            (FullTokenizer.from_vocab(tiny_vocab_file), ["a", "a", "cafe"])):
    assert not tokenizer.is_spm and tokenizer.tokenize("A a Café") == pieces


def test_wordpiece_ids_are_line_numbers_and_duplicates_keep_the_first(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\nx\ny\nx\n", encoding="utf-8")
  tok = FullTokenizer(vocab_file=path)
  assert tok.vocab_size == 5
  assert tok.vocab == {"[PAD]": 0, "[UNK]": 1, "x": 2, "y": 3}
  assert tok.convert_ids_to_tokens([4, 3]) == ["x", "y"]
  assert tok.convert_tokens_to_ids(["x", "zzz"]) == [2, 1]
  for bad in (5, -1):
    with pytest.raises(IndexError, match=rf"^token id {bad} is outside the vocabulary \[0, 5\)$"):
      tok.convert_ids_to_tokens([bad])
  # The files it was made from, for exports that copy them; lowercasing by default.
  assert (tok.vocab_file, tok.spm_model_file, tok.do_lower_case) == (str(path), None, True)


def test_wordpiece_is_word_start_is_not_hashes(tiny_tok):
  assert [tiny_tok.is_word_start(t) for t in ["play", "##ing", "南", ","]] == [True, False,
                                         True, True]


# --- Packing ----------------------------------------------------------------------------------


def test_truncate_seq_pair_pops_from_the_longer_and_b_on_ties():
  a, b = list("abcde"), list("fg")
  assert truncate_seq_pair(a, b, 5) is None
  assert (a, b) == (list("abc"), list("fg"))
  a, b = list("ab"), list("cd")
  truncate_seq_pair(a, b, 3)
  assert (a, b) == (list("ab"), list("c"))
  truncate_seq_pair(a, b, 0)
  assert (a, b) == ([], [])
  with pytest.raises(ValueError, match=r"^max_num_tokens must be >= 0, got -1$"):
    truncate_seq_pair(a, b, -1)


def test_encode_pair_packs_to_the_originals_default_of_128(tiny_tok):
  packed = encode_pair(tiny_tok, "a", "b")
  assert {len(packed[k]) for k in ("input_ids", "input_mask", "segment_ids")} == {128}


def test_encode_pair_packs_two_segments_with_padding(tiny_tok):
  features = encode_pair(tiny_tok, "a b", "c", max_seq_length=8)
  assert features == {
    "tokens": ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"],
    "input_ids": [2, 5, 6, 3, 7, 3, 0, 0],
    "input_mask": [1, 1, 1, 1, 1, 1, 0, 0],
    "segment_ids": [0, 0, 0, 0, 1, 1, 0, 0],
  }


def test_encode_pair_single_segment_truncates_to_max_minus_two(tiny_tok):
  features = encode_pair(tiny_tok, "a b c d e", max_seq_length=5)
  assert features["tokens"] == ["[CLS]", "a", "b", "c", "[SEP]"]
  assert features["input_ids"] == [2, 5, 6, 7, 3]
  assert features["input_mask"] == [1] * 5 and features["segment_ids"] == [0] * 5
  empty_b = encode_pair(tiny_tok, "a", "", max_seq_length=4)  # as the original's `if text_b`
  assert empty_b["tokens"] == ["[CLS]", "a", "[SEP]"]
  assert empty_b["segment_ids"] == [0, 0, 0, 0]


def test_encode_pair_truncates_the_longer_segment_to_max_minus_three(tiny_tok):
  features = encode_pair(tiny_tok, "a b c d e", "f g", max_seq_length=8)
  assert features["tokens"] == ["[CLS]", "a", "b", "c", "[SEP]", "f", "g", "[SEP]"]
  assert features["input_ids"] == [2, 5, 6, 7, 3, 10, 11, 3]
  assert features["segment_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]
  assert features["input_mask"] == [1] * 8


def test_encode_pair_rejects_max_seq_length_too_small_for_specials(tiny_tok):
  with pytest.raises(ValueError, match=r"^max_seq_length must be >= 3 to hold the special "
                                       r"tokens of a pair, got 2$"):
    encode_pair(tiny_tok, "a", "b", max_seq_length=2)
  with pytest.raises(ValueError, match=r"^max_seq_length must be >= 2 to hold the special "
                                       r"tokens of one segment, got 1$"):
    encode_pair(tiny_tok, "a", max_seq_length=1)
  assert encode_pair(tiny_tok, "a", max_seq_length=2)["tokens"] == ["[CLS]", "[SEP]"]
  assert encode_pair(tiny_tok, "a", "b", max_seq_length=3)["tokens"] == ["[CLS]", "[SEP]",
                                      "[SEP]"]


def test_real_data_encode_pair_with_spm_uses_model_ids(spm_tok):
  features = encode_pair(spm_tok, "Hello world", "In 1990, the", max_seq_length=12)
  assert features["tokens"] == ["[CLS]", "▁hello", "▁world", "[SEP]", "▁in", "▁1990", ",",
                 "▁the", "[SEP]"]
  assert features["input_ids"] == [2, 10975, 126, 3, 19, 961, 15, 14, 3, 0, 0, 0]
  assert features["segment_ids"] == [0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0]
  assert features["input_mask"] == [1] * 9 + [0] * 3


# --- Construction errors ----------------------------------------------------------------------


def test_missing_spm_model_file_names_path_and_argument(tmp_path):
  missing = tmp_path / "nope.model"
  with pytest.raises(FileNotFoundError, match=r"^spm_model_file not found: '.*nope\.model'$"):
    FullTokenizer(spm_model_file=missing)


def test_missing_vocab_file_names_path_and_argument(tmp_path):
  missing = tmp_path / "nope.txt"
  with pytest.raises(FileNotFoundError, match=r"^vocab_file not found: '.*nope\.txt'$"):
    FullTokenizer(vocab_file=missing)


def test_text_that_is_neither_str_nor_bytes_is_refused_naming_its_type(tiny_tok):
  with pytest.raises(TypeError, match=r"^expected str or bytes, got int$"):
    tiny_tok.tokenize(3)


def test_a_special_token_missing_from_the_vocab_is_an_error_naming_the_file(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\na\n", encoding="utf-8")
  tok = FullTokenizer(vocab_file=path)
  assert (tok.pad_id, tok.unk_id) == (0, 1)
  with pytest.raises(KeyError, match=r"special token '\[CLS\]' is not in '.*vocab\.txt'"):
    tok.cls_id  # pylint: disable=pointless-statement


def test_no_file_at_all_is_an_error():
  with pytest.raises(ValueError, match=r"^FullTokenizer needs spm_model_file \(SentencePiece\) "
                                       r"or vocab_file \(WordPiece\); both are None$"):
    FullTokenizer()


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_vocab_file_is_an_error_naming_it(tmp_path, content):
  path = tmp_path / "empty_vocab.txt"
  path.write_bytes(content)
  with pytest.raises(ValueError, match="empty_vocab.txt.*empty"):
    FullTokenizer(vocab_file=path)


def test_malformed_vocab_files_are_errors_naming_them(tmp_path):
  latin1 = tmp_path / "latin1_vocab.txt"
  latin1.write_bytes("[UNK]\ncaf\xe9\n".encode("latin-1"))
  with pytest.raises(ValueError, match="latin1_vocab.txt.*utf-8"):
    FullTokenizer(vocab_file=latin1)
  no_unk = tmp_path / "no_unk_vocab.txt"
  no_unk.write_text("[PAD]\na\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"^vocab_file '.*no_unk_vocab\.txt' has no \[UNK\] token, "
                                       r"which WordPiece needs for words it cannot split$"):
    FullTokenizer(vocab_file=no_unk)


def test_file_that_is_not_a_sentencepiece_model_is_an_error_naming_it(tmp_path):
  bogus = tmp_path / "bogus.model"
  bogus.write_bytes(b"this is not a protobuf")
  with pytest.raises(ValueError, match="bogus.model"):
    FullTokenizer(spm_model_file=bogus)


def test_real_data_spm_mode_ignores_vocab_file(tmp_path):
  tok = FullTokenizer(vocab_file=tmp_path / "absent.txt", spm_model_file=_need(SPM_MODEL))
  assert tok.is_spm and tok.vocab_size == 30000


def test_spm_ids_equal_the_original_rules_on_real_data_latex_quote_lines(spm_tok):
  reference = ReferenceTokenizer(_need(SPM_MODEL), do_lower_case=True)
  texts = real_texts_with_latex_quotes(DATA) + ["in 1990, (1990, a1990, 2,000, x1,"]
  assert len(texts) > 300
  expected = [reference.encode_ids(t) for t in texts]
  differ = [t for t, e, got in zip(texts, expected, spm_tok.encode_ids(texts)) if e != got]
  assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {differ[:3]}"
  assert spm_tok.tokenize("said ``hi''")[-4:] == ["``", "hi", "'", "'"]


def test_encode_ids_batch_equals_per_text_tokenization_real_data(spm_tok):
  lines = [l for l in _need(EMMA).read_text(encoding="latin-1").splitlines()[:3000]]
  lines += ["In 1990, the 2,000 men; a1, b2,c3,", "Crème brûlée  costs £5,50 in ``Paris''"]
  expected = [spm_tok.convert_tokens_to_ids(spm_tok.tokenize(l)) for l in lines]
  assert spm_tok.encode_ids(lines) == expected
