"""create_pretraining_data: record format, the original's statistics, determinism, bad input."""

import json
import random
import re
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.cli.inspect import main as inspect_main
from albert_tf.data import tfrecords
from albert_tf.data.pretraining import records
from albert_tf.data.pretraining.create import (CreationOptions, create_pretraining_data,
                                               expand_input_files, iter_blocks, metadata_path)
from albert_tf.data.pretraining.instances import Instance, truncate_pair
from albert_tf.data.pretraining.masking import (MaskingOptions, candidate_words, ngram_mask,
                                                num_to_predict)
from albert_tf.data.pretraining.statistics import record_statistics
from conftest import ROOT, SHARED_DATA

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
GUTENBERG = SHARED_DATA / "corpus_en" / "nltk_gutenberg"
BOOKS = [GUTENBERG / f"{b}.txt" for b in ("austen-persuasion", "chesterton-brown",
                                          "melville-moby_dick")]


def options(**changes):
  base = dict(spm_model_file=str(SPM), max_seq_length=128, max_predictions_per_seq=20,
              dupe_factor=1, num_workers=1)
  base.update(changes)
  return CreationOptions(**base)


def read_all(paths, max_seq_length=128, max_predictions=20):
  dataset = tf.data.TFRecordDataset([str(p) for p in paths]).map(
      lambda s: records.decode_record(s, max_seq_length, max_predictions))
  return list(dataset.as_numpy_iterator())


@pytest.fixture(scope="module")
def english_real_data(tmp_path_factory):
  """Three Gutenberg books, real ALBERT vocabulary, seq 128, the original's other defaults."""
  out = tmp_path_factory.mktemp("english")
  shards = [out / "train-0.tfrecord", out / "train-1.tfrecord"]
  metadata = create_pretraining_data([str(p) for p in BOOKS], [str(s) for s in shards],
                                     options())
  return shards, metadata, record_statistics([str(s) for s in shards])


@pytest.fixture(scope="module")
def spm_tokenizer():
  return tokenization.FullTokenizer(spm_model_file=str(SPM))


# --- format ---------------------------------------------------------------------------------
def test_encoded_example_is_the_protobuf_tensorflow_writes():
  features = records.instance_features(
      Instance([2, 70000, 5, 3, 9, 3], [0, 0, 0, 0, 1, 1], [1, 1, 0, 1, 1, 1], [1, 2],
               [300, 129], 1), 8, 3)
  ours = tf.train.Example.FromString(records.encode_example(features))
  for name, values in features.items():
    feature = ours.features.feature[name]
    got = feature.float_list.value if name == "masked_lm_weights" else feature.int64_list.value
    assert list(got) == values, name
  assert set(ours.features.feature) == set(records.PRETRAINING_FEATURES)


def test_crc32c_matches_reference_and_tensorflow_reads_framed_records(tmp_path):
  from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c
  rng = random.Random(0)
  blobs = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))) for _ in range(60)]
  assert [int(c) for c in tfrecords.crc32c_batch(blobs)] == [crc32c(b) for b in blobs]
  path = tmp_path / "x.tfrecord"
  path.write_bytes(tfrecords.frame_records(blobs))
  assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == blobs


def test_real_data_records_follow_the_feature_spec(english_real_data, spm_tokenizer):
  shards, metadata, stats = english_real_data
  assert stats["features"] == {
      "input_ids": {"type": "int64_list", "length": 128},
      "input_mask": {"type": "int64_list", "length": 128},
      "segment_ids": {"type": "int64_list", "length": 128},
      "token_boundary": {"type": "int64_list", "length": 128},
      "masked_lm_positions": {"type": "int64_list", "length": 20},
      "masked_lm_ids": {"type": "int64_list", "length": 20},
      "masked_lm_weights": {"type": "float_list", "length": 20},
      "next_sentence_labels": {"type": "int64_list", "length": 1}}
  examples = read_all(shards[:1])
  assert len(examples) == metadata["shards"][0]["instances"]
  cls, sep = spm_tokenizer.cls_id, spm_tokenizer.sep_id
  for ex in examples[:500]:
    n = int(ex["input_mask"].sum())
    assert list(ex["input_mask"]) == [1] * n + [0] * (128 - n)
    ids, seg = ex["input_ids"], ex["segment_ids"]
    seps = [i for i in range(n) if ids[i] == sep]
    assert ids[0] == cls and len(seps) == 2 and seps[1] == n - 1
    assert list(seg[:n]) == [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1)
    assert not ids[n:].any() and not seg[n:].any() and not ex["token_boundary"][n:].any()
    p = int(ex["masked_lm_weights"].sum())
    positions = list(ex["masked_lm_positions"][:p])
    assert positions == sorted(set(positions)) and not ex["masked_lm_positions"][p:].any()
    assert all(0 < i < n and ids[i] not in (cls, sep) or ids[i] == 4 for i in positions)
    assert p == num_to_predict(n, MaskingOptions(30000, 4, 2, 3, (), 0.15, 20))


