"""Tests for albert_tf.tokenization.in_graph: the tokenizer and packing as TensorFlow ops.

The bar is the Python tokenizer, literally: ids equal to `FullTokenizer.encode_ids` on every
line of the real corpora (the `test_parity_*` tests: SentencePiece lowercased and cased, with
the digit-comma split; WordPiece lowercased), packing equal to `encode_pair`. On the largest
runs both are held to independent references as well: the original ALBERT's SentencePiece
rules (reference_tokenization.py) and BERT's own WordPiece tokenizer
(`official.nlp.tools.tokenization`, from tf-models-official). Tests whose
names contain "real_data" read ../shared/data; the others build a tiny vocab in a temporary
folder. The tokenizers are conftest.py's session fixtures, shared with
test_preprocessing_graph.py.
"""

import random
import re

import pytest
import tensorflow as tf
from official.nlp.tools import tokenization as bert_tokenization

from albert_tf.tokenization import FullTokenizer, preprocess_text
from albert_tf.tokenization.in_graph import InGraphTokenizer, pack_inputs
from albert_tf.tokenization.tokenizer import basic_tokenize
from in_graph_support import a_words, encode, graph_packed, python_packed, spm_model
from reference_tokenization import (ReferenceTokenizer, random_unicode_texts,
                                     real_texts_with_latex_quotes)
from reference_tokenization import preprocess_text as reference_preprocess

BATCH = 4096


def _read_lines(path):
  """Lines of a real corpus file: utf-8 where it decodes, else Latin-1 (shakespeare-caesar)."""
  data = path.read_bytes()
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError:
    text = data.decode("latin-1")
  return text.split("\n")  # keeps "\r" of CRLF files: the tokenizers must drop it alike


def _tsv_columns(path, columns, header):
  rows = [line.split("\t") for line in _read_lines(path)[1 if header else 0:] if line]
  return [row[c] for row in rows for c in columns]


def _english_corpora(shared_data):
  corpus_en, glue = shared_data / "corpus_en", shared_data / "glue"
  corpora = {}
  for path in sorted((corpus_en / "nltk_gutenberg").glob("*.txt")):
    corpora[f"gutenberg/{path.name}"] = _read_lines(path)
  corpora["wikitext-2/valid.txt"] = _read_lines(corpus_en / "wikitext-2" / "valid.txt")
  corpora["hf_wiki_text/wiki_00"] = _read_lines(corpus_en / "hf_wiki_text" / "wiki_00")
  corpora["SST-2/dev"] = _tsv_columns(glue / "SST-2" / "dev.tsv", [0], header=True)
  corpora["CoLA/dev"] = (_tsv_columns(glue / "CoLA" / "in_domain_dev.tsv", [3], header=False)
                         + _tsv_columns(glue / "CoLA" / "out_of_domain_dev.tsv", [3],
                                        header=False))
  corpora["STS-B/dev"] = _tsv_columns(glue / "STS-B" / "dev.tsv", [7, 8], header=True)
  corpora["QNLI/dev"] = _tsv_columns(glue / "QNLI" / "dev.tsv", [1, 2], header=True)
  return corpora


def _graph_ids(tokenizer, texts):
  ids = []
  for start in range(0, len(texts), BATCH):
    batch = [t.encode("utf-8") for t in texts[start:start + BATCH]]
    ids.extend(tokenizer.tokenize(tf.constant(batch, tf.string)).to_list())
  return ids


def _compare_corpora(graph, python, corpora, reference=None):
  """Per corpus: (lines compared, lines whose ids differ, first difference). With `reference`
  (text -> ids, an independent statement of the original's rules), a line differs also where
  the Python tokenizer's ids are not the reference's."""
  report = {}
  for name, lines in corpora.items():
    expected = python.encode_ids(lines)
    got = _graph_ids(graph, lines)
    original = [reference(line) for line in lines] if reference else expected
    differ = [i for i, (e, g, o) in enumerate(zip(expected, got, original)) if not e == g == o]
    first = None
    if differ:
      i = differ[0]
      first = (lines[i][:80], expected[i][:12], got[i][:12], original[i][:12])
    report[name] = (len(lines), len(differ), first)
  return report


