"""create_pretraining_data --word_segmentation=jieba: Chinese words are masked whole
(SPEC.md "Chinese (albert_zh) practice"), on real CLUE text with albert_zh's vocabulary."""

import random
import re

import jieba
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.data.pretraining import chinese
from albert_tf.data.pretraining import records
from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data
from albert_tf.data.pretraining.masking import (MaskingOptions, continued_word_start,
                                                mark_continued, ngram_mask)
from conftest import SHARED_DATA

CORPUS = SHARED_DATA / "chinese" / "uer_clue_corpus_small" / "CLUECorpusSmall_bert_sampled.txt"
VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"
NUM_LINES = 300  # 36 documents, about 10,000 characters
BLOCK_BYTES = 3000  # several blocks, so two workers share the work
CHINESE_WORD = re.compile(r"^[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}$")


def zh_options(**changes):
  base = dict(vocab_file=str(VOCAB), max_seq_length=128, max_predictions_per_seq=20,
              dupe_factor=2, num_workers=1, block_bytes=BLOCK_BYTES,
              word_segmentation="jieba")
  base.update(changes)
  return CreationOptions(**base)


def read_all(path):
  dataset = tf.data.TFRecordDataset([str(path)]).map(
      lambda s: records.decode_record(s, 128, 20))
  return list(dataset.as_numpy_iterator())


@pytest.fixture(scope="module")
def zh_tokenizer():
  return tokenization.FullTokenizer(vocab_file=str(VOCAB))


@pytest.fixture(scope="module")
def clue_text(tmp_path_factory):
  path = tmp_path_factory.mktemp("clue") / "clue.txt"
  with open(CORPUS, encoding="utf-8") as f:
    path.write_text("".join(next(f) for _ in range(NUM_LINES)), encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def runs(clue_text, tmp_path_factory):
  """Records and metadata of the same text with and without segmentation."""
  out = tmp_path_factory.mktemp("zh_runs")
  results = {}
  for segmentation in ("jieba", "none"):
    shard = out / f"{segmentation}.tfrecord"
    metadata = create_pretraining_data([str(clue_text)], [str(shard)],
                                       zh_options(word_segmentation=segmentation))
    results[segmentation] = (shard, metadata)
  return results


def _oracle(path, tokenizer):
  """The text's documents as one searchable string of ids, and for each of its positions the
  multi-character Chinese word (an id, or -1) it belongs to, from jieba on each line.

  Independent of the implementation: each jieba word is tokenized alone; lines where that
  differs from tokenizing the whole line are left out of every word.
  """
  chinese.load_jieba()  # quietly
  text, word_of, word_sizes = [], [], []
  kept = checked = 0
  for document in path.read_text(encoding="utf-8").split("\n\n"):
    for line in document.splitlines():
      line_ids = tokenizer.encode_ids([line])[0]
      words = jieba.lcut(line.strip())
      per_word = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in words]
      checked += 1
      aligned = [i for ids in per_word for i in ids] == line_ids
      kept += aligned
      for word, ids in zip(words, per_word):
        word_id = -1
        if aligned and CHINESE_WORD.match(word):
          assert len(ids) == len(word)  # one piece per character
          word_id = len(word_sizes)
          word_sizes.append(len(ids))
        text.extend(chr(0x10000 + i) for i in ids)
        word_of.extend([word_id] * len(ids))
    text.append("|")  # documents do not run into each other
    word_of.append(-1)
  assert kept > 0.95 * checked
  return "".join(text), word_of, word_sizes


def _masked_words(shard, tokenizer, oracle):
  """Over all records: (multi-character words masked whole, words split by the masking,
  token_boundary mismatches with the oracle's word starts)."""
  text, word_of, word_sizes = oracle
  whole = split = boundary_errors = 0
  for example in read_all(shard):
    n = int(example["input_mask"].sum())
    p = int(example["masked_lm_weights"].sum())
    positions = [int(i) for i in example["masked_lm_positions"][:p]]
    ids = [int(i) for i in example["input_ids"][:n]]
    for position, label in zip(positions, example["masked_lm_ids"][:p]):
      ids[position] = int(label)
    first_sep = ids.index(tokenizer.sep_id)
    for lo, hi in ((1, first_sep), (first_sep + 1, n - 1)):
      needle = "".join(chr(0x10000 + i) for i in ids[lo:hi])
      at = text.find(needle)
      # Short or repeated segments could be segmented differently elsewhere: skip them.
      if hi - lo < 8 or at < 0 or text.find(needle, at + 1) >= 0:
        continue
      members = {}
      for j in range(lo, hi):
        word = word_of[at + j - lo]
        if word >= 0:
          members.setdefault(word, []).append(j)
      for word, js in members.items():
        if len(js) < word_sizes[word]:
          continue  # cut by truncation at the segment's edge
        masked = sum(j in positions for j in js)
        whole += masked == len(js)
        split += 0 < masked < len(js)
        expected = [1] + [0] * (len(js) - 1)
        boundary_errors += [int(example["token_boundary"][j]) for j in js] != expected
  return whole, split, boundary_errors


