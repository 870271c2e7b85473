"""create_pretraining_data as an Apache Beam pipeline (DirectRunner, two worker processes): the
local path's records per shard, its statistics, temporary names until success."""

import collections
import json
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf.data.pretraining import beam_pipeline
from albert_tf.data.pretraining.create import (CreationOptions, create_pretraining_data,
                                               iter_file_blocks)
from albert_tf.data.pretraining.create import ReadReport
from conftest import ROOT, SHARED_DATA

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
GUTENBERG = SHARED_DATA / "corpus_en" / "nltk_gutenberg"
BOOKS = [str(GUTENBERG / f"{b}.txt") for b in ("blake-poems", "shakespeare-macbeth",
                                               "chesterton-brown")]
ZH_CORPUS = SHARED_DATA / "chinese" / "uer_clue_corpus_small" / "CLUECorpusSmall_bert_sampled.txt"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"
DIRECT = ("--runner=DirectRunner --direct_num_workers=2 "
          "--direct_running_mode=multi_processing")
# Run-dependent metadata: how and how fast it ran.
HOW = ("elapsed_seconds", "instances_per_second", "workers", "runner")


def _shards(paths):
  """Each shard's records as a multiset."""
  return [collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(str(p)))
          for p in paths]


def _same_output(local_dir, beam_dir, local_meta, beam_meta, names):
  local = _shards([local_dir / n for n in names])
  beam = _shards([beam_dir / n for n in names])
  assert [sum(c.values()) for c in local] == [s["instances"] for s in local_meta["shards"]]
  assert local == beam
  for key in set(local_meta) | set(beam_meta):
    if key not in HOW:
      assert local_meta.get(key) == beam_meta.get(key), key
  assert sorted(p.name for p in beam_dir.iterdir()) == sorted(names + [names[0].split("-")[0]
                                                                     + ".json"])


def test_beam_pipeline_writes_the_local_paths_records_in_each_shard(tmp_path):
  """Three books in blocks of 40 kB (several per file, none spanning two), dupe 2, three
  shards: each Beam shard holds exactly the local shard's records, and the metadata's counts
  and statistics are the local ones."""
  options = CreationOptions(spm_model_file=str(SPM), max_seq_length=64,
                            max_predictions_per_seq=10, dupe_factor=2, num_workers=2,
                            block_bytes=40_000)
  names = [f"train-{i}.tfrecord" for i in range(3)]
  (tmp_path / "local").mkdir()
  (tmp_path / "beam").mkdir()
  local_meta = create_pretraining_data(BOOKS, [str(tmp_path / "local" / n) for n in names],
                                       options)
  # A failed attempt's (or a stopped run's) temporary shard is removed, never committed.
  stale = tmp_path / "beam" / "train-1.tfrecord.tmp-0123abcd"
  stale.write_bytes(b"half a shard")
  beam_meta = beam_pipeline.create_pretraining_data(
      BOOKS, [str(tmp_path / "beam" / n) for n in names], options, DIRECT)
  assert beam_meta["runner"] == DIRECT
  assert local_meta["total_instances"] > 3000
  _same_output(tmp_path / "local", tmp_path / "beam", local_meta, beam_meta, names)
  # Blocks restart at each file: every file's blocks are numbered from 0.
  keys = [key for i, path in enumerate(BOOKS)
          for key, _, _ in iter_file_blocks(i, path, options, ReadReport())]
  assert [k for k in keys if k[1] == 0] == [(0, 0), (1, 0), (2, 0)] and len(keys) > 6


def test_beam_cli_chinese_wordpiece_with_jieba_and_random_next_sentence(tmp_path):
  """The script's --beam_pipeline_options with albert_zh's WordPiece vocabulary, jieba
  whole-word masking and the original's random next sentences: the local path's shards."""
  text = tmp_path / "zh.txt"
  with open(ZH_CORPUS, encoding="utf-8") as f:
    text.write_text("".join(next(f) for _ in range(200)), encoding="utf-8")
  flags = [f"--input_file={text}", f"--vocab_file={ZH_VOCAB}", "--max_seq_length=64",
           "--max_predictions_per_seq=10", "--dupe_factor=2", "--word_segmentation=jieba",
           "--random_next_sentence", "--block_bytes=2000"]
  names = ["zh-0.tfrecord", "zh-1.tfrecord"]
  metadata = {}
  for where, extra in (("local", ["--num_workers=1"]),
                       ("beam", [f"--beam_pipeline_options={DIRECT}"])):
    (tmp_path / where).mkdir()
    outputs = ",".join(str(tmp_path / where / n) for n in names)
    run = subprocess.run([sys.executable, str(ROOT / "create_pretraining_data.py"), *flags,
                          f"--output_file={outputs}", *extra],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    metadata[where] = json.loads((tmp_path / where / "zh.json").read_text())
  assert metadata["beam"]["word_segmentation"]["method"] == "jieba"
  assert metadata["beam"]["statistics"]["segmentation_continued_pieces"] > 0
  _same_output(tmp_path / "local", tmp_path / "beam", metadata["local"], metadata["beam"],
               names)


def test_a_failed_beam_job_leaves_nothing_under_an_output_name(tmp_path):
  """Input without a document: the job fails naming why, and neither a shard nor a temporary
  file nor the metadata is left."""
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n", encoding="utf-8")
  out = tmp_path / "out"
  out.mkdir()
  options = CreationOptions(spm_model_file=str(SPM), max_seq_length=64,
                            max_predictions_per_seq=10, dupe_factor=1)
  with pytest.raises(Exception, match="no instances"):
    beam_pipeline.create_pretraining_data([str(empty)], [str(out / "a.tfrecord"),
                                                         str(out / "b.tfrecord")], options,
                                          "--runner=DirectRunner")
  assert list(out.iterdir()) == []
  # The same shard named twice would be written by two writers: refused before any work.
  with pytest.raises(ValueError, match="names the same shard twice"):
    beam_pipeline.create_pretraining_data(BOOKS, [str(out / "a.tfrecord")] * 2, options,
                                          "--runner=DirectRunner")