def test_real_data_model_garden_reader_accepts_our_records(english_real_data):
  from official.nlp.data import pretrain_dataloader
  shards, _, _ = english_real_data
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=",".join(str(s) for s in shards), seq_length=128, max_predictions_per_seq=20,
      global_batch_size=8, is_training=False, use_next_sentence_label=True)
  batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
  assert batch["input_word_ids"].shape == (8, 128)
  assert batch["masked_lm_positions"].shape == (8, 20)
  assert batch["next_sentence_labels"].shape == (8, 1)


# --- the original's statistics ---------------------------------------------------------------
def test_real_data_replacement_is_80_10_10(english_real_data):
  replacement = english_real_data[2]["replacement"]
  assert abs(replacement["mask"] - 0.8) < 0.01
  assert abs(replacement["kept"] - 0.1) < 0.01
  assert abs(replacement["random"] - 0.1) < 0.01


def test_real_data_masked_fraction_is_015_where_the_cap_does_not_bind(english_real_data):
  stats = english_real_data[2]
  assert abs(stats["masked_fraction"] - 0.15) < 0.005  # round(128 * .15) = 19 <= 20
  assert stats["predictions_max"] == 19


def test_real_data_ngram_spans_follow_one_over_n(english_real_data):
  s = english_real_data[1]["statistics"]
  drawn = [s[f"drawn_ngram_{n}"] for n in (1, 2, 3)]
  for got, want in zip(drawn, (6 / 11, 3 / 11, 2 / 11)):
    assert abs(got / sum(drawn) - want) < 0.01, drawn
  # What gets masked is shorter: n-grams are shortened to fit the ~11-19 prediction budget.
  masked = [s[f"masked_ngram_{n}"] for n in (1, 2, 3)]
  assert masked[0] / sum(masked) > 6 / 11 and masked[0] > masked[1] > masked[2] > 0


def test_real_data_sentence_order_labels(english_real_data):
  _, metadata, stats = english_real_data
  s = metadata["statistics"]
  swaps = s["sentence_order_label_1"] - s["random_partner"]
  in_document = s["instances"] - s["random_partner"]
  assert abs(swaps / in_document - 0.5) < 0.02  # a fair coin for multi-sentence chunks
  assert abs(stats["sentence_order_label_1_share"] - s["sentence_order_label_1"]
             / s["instances"]) < 1e-9


def test_real_data_token_boundary_marks_word_starts_and_specials(english_real_data,
                                                                 spm_tokenizer):
  shards, _, _ = english_real_data
  starts = [spm_tokenizer.is_word_start(p) for p in
            spm_tokenizer.convert_ids_to_tokens(range(spm_tokenizer.vocab_size))]
  checked = 0
  for ex in read_all(shards[1:])[:300]:
    masked = set(ex["masked_lm_positions"][:int(ex["masked_lm_weights"].sum())])
    for i in range(int(ex["input_mask"].sum())):
      token = ex["input_ids"][i]
      if token in (2, 3):
        assert ex["token_boundary"][i] == 1
      elif i not in masked:  # masked tokens may have been replaced
        assert ex["token_boundary"][i] == int(starts[token])
        checked += 1
  assert checked > 10000