def _describe(report):
  total = sum(n for n, _, _ in report.values())
  lines = [f"{name}: {n} lines, {bad} differ" + (f", first {first}" if first else "")
           for name, (n, bad, first) in report.items()]
  return f"{total} lines compared\n" + "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Parity with FullTokenizer on the real corpora.


def test_parity_spm_ids_equal_encode_ids_and_the_original_rules_on_every_real_data_english_line(
    spm_graph, spm_python, shared_data):
  corpora = _english_corpora(shared_data)
  reference = ReferenceTokenizer(spm_model(shared_data), do_lower_case=True)
  report = _compare_corpora(spm_graph, spm_python, corpora, reference=reference.encode_ids)
  message = _describe(report)
  print(message)
  assert all(bad == 0 for _, bad, _ in report.values()), message
  assert sum(n for n, _, _ in report.values()) > 145_000, message
  # The digit-comma split is exercised: over 1,000 lines have a digit before "," (the lines
  # `encode_ids` re-encodes with `encode_pieces`: "▁1990," -> "▁1990", ",").
  assert sum(bool(re.search(r"\d,", line)) for lines in corpora.values() for line in lines) > 1000


def test_parity_spm_cased_ids_equal_encode_ids_on_a_real_data_sample(shared_data):
  graph = InGraphTokenizer(spm_model_file=spm_model(shared_data), do_lower_case=False)
  python = FullTokenizer(spm_model_file=spm_model(shared_data), do_lower_case=False)
  sample = {name: lines[::5] for name, lines in _english_corpora(shared_data).items()}
  report = _compare_corpora(graph, python, sample)
  message = _describe(report)
  print(message)
  assert all(bad == 0 for _, bad, _ in report.values()), message
  assert sum(n for n, _, _ in report.values()) > 29_000, message


def test_parity_wordpiece_ids_equal_encode_ids_and_berts_on_every_real_data_chinese_line(
    shared_data):
  vocab_file = shared_data / "chinese" / "albert_zh" / "vocab.txt"
  graph = InGraphTokenizer(vocab_file=vocab_file, do_lower_case=True)
  python = FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
  bert = bert_tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  corpora = {path.name: _read_lines(path) for path in
             sorted((shared_data / "chinese" / "uer_clue_corpus_small").glob("*.txt"))}
  corpora["news_zh_1.txt"] = _read_lines(shared_data / "chinese" / "albert_zh" / "news_zh_1.txt")
  report = _compare_corpora(graph, python, corpora,
                            reference=lambda line: bert.convert_tokens_to_ids(bert.tokenize(line)))
  message = _describe(report)
  print(message)
  assert all(bad == 0 for _, bad, _ in report.values()), message
  assert sum(n for n, _, _ in report.values()) > 20_000, message


# ---------------------------------------------------------------------------------------------
# Unicode corners, beyond what the corpora contain.


@pytest.mark.parametrize("lower", [True, False])
def test_preprocess_text_in_graph_equals_python_and_the_original_rules_on_random_unicode_real_data(
    shared_data, lower):
  graph = InGraphTokenizer(spm_model_file=spm_model(shared_data), do_lower_case=lower)
  python = FullTokenizer(spm_model_file=spm_model(shared_data), do_lower_case=lower)
  reference = ReferenceTokenizer(spm_model(shared_data), do_lower_case=lower)
  texts = random_unicode_texts(20_000, seed=int(lower))
  normalised = tf.function(graph.preprocess_text)(encode(texts)).numpy()
  differ = [(t, n.decode("utf-8")) for t, n in zip(texts, normalised)
            if not n.decode("utf-8") == preprocess_text(t, lower=lower) == reference_preprocess(
                t, lower)]
  assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {ascii(differ[:3])}"
  ids = _graph_ids(graph, texts)
  assert ids == python.encode_ids(texts)
  assert ids == [reference.encode_ids(t) for t in texts]


