"""The Python tokenizer (tokenization/tokenizer.py) against references that are not ours, on
more than its unit tests reach: BERT's own tokenizer (`official.nlp.tools.tokenization`, from
tf-models-official) for the basic tokenizer and WordPiece, and the original ALBERT's
SentencePiece rules (reference_tokenization.py) for `preprocess_text` and the digit-comma split.
Random Unicode strings holding the hard cases, and real lines; a few seconds, so tools/mutation.py
runs them on every mutant of the tokenizer.

Every test reads ../shared/data (ALBERT's spiece.model, albert_zh's vocab.txt, GLUE, the albert_zh
news lines).
"""

import pytest
from official.nlp.tools import tokenization as bert_tokenization

from albert_tf.tokenization import FullTokenizer, preprocess_text
from albert_tf.tokenization.tokenizer import (is_cjk_char, is_control, is_digit_comma_piece,
                                              is_dropped, is_punctuation, is_whitespace,
                                              load_vocab)
from conftest import SHARED_DATA
from reference_tokenization import ReferenceTokenizer, random_unicode_texts
from reference_tokenization import preprocess_text as reference_preprocess

SPM_MODEL = SHARED_DATA / "sentencepiece" / "spiece.model"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"


def real_lines():
  """English GLUE sentences (digits with commas among them) and albert_zh's Chinese news."""
  lines = []
  for name, column in (("SST-2/dev.tsv", 0), ("STS-B/dev.tsv", 7), ("QNLI/dev.tsv", 2)):
    rows = (SHARED_DATA / "glue" / name).read_text(encoding="utf-8").splitlines()[1:400]
    lines.extend(row.split("\t")[column] for row in rows)
  news = (SHARED_DATA / "chinese" / "albert_zh" / "news_zh_1.txt").read_text(encoding="utf-8")
  return lines + news.splitlines()[:400]


def hard_words():
  """WordPiece's edge cases: a word of 200 and one of 201 characters, words only split with
  "##" pieces, accents and case, punctuation runs, control and replacement characters."""
  return ["a" * 200, "a" * 201, "unaffable playing", "Héllo WORLD", "naïve café", "...!?",
          "x\x00y\ufffdz\x1c", "tab\there\nand\rthere", "中文和English混合", "ＡＢＣ１２３",
          "\u2028line\u00a0break\u3000", "don't", "1,000,000 people", "C++/C#"]


@pytest.mark.parametrize("lower", [True, False])
def test_wordpiece_tokens_and_ids_are_berts(lower):
  ours = FullTokenizer(vocab_file=ZH_VOCAB, do_lower_case=lower)
  bert = bert_tokenization.FullTokenizer(str(ZH_VOCAB), do_lower_case=lower)
  # tf-models-official's copy raised the longest word to 400 characters; google-research/bert's
  # and the original ALBERT's WordpieceTokenizer make a word of more than 200 one [UNK].
  assert bert.wordpiece_tokenizer.max_input_chars_per_word == 400
  bert.wordpiece_tokenizer.max_input_chars_per_word = 200
  texts = random_unicode_texts(3000, seed=10 + int(lower)) + real_lines() + hard_words()
  differ = [t for t in texts if ours.tokenize(t) != bert.tokenize(t)]
  assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {ascii(differ[:3])}"
  assert ours.encode_ids(texts) == [bert.convert_tokens_to_ids(bert.tokenize(t)) for t in texts]
  some = ours.encode_ids(real_lines()[:50])
  assert [ours.convert_ids_to_tokens(ids) for ids in some] == [
      bert.convert_ids_to_tokens(ids) for ids in some]
  assert ours.vocab == bert.vocab and ours.vocab_size == len(bert.vocab)


@pytest.mark.parametrize("lower", [True, False])
def test_sentencepiece_pieces_and_ids_follow_the_originals_rules(lower):
  ours = FullTokenizer(spm_model_file=SPM_MODEL, do_lower_case=lower)
  reference = ReferenceTokenizer(SPM_MODEL, do_lower_case=lower)
  texts = random_unicode_texts(3000, seed=20 + int(lower)) + real_lines() + hard_words() + [
      "In 1990, 2,000 people", "x1,", "ab12,cd", "7,", "a,1,", "  spaced   out  "]
  differ = [t for t in texts
            if preprocess_text(t, lower=lower) != reference_preprocess(t, lower)
            or ours.tokenize(t) != reference.tokenize(t)]
  assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {ascii(differ[:3])}"
  assert ours.encode_ids(texts) == [reference.encode_ids(t) for t in texts]
  assert [t.encode("utf-8") for t in texts[:100]] and all(
      ours.tokenize(t.encode("utf-8")) == ours.tokenize(t) for t in texts[:100])


def test_character_classes_are_berts_at_every_code_point():
  """BERT's whitespace, control, punctuation and CJK classes decide basic_tokenize; some of
  their cases (a tab is whitespace and not control) would not show in the tokens, since
  `str.split` splits at a tab either way."""
  bert = bert_tokenization.BasicTokenizer()
  differ = []
  for cp in range(0x110000):
    char = chr(cp)
    ours = (is_whitespace(char), is_control(char), is_punctuation(char), is_cjk_char(cp),
            is_dropped(char))
    # pylint: disable=protected-access
    theirs = (bert_tokenization._is_whitespace(char), bert_tokenization._is_control(char),
              bert_tokenization._is_punctuation(char), bert._is_chinese_char(cp),
              bert._clean_text(char) == "")  # cleaning alone: a dropped character leaves ""
    if ours != theirs:
      differ.append(hex(cp))
  assert not differ, f"{len(differ)} code points differ, e.g. {differ[:5]}"


def test_a_digit_comma_piece_is_any_piece_of_two_characters_or_more():
  """The original splits a piece longer than one character ending in a digit and ",": the
  model's own pieces decide which occur, so the rule is stated on pieces directly."""
  assert [is_digit_comma_piece(p) for p in ("1,", "\u25811,", "ab7,", ",", "1", "a,", "12")] == [
      True, True, True, False, False, False, False]


def test_a_vocab_file_with_a_byte_order_mark_reads_its_first_token_plain(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_bytes("[PAD]\n[UNK]\nhello\n".encode("utf-8-sig"))
  assert load_vocab(path) == ({"[PAD]": 0, "[UNK]": 1, "hello": 2}, ["[PAD]", "[UNK]", "hello"])