@pytest.mark.parametrize("short_seq_prob", [0.0, 0.1, 0.5])
def test_short_seq_prob_shortens_the_target_of_that_share_of_documents(short_seq_prob):
  from albert_tf.data.pretraining.instances import InstanceOptions, create_instances
  # 30 sentences of 10 tokens: with the full target (125) the first chunk takes 13 sentences
  # and fills all 128 positions; a short target t ~ U[2, 125] fills them only if t >= 121.
  documents = [[[5 + (d + s) % 50] * 10 for s in range(30)] for d in range(4000)]
  opts = InstanceOptions(max_seq_length=128, short_seq_prob=short_seq_prob)
  full = 0
  for index, document in enumerate(documents):
    rng = random.Random(index)
    first = create_instances(document, index, documents, rng, opts, _masking())[0]
    full += len(first.input_ids) == 128
  expected = (1 - short_seq_prob) + short_seq_prob * 5 / 124
  assert abs(full / len(documents) - expected) < 0.015


# --- masking unit behaviour --------------------------------------------------------------------
def _masking(**changes):
  base = dict(vocab_size=1000, mask_id=4, cls_id=2, sep_id=3,
              word_start=tuple(i % 3 != 2 for i in range(1000)), masked_lm_prob=0.15,
              max_predictions_per_seq=10000, ngram=3)
  base.update(changes)
  return MaskingOptions(**base)


@pytest.mark.parametrize("favor_shorter, expected", [(True, (6 / 11, 3 / 11, 2 / 11)),
                                                     (False, (2 / 11, 3 / 11, 6 / 11))])
def test_ngram_lengths_are_drawn_with_one_over_n_weights(favor_shorter, expected):
  counts = [0, 0, 0]
  opts = _masking(favor_shorter_ngram=favor_shorter, masked_lm_prob=0.05)
  rng = random.Random(1)
  ids = [2] + [6] * 2000 + [3]  # every token a word start: a long, unconstrained sequence
  for _ in range(300):
    ngram_mask(ids, rng, opts, drawn_counts=counts)
  shares = [c / sum(counts) for c in counts]
  for got, want in zip(shares, expected):
    assert abs(got - want) < 0.015, shares


def test_whole_word_masking_masks_all_pieces_of_a_word():
  opts = _masking(masked_lm_prob=0.3)
  ids = [2] + [7, 8, 8, 6, 8] * 20 + [3]  # ids 6, 7 start words, 8 does not
  words, boundary = candidate_words(ids, opts)
  assert words[0] == [1, 2, 3] and words[1] == [4, 5]
  assert boundary[:6] == [1, 1, 0, 0, 1, 0]
  for seed in range(20):
    _, positions, labels, _ = ngram_mask(ids, random.Random(seed), opts)
    masked = set(positions)
    for word in words:
      assert masked.issuperset(word) or masked.isdisjoint(word)
    assert labels == [ids[p] for p in positions]
  per_piece = _masking(masked_lm_prob=0.3, do_whole_word_mask=False)
  words, _ = candidate_words(ids, per_piece)
  assert all(len(w) == 1 for w in words)


def test_number_to_predict_and_cap():
  opts = _masking(max_predictions_per_seq=20)
  assert num_to_predict(128, opts) == 19 and num_to_predict(512, opts) == 20
  assert num_to_predict(3, opts) == 1


def test_truncation_drops_from_the_longer_segment():
  rng = random.Random(0)
  a, b = truncate_pair(list(range(100)), list(range(100, 110)), 50, rng)
  assert len(a) + len(b) == 50 and len(b) == 10
  assert a == list(range(a[0], a[0] + 40)) and 0 < a[0] < 60  # front and back both trimmed
  a, b = truncate_pair([1, 2, 3], [4, 5, 6], 4, rng)
  assert len(a) == 2 and len(b) == 2  # B is trimmed on ties