@pytest.mark.parametrize("lower", [True, False])
def test_basic_tokenize_in_graph_equals_python_and_berts_on_random_unicode(tiny_vocab_file, lower):
  graph = InGraphTokenizer(vocab_file=tiny_vocab_file, do_lower_case=lower)
  python = FullTokenizer(vocab_file=tiny_vocab_file, do_lower_case=lower)
  bert = bert_tokenization.BasicTokenizer(do_lower_case=lower)
  texts = random_unicode_texts(20_000, seed=2 + int(lower))
  words = tf.function(graph.basic_tokenize)(encode(texts)).to_list()
  differ = [(t, w) for t, w in zip(texts, words)
            if not [x.decode("utf-8") for x in w] == basic_tokenize(t, lower) == bert.tokenize(t)]
  assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {ascii(differ[:3])}"
  assert _graph_ids(graph, texts) == python.encode_ids(texts)


def test_final_sigma_and_canonical_reordering_follow_python(tiny_graph):
  texts = ["ΟΔΟΣ", "ΣΑΣ.", "Σ", "ΑΣ\u00adΑ", "ΑΣ\u00ad", "ΑΣ'Σ", "ϹΣ",
           "a\U0001d16d\U0001d165b",  # NFD puts class 216 before class 226
           "a\U0001d16d\u034f\U0001d165b"]  # a class-0 mark ends the reordering run
  words = tiny_graph.basic_tokenize(encode(texts)).to_list()
  assert [[w.decode("utf-8") for w in row] for row in words] == [
      basic_tokenize(t, True) for t in texts]
  assert words[0] == ["οδος".encode("utf-8")]
  assert words[7] == ["a\U0001d165\U0001d16db".encode("utf-8")]


def test_invalid_utf8_is_tokenized_as_python_decoding_with_replacement_real_data(
    spm_graph, spm_python, tiny_graph, tiny_python):
  raw = [b"caf\xe9 au lait", b"\xff\xfe", b"a\xc0\x80b", b"\xed\xa0\x80x", b"ok \xe2\x82"]
  with pytest.raises(UnicodeDecodeError):
    spm_python.tokenize(raw[0])  # the Python tokenizer refuses; the graph must not fail
  replaced = [r.decode("utf-8", errors="replace") for r in raw]
  for graph, python in ((spm_graph, spm_python), (tiny_graph, tiny_python)):
    assert graph.tokenize(tf.constant(raw)).to_list() == python.encode_ids(replaced)
  # WordPiece's cleaning drops U+FFFD; the spm model's normaliser makes it a space.
  for graph in (tiny_graph, spm_graph):
    assert graph.tokenize(tf.constant([b"\xff", b"a\xffb"])).to_list()[0] == []
  assert spm_python.convert_ids_to_tokens(
      spm_graph.tokenize(tf.constant([b"a\xffb"])).to_list()[0]) == ["▁a", "▁b"]


def test_wordpiece_word_longer_than_200_chars_is_one_unk(tiny_graph, tiny_python):
  texts = ["a" * 200, "a" * 201 + " b", "b" * 400]
  got = tiny_graph.tokenize(encode(texts)).to_list()
  assert got == tiny_python.encode_ids(texts)
  assert got[1] == [tiny_python.unk_id, tiny_python.vocab["b"]]


def test_score_ties_are_broken_as_the_python_sentencepiece_real_data(spm_graph, spm_python):
  # A QNLI sentence where "666" scores the same as "6" + "66" and "66" + "6"; tensorflow_text's
  # SentencepieceTokenizer picks the latter, the Python package (and ours) the former.
  text = ("Its population is estimated at 1.740 million residents within a greater "
          "metropolitan area of 2.666 million residents, which makes Warsaw the 9th "
          "most-populous capital city in the European Union.")
  got = spm_graph.tokenize(encode([text])).to_list()[0]
  assert got == spm_python.encode_ids([text])[0]
  pieces = spm_python.convert_ids_to_tokens(got)
  assert pieces[pieces.index("▁2") + 1:][:3] == [".", "6", "66"]


def test_digit_comma_pieces_are_split_as_encode_pieces_real_data(spm_graph, spm_python):
  texts = ["In 1990, the", "1,000, 12,3", "a1990,b x0,", "in 2010,2011, and 1990", "1990 ,"]
  got = spm_graph.tokenize(encode(texts)).to_list()
  assert got == spm_python.encode_ids(texts)
  assert spm_python.convert_ids_to_tokens(got[0]) == ["▁in", "▁1990", ",", "▁the"]


