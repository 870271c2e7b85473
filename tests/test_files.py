"""The one atomic-file rule (albert_tf/files.py) and the feature cache built on it."""

import json
import os

import pytest

from albert_tf import files
from albert_tf.data import feature_cache


def test_a_write_goes_through_a_temporary_sibling_named_by_the_rule(tmp_path, monkeypatch):
  seen = []
  real = os.replace

  def watching(source, target):
    seen.append((os.path.basename(source), os.path.basename(target)))
    real(source, target)
  monkeypatch.setattr(os, "replace", watching)
  files.write_text(tmp_path / "out.txt", "ünïcode\n")
  [(temporary, final)] = seen
  assert final == "out.txt" and files.is_temporary(temporary)
  assert temporary.startswith("out.txt.tmp-") and len(temporary) == len("out.txt.tmp-") + 8
  assert (tmp_path / "out.txt").read_bytes() == "ünïcode\n".encode()
  assert os.listdir(tmp_path) == ["out.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
  path = tmp_path / "results.json"
  files.write_json(path, {"a": 1})

  def full_disk(*args):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(os, "replace", full_disk)
  with pytest.raises(OSError, match=r"could not write .*results.json: No space left on device"):
    files.write_json(path, {"a": 2})
  assert json.loads(path.read_text()) == {"a": 1}
  assert os.listdir(tmp_path) == ["results.json"]


def test_a_folder_is_committed_whole_and_replaces_the_previous_one(tmp_path):
  target = tmp_path / "export"
  for version in ("1", "2"):
    with files.atomic_path(target) as tmp:
      os.makedirs(os.path.join(tmp, "variables"))
      files.write_text(os.path.join(tmp, "saved_model.pb"), version)
  assert (target / "saved_model.pb").read_text() == "2"
  assert sorted(os.listdir(tmp_path)) == ["export"]
  with pytest.raises(KeyboardInterrupt):  # a stop half-way: the old folder stays as it was
    with files.atomic_path(target) as tmp:
      os.makedirs(tmp)
      raise KeyboardInterrupt
  assert (target / "saved_model.pb").read_text() == "2"
  assert sorted(os.listdir(tmp_path)) == ["export"]


def test_a_folder_that_cannot_be_created_is_named_by_its_path_not_its_temporary(tmp_path):
  """An --export_dir under a file (or in /proc): the error names what the user asked for; the
  temporary is gone by the time anyone reads the message."""
  target = tmp_path / "a_file" / "export"
  (tmp_path / "a_file").write_text("not a folder")
  with pytest.raises(OSError, match=rf"could not write {target}: Not a directory") as raised:
    with files.atomic_path(target) as tmp:
      os.makedirs(tmp)
  assert ".tmp-" not in str(raised.value)
  assert os.listdir(tmp_path) == ["a_file"]


def test_what_killed_writes_left_is_removed_and_nothing_else(tmp_path):
  kept = ["eval_results.txt", "ckpt-2.index", "notes.tmp", "a.tmp-xyz", "best"]
  for name in kept:
    (tmp_path / name).write_text("mine")
  (tmp_path / "eval_results.txt.tmp-0123abcd").write_text("half")
  (tmp_path / "best.tmp-89abcdef").mkdir()
  (tmp_path / ".write-test.tmp-00ff00ff").write_text("ok")
  beside = tmp_path.parent / f"{tmp_path.name}-export.tmp-deadbeef"
  beside.mkdir()
  removed = files.remove_interrupted(tmp_path, [str(tmp_path) + "-export"])
  assert len(removed) == 4
  assert sorted(os.listdir(tmp_path)) == sorted(kept) and not beside.exists()


def test_an_unwritable_folder_is_one_error_naming_the_flag(tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_text("")
  with pytest.raises(OSError, match=r"--export_dir's folder=.*a_file/x is not writable"):
    files.check_writable(str(blocker / "x"), flag="--export_dir's folder")
  files.check_writable(str(tmp_path / "new"))
  assert os.listdir(tmp_path / "new") == []  # the probe is gone


def test_the_feature_cache_is_reused_only_for_the_same_key(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n")
  path = str(tmp_path / "train.tf_record")
  builds = []

  def build():
    builds.append(1)
    files.write_bytes(path, b"records")
    return 3
  key = feature_cache.cache_key([vocab], [True, 128], ([i, f"text {i}"] for i in range(3)))
  assert feature_cache.reuse_or_build(path, key, build) == {"examples": 3}
  assert feature_cache.reuse_or_build(path, key, build) == {"examples": 3}
  assert len(builds) == 1
  vocab.write_text("[PAD]\n[UNK]\n")  # another vocabulary: another key, a rebuild
  other = feature_cache.cache_key([vocab], [True, 128], ([i, f"text {i}"] for i in range(3)))
  assert other != key
  feature_cache.reuse_or_build(path, other, build)
  assert len(builds) == 2
  assert json.loads((tmp_path / "train.tf_record.json").read_text())["key"] == other