# --- determinism, pure_sop, streaming -----------------------------------------------------------
def test_real_data_same_records_for_any_number_of_workers_and_seed_matters(tmp_path):
  inputs = [str(GUTENBERG / "chesterton-brown.txt"), str(GUTENBERG / "blake-poems.txt")]
  digests, statistics = {}, {}
  for workers, seed in ((1, 1), (2, 1), (1, 2)):
    out = [str(tmp_path / f"w{workers}s{seed}-{i}.tfrecord") for i in range(3)]
    metadata = create_pretraining_data(inputs, out, options(
        num_workers=workers, random_seed=seed, dupe_factor=2, block_bytes=100_000))
    digests[(workers, seed)] = [open(p, "rb").read() for p in out]
    statistics[(workers, seed)] = metadata["statistics"]
  assert digests[(1, 1)] == digests[(2, 1)]
  assert digests[(1, 1)] != digests[(1, 2)]
  # Counts summed over blocks, dropped tokens included, do not depend on the workers either.
  assert statistics[(1, 1)] == statistics[(2, 1)] and statistics[(1, 1)]["dropped_tokens"] > 0


def test_real_data_pure_sop_never_pairs_with_a_random_document(tmp_path):
  out = str(tmp_path / "pure.tfrecord")
  metadata = create_pretraining_data([str(BOOKS[0])], [out], options(pure_sop=True))
  s = metadata["statistics"]
  assert s["random_partner"] == 0 and s["instances"] > 1000
  assert abs(s["sentence_order_label_1"] / s["instances"] - 0.5) < 0.03
  default = create_pretraining_data([str(BOOKS[0])], [str(tmp_path / "d.tfrecord")], options())
  assert default["statistics"]["random_partner"] > 0


def test_a_document_without_blank_lines_is_cut_into_bounded_parts(tmp_path, caplog):
  path = tmp_path / "one_huge_document.txt"
  path.write_text("".join(f"Sentence number {i} of the only document.\n" for i in range(5000)))
  out = tmp_path / "o.tfrecord"
  metadata = create_pretraining_data([str(path)], [str(out)], options(block_bytes=2000))
  assert metadata["read"]["split_documents"] >= 10 and metadata["read"]["documents"] >= 10
  assert "longer than 16000 bytes is split" in caplog.text


def test_an_overlong_line_is_reported_with_the_tokens_kept_and_dropped(tmp_path, caplog):
  # One line of 8 blocks or more is one sentence: the document is not split, truncation keeps
  # max_seq_length - 3 tokens at most per instance, the rest is dropped.
  path = tmp_path / "one_line.txt"
  path.write_text(" ".join(f"word{i % 97}" for i in range(1200)) + "\n\nA short one.\nOk.\n")
  out = tmp_path / "o.tfrecord"
  metadata = create_pretraining_data([str(path)], [str(out)], options(
      max_seq_length=64, block_bytes=1000, dupe_factor=2))
  assert metadata["read"]["long_lines"] == 1 and metadata["read"]["split_documents"] == 0
  assert "split into parts here" not in caplog.text
  found = re.search(rf"{re.escape(str(path))}:1: a line of (\d+) bytes is one sentence and is "
                    r"not split into parts .* \(1 line, (\d+) tokens\) gave 2 instances that "
                    r"keep (\d+) tokens over 2 dupe passes; (\d+) tokens dropped", caplog.text)
  assert found, caplog.text
  size, tokens, kept, dropped = map(int, found.groups())
  assert size > 8000 and kept + dropped == 2 * tokens
  # Kept: segment A of the long line's instances (the short document's fit whole).
  a_lengths = [int(e["input_mask"].sum() - e["segment_ids"].sum()) - 2
               for e in read_all([out], 64)]
  assert sum(n for n in a_lengths if n > 20) == kept
  assert metadata["statistics"]["dropped_tokens"] == dropped


def test_five_is_the_shortest_max_seq_length_with_two_segments(tmp_path):
  from albert_tf.data.pretraining.instances import InstanceOptions, create_instances
  # max_seq_length - 3 = 2 tokens: one-token sentences still pair up, kept or swapped.
  document = [[10 + i] for i in range(40)]
  instances = create_instances(document, 0, [document], random.Random(0),
                               InstanceOptions(max_seq_length=5), _masking())
  assert all(i.segment_ids == [0, 0, 0, 1, 1] for i in instances)
  assert {i.sentence_order_label for i in instances} == {0, 1}
  with pytest.raises(ValueError, match=r"--max_seq_length=4: .*one token in each segment"):
    create_pretraining_data([str(BOOKS[0])], [str(tmp_path / "o.tfrecord")],
                            options(max_seq_length=4))