def test_encode_with_word_starts_marks_characters_after_a_chinese_words_first(zh_tokenizer):
  chinese.load_jieba()
  ids, starts = chinese.encode_with_word_starts(zh_tokenizer, "我们在北京。playing 2019", {})
  assert ids == zh_tokenizer.encode_ids(["我们在北京。playing 2019"])[0]
  pieces = zh_tokenizer.convert_ids_to_tokens(ids)
  assert pieces[:6] == ["我", "们", "在", "北", "京", "。"]
  assert starts == [True, False, True, True, False, True] + [
      not p.startswith("##") for p in pieces[6:]]


def test_real_data_segmented_ids_are_the_plain_wordpiece_ids(clue_text, zh_tokenizer):
  chinese.load_jieba()
  lines = clue_text.read_text(encoding="utf-8").splitlines()
  cache = {}
  encoded = [chinese.encode_with_word_starts(zh_tokenizer, line, cache) for line in lines]
  assert [ids for ids, _ in encoded] == zh_tokenizer.encode_ids(lines)
  assert sum(not s for _, starts in encoded for s in starts) > 2000


def test_continued_pieces_are_masked_with_their_word_and_written_plain():
  # Words [10 11 12] [13] [14 15]: 11, 12 and 15 continue a segmented word.
  vocab_size = 100
  masking = MaskingOptions(
      vocab_size=vocab_size, mask_id=4, cls_id=2, sep_id=3,
      word_start=continued_word_start([True] * vocab_size), masked_lm_prob=1.0,
      max_predictions_per_seq=3, ngram=1, continued_pieces=True)
  ids = [2] + mark_continued([10, 11, 12, 13, 14, 15], [1, 0, 0, 1, 1, 0], vocab_size) + [3]
  seen = set()
  for seed in range(50):
    output, positions, labels, boundary = ngram_mask(ids, random.Random(seed), masking)
    assert all(i < vocab_size for i in output + labels)
    assert [ids[p] % vocab_size for p in positions] == labels
    assert boundary == [1, 1, 0, 0, 1, 1, 0, 1]
    seen.add(tuple(positions))
  # A budget of 3 takes [10 11 12], or [13] then [14 15] (whichever order).
  assert seen == {(1, 2, 3), (4, 5, 6)}


def test_real_data_jieba_words_are_masked_whole_and_unsegmented_runs_split_them(
    runs, clue_text, zh_tokenizer):
  oracle = _oracle(clue_text, zh_tokenizer)
  whole, split, boundary_errors = _masked_words(runs["jieba"][0], zh_tokenizer, oracle)
  assert split == 0 and boundary_errors == 0 and whole > 500
  # Without segmentation every character is its own word: the same check finds split words.
  whole, split, boundary_errors = _masked_words(runs["none"][0], zh_tokenizer, oracle)
  assert split > 500 and boundary_errors > 1000


def test_real_data_inputs_and_labels_hold_plain_character_ids(runs, zh_tokenizer):
  vocab = zh_tokenizer.vocab
  hashed_cjk = {i for t, i in vocab.items()
                if t.startswith("##") and len(t) == 3 and CHINESE_WORD.match(t[2] * 2)}
  assert len(hashed_cjk) > 5000  # albert_zh's vocab has them; they must not be used
  shard, metadata = runs["jieba"]
  examples = read_all(shard)
  assert len(examples) == metadata["total_instances"] > 150
  for example in examples:
    p = int(example["masked_lm_weights"].sum())
    masked = set(example["masked_lm_positions"][:p])
    labels = set(example["masked_lm_ids"][:p])
    kept = {i for j, i in enumerate(example["input_ids"]) if j not in masked}
    assert not labels & hashed_cjk and not kept & hashed_cjk
    assert max(labels | kept) < zh_tokenizer.vocab_size


def test_real_data_metadata_records_the_segmentation(runs):
  metadata = runs["jieba"][1]
  assert metadata["flags"]["word_segmentation"] == "jieba"
  assert metadata["word_segmentation"] == {"method": "jieba", "jieba_version": jieba.__version__,
                                           "dictionary": "default", "hmm": True}
  assert metadata["statistics"]["segmentation_continued_pieces"] > 2000
  assert runs["none"][1]["word_segmentation"] == {"method": "none"}
  assert "segmentation_continued_pieces" not in runs["none"][1]["statistics"]


def test_real_data_jieba_records_do_not_depend_on_the_workers(runs, clue_text, tmp_path):
  out = tmp_path / "two.tfrecord"
  metadata = create_pretraining_data([str(clue_text)], [str(out)], zh_options(num_workers=2))
  assert metadata["workers"] == 2 and metadata["statistics"] == runs["jieba"][1]["statistics"]
  assert out.read_bytes() == runs["jieba"][0].read_bytes()


def test_jieba_with_sentencepiece_is_refused(clue_text, tmp_path):
  spm = SHARED_DATA / "sentencepiece" / "spiece.model"
  with pytest.raises(ValueError, match=r"--word_segmentation='jieba': needs --vocab_file"):
    create_pretraining_data([str(clue_text)], [str(tmp_path / "o.tfrecord")],
                            zh_options(vocab_file=None, spm_model_file=str(spm)))
  with pytest.raises(ValueError, match=r"--word_segmentation='thulac': must be one of"):
    create_pretraining_data([str(clue_text)], [str(tmp_path / "o.tfrecord")],
                            zh_options(word_segmentation="thulac"))