def test_spm_ids_equal_the_original_rules_on_real_data_latex_quote_lines(spm_graph,
                                                                          shared_data):
  # The original ALBERT keeps `` and '' (no '"'), unlike XLNet and Hugging Face.
  reference = ReferenceTokenizer(spm_model(shared_data), do_lower_case=True)
  texts = real_texts_with_latex_quotes(shared_data) + ["in 1990, (1990, a1990, 2,000, x1,"]
  assert len(texts) > 300
  got = _graph_ids(spm_graph, texts)
  differ = [t for t, g in zip(texts, got) if g != reference.encode_ids(t)]
  assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {differ[:3]}"


# ---------------------------------------------------------------------------------------------
# Packing.


@pytest.mark.parametrize("max_seq_length", [8, 128])
def test_pack_inputs_equals_encode_pair_for_random_lengths(tiny_graph, tiny_python,
                                                           max_seq_length):
  # Every pair of lengths around the budget (ties included), then random long ones;
  # a text_b without pieces ("" or " ") is one segment, as the original's `if tokens_b:`.
  near = range(0, max_seq_length + 5) if max_seq_length < 16 else range(58, 70)
  pairs = [(la, lb) for la in near for lb in near]
  rng = random.Random(max_seq_length)
  pairs += [(rng.randint(0, 400), rng.randint(0, 400)) for _ in range(300)]
  pairs += [(n, n) for n in range(0, 300, 7)]
  texts_a = [a_words(la) for la, _ in pairs] + ["", "a", a_words(500), " "]
  texts_b = [a_words(lb) for _, lb in pairs] + ["", "", "", " "]
  assert (graph_packed(tiny_graph, texts_a, texts_b, max_seq_length)
          == python_packed(tiny_python, texts_a, texts_b, max_seq_length))
  assert (graph_packed(tiny_graph, texts_a, None, max_seq_length)
          == python_packed(tiny_python, texts_a, None, max_seq_length))
  assert (python_packed(tiny_python, ["a", "a"], [" ", ""], max_seq_length)
          == python_packed(tiny_python, ["a", "a"], None, max_seq_length))


def test_pack_inputs_cuts_the_longer_segment_first_then_alternates_b_first(tiny_graph):
  ids_a = tiny_graph.tokenize(encode([a_words(9), a_words(3), a_words(6)]))
  ids_b = tiny_graph.tokenize(encode([a_words(2), a_words(9), a_words(6)]))
  packed = pack_inputs(ids_a, ids_b, max_seq_length=10, cls_id=2, sep_id=3)
  type_ids = packed["input_type_ids"].numpy()
  # budget 7: A 9 -> 5 with B 2; B 9 -> 4 with A 3; 6 and 6 -> A 4, B 3 (B loses first).
  assert [list(row[:10]) for row in type_ids] == [[0] * 7 + [1] * 3,
                                                  [0] * 5 + [1] * 5,
                                                  [0] * 6 + [1] * 4]


def test_pack_inputs_equals_encode_pair_on_real_data_qnli_pairs(spm_graph, spm_python,
                                                               shared_data):
  rows = _tsv_columns(shared_data / "glue" / "QNLI" / "dev.tsv", [1, 2], header=True)[:1000]
  questions, sentences = rows[0::2], rows[1::2]
  for max_seq_length in (8, 128):
    assert (graph_packed(spm_graph, questions, sentences, max_seq_length)
            == python_packed(spm_python, questions, sentences, max_seq_length))


def test_pack_inputs_rejects_a_max_seq_length_without_room_for_special_tokens(tiny_graph):
  ids = tiny_graph.tokenize(encode(["a"]))
  with pytest.raises(ValueError, match=">= 3"):
    pack_inputs(ids, ids, max_seq_length=2, cls_id=2, sep_id=3)
  with pytest.raises(ValueError, match=">= 2"):
    pack_inputs(ids, max_seq_length=1, cls_id=2, sep_id=3)