def test_unbalanced_sentence_order_labels_are_reported(tmp_path, caplog):
  # At max_seq_length 8 a chunk holds 5 tokens: every sentence below fills one alone and is
  # paired with a random document, so every label is 1.
  path = tmp_path / "sentences.txt"
  path.write_text("".join(f"Sentence {i} of document {d} has words.\n" + ("\n" if i == 5 else "")
                          for d in range(20) for i in range(6)))
  metadata = create_pretraining_data([str(path)], [str(tmp_path / "o.tfrecord")],
                                     options(max_seq_length=8))
  s = metadata["statistics"]
  assert s["instances"] == s["sentence_order_label_1"] == s["random_partner"] >= 100
  assert (f"sentence-order labels are unbalanced: 0 of {s['instances']} instances have label "
          f"0 and {s['instances']} label 1 ({s['instances']} with B from a random "
          "document)") in caplog.text
  assert "--max_seq_length=8 a chunk holds 5 tokens" in caplog.text
  # Balanced labels, or too few instances to tell, are not reported.
  assert options().sentence_order_warning({"instances": 1000,
                                           "sentence_order_label_1": 550}) is None
  assert options().sentence_order_warning({"instances": 99,
                                           "sentence_order_label_1": 99}) is None


def test_blocks_stream_documents_lazily():
  def endless():
    while True:
      yield ["x" * 100]
  first = next(iter_blocks(endless(), 1000))
  assert len(first) == 10  # an infinite corpus still yields its first block


# --- bad input ---------------------------------------------------------------------------------
def test_bad_lines_are_reported_with_file_and_line_and_strict_fails(tmp_path, caplog):
  good = "The first sentence here.\nAnd a second one.\n\nAnother document.\nIts end.\n"
  path = tmp_path / "mixed.txt"
  path.write_bytes(good.encode() + b"Bad \xff\xfe line\n" + good.encode())
  out = tmp_path / "o.tfrecord"
  metadata = create_pretraining_data([str(path)], [str(out)], options(dupe_factor=3))
  assert metadata["read"]["bad_lines"] == 1
  assert f"{path}:6: not valid utf-8" in caplog.text
  strict_out = tmp_path / "strict.tfrecord"
  with pytest.raises(ValueError, match=r"mixed.txt:6: .*--strict"):
    create_pretraining_data([str(path)], [str(strict_out)], options(strict=True))
  assert not list(tmp_path.glob("strict.tfrecord*"))  # nothing half-written


def test_crlf_bom_and_latin1_inputs_give_the_same_records(tmp_path):
  text = "Caf\u00e9 au lait is nice.\nA second sentence follows.\n\nNew document here.\nEnd.\n"
  variants = {"lf.txt": ("utf-8", text.encode()),
              "crlf_bom.txt": ("utf-8", b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()),
              "latin1.txt": ("latin-1", text.encode("latin-1"))}
  outputs = []
  for name, (encoding, data) in variants.items():
    (tmp_path / name).write_bytes(data)
    out = tmp_path / (name + ".tfrecord")
    create_pretraining_data([str(tmp_path / name)], [str(out)],
                            options(input_encoding=encoding, dupe_factor=5))
    outputs.append(out.read_bytes())
  assert outputs[0] == outputs[1] == outputs[2]


def test_empty_inputs_and_missing_paths_are_errors_that_write_nothing(tmp_path, caplog):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n   \n")
  out = tmp_path / "o.tfrecord"
  with pytest.raises(ValueError, match="no instances"):
    create_pretraining_data([str(empty)], [str(out)], options())
  assert "empty.txt: no documents" in caplog.text
  assert not list(tmp_path.glob("o.tfrecord*"))
  with pytest.raises(FileNotFoundError, match=r"matches no file: .*nothing\*\.txt"):
    expand_input_files(str(tmp_path / "nothing*.txt"))
  with pytest.raises(FileNotFoundError, match="output folder does not exist"):
    create_pretraining_data([str(BOOKS[0])], [str(tmp_path / "no" / "o.tfrecord")], options())
  with pytest.raises(ValueError, match="--max_seq_length=4"):
    create_pretraining_data([str(BOOKS[0])], [str(out)], options(max_seq_length=4))
  with pytest.raises(FileNotFoundError, match="spm_model_file not found: 'nope.model'"):
    create_pretraining_data([str(BOOKS[0])], [str(out)], options(spm_model_file="nope.model"))


def test_long_documents_and_lines_and_a_binding_prediction_cap(tmp_path, caplog):
  words = " ".join(f"word{i % 97}" for i in range(5000))
  path = tmp_path / "long.txt"
  path.write_text((words + "\n") * 3 + "\nshort doc.\nreally.\n")
  out = tmp_path / "o.tfrecord"
  metadata = create_pretraining_data([str(path)], [str(out)],
                                     options(max_seq_length=64, max_predictions_per_seq=5))
  assert "smaller than the 10 predictions" in caplog.text
  examples = read_all([out], 64, 5)
  assert len(examples) == metadata["total_instances"] >= 3
  assert all(e["masked_lm_weights"].sum() <= 5 for e in examples)
  assert all(e["input_mask"].sum() <= 64 for e in examples)


def test_real_data_metadata_counts_match_the_shards(english_real_data):
  shards, metadata, stats = english_real_data
  assert metadata_path([str(s) for s in shards]).endswith("train.json")
  on_disk = json.loads((shards[0].parent / "train.json").read_text())
  assert on_disk["total_instances"] == stats["records"] == sum(
      s["instances"] for s in on_disk["shards"])
  assert [s["instances"] for s in on_disk["shards"]] == [len(read_all([p])) for p in shards]
  assert on_disk["flags"]["max_seq_length"] == 128 and on_disk["flags"]["dupe_factor"] == 1


def test_real_data_wordpiece_chinese_corpus(tmp_path):
  corpus = SHARED_DATA / "chinese" / "uer_clue_corpus_small" / "CLUECorpusSmall_bert_sampled.txt"
  out = tmp_path / "zh.tfrecord"
  metadata = create_pretraining_data(
      [str(corpus)], [str(out)],
      options(spm_model_file=None, max_seq_length=128,
              vocab_file=str(SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt")))
  stats = record_statistics([str(out)], mask_id=103)
  assert metadata["total_instances"] > 1000
  assert abs(stats["replacement"]["mask"] - 0.8) < 0.02
  assert abs(stats["masked_fraction"] - 0.15) < 0.005
  # Chinese WordPiece: every CJK character is its own word start.
  assert stats["token_boundary_fraction"] > 0.95


# --- command lines ----------------------------------------------------------------------------
def test_real_data_cli_and_inspect(tmp_path, capsys):
  out = tmp_path / "cli-0.tfrecord"
  run = subprocess.run(
      [sys.executable, str(ROOT / "create_pretraining_data.py"),
       f"--input_file={GUTENBERG}/blake-*.txt,{GUTENBERG / 'shakespeare-macbeth.txt'}",
       f"--output_file={out},{tmp_path / 'cli-1.tfrecord'}", f"--spm_model_file={SPM}",
       "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2",
       "--num_workers=2"], capture_output=True, text=True, timeout=120)
  assert run.returncode == 0, run.stderr
  assert "instances/s" in run.stderr and "MB/s" in run.stderr
  assert json.loads((tmp_path / "cli.json").read_text())["workers"] == 2
  assert inspect_main([str(tmp_path / "cli-*.tfrecord")]) == 0
  printed = capsys.readouterr().out
  assert "records in 2 files" in printed and "masked_lm_weights" in printed
  bad = subprocess.run([sys.executable, str(ROOT / "create_pretraining_data.py"),
                        "--input_file=/no/such/*.txt", f"--output_file={out}",
                        f"--spm_model_file={SPM}"], capture_output=True, text=True, timeout=60)
  assert bad.returncode == 1 and "matches no file: /no/such/*.txt" in bad.stderr
