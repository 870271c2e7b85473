"""Starting points given as remote handles (albert_tf/interop/handles.py): a web address is one
line saying how to download it, an unreachable gs:// path one line with TensorFlow's reason,
from the library, `python -m albert_tf.cli.convert` and run_classifier alike. No test touches
the network: gs:// is answered by a patched tf.io.gfile, as TensorFlow answers offline."""

import re
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, load_checkpoint
from albert_tf.cli import convert
from albert_tf.interop import handles, starts
from albert_tf.modeling.encoder import AlbertEncoder
from conftest import ROOT

WEB = {
    "https://tfhub.dev/google/albert_base/3":
        r"curl -L 'https://tfhub.dev/google/albert_base/3\?tf-hub-format=compressed' \| "
        r"tar -xz -C albert_base_3",
    "https://www.kaggle.com/models/google/albert/tensorFlow2/en-base/3":
        r"kagglehub.model_download\('google/albert/tensorFlow2/en-base/3'\)",
    "https://www.kaggle.com/models/google/albert/frameworks/tensorFlow2/variations/en-base/"
    "versions/3": r"kagglehub.model_download\('google/albert/tensorFlow2/en-base/3'\)",
    "https://huggingface.co/albert/albert-base-v2":
        r"huggingface-cli download albert/albert-base-v2 --local-dir albert-base-v2",
    "https://storage.googleapis.com/albert_models/albert_base_v2.tar.gz":
        r"curl -LO 'https://storage.googleapis.com/albert_models/albert_base_v2.tar.gz'",
}
OFFLINE = ("Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
           "hostname', error details: Could not resolve host: www.googleapis.com\n\t when "
           "reading metadata of gs://albert-bucket/albert_base")


@pytest.fixture(scope="module")
def encoder():
  return AlbertEncoder(AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json"))


def _convert_error(capsys, tmp_path, source):
  assert convert.main(["--from=tf1", "--to=native", f"--checkpoint={source}",
                       f"--output_dir={tmp_path / 'out'}"]) == 1
  error = capsys.readouterr().err
  assert error.count("\n") == 1 and "Traceback" not in error, error
  return error


@pytest.mark.parametrize("url", sorted(WEB))
def test_a_web_address_is_one_line_saying_how_to_download_it(url, encoder, tmp_path, capsys):
  expected = (re.escape(url) + r" is a web address: albert-tf reads local folders \(and gs:// "
              r"paths\) and does not download\. Download and extract it \(.*(" + WEB[url]
              + r").*\), then pass the local folder")
  with pytest.raises(handles.NotDownloaded, match=expected):
    load_checkpoint(encoder, url)
  with pytest.raises(ValueError, match=expected):  # run_classifier's start, before the job
    starts.start_defaults(dict(init_checkpoint=url, albert_config_file=None,
                                    spm_model_file=None, vocab_file=None, do_lower_case=True))
  assert re.search(expected, _convert_error(capsys, tmp_path, url))


def _offline(monkeypatch):
  """tf.io.gfile as TensorFlow answers for gs:// without a network (the same error)."""
  def unreachable(path):
    if str(path).startswith("gs://"):
      raise tf.errors.FailedPreconditionError(None, None, OFFLINE)
    return original[0](path)
  original = [tf.io.gfile.exists]
  monkeypatch.setattr(tf.io.gfile, "exists", unreachable)
  monkeypatch.setattr(tf.io.gfile, "isdir", lambda path: unreachable(path))


def test_an_unreachable_gs_path_is_one_line_with_the_reason(encoder, monkeypatch, tmp_path,
                                                             capsys):
  _offline(monkeypatch)
  handle = "gs://albert-bucket/albert_base"
  expected = (r"cannot reach gs://albert-bucket/albert_base: Error executing an HTTP request: "
              r".*Could not resolve host: www\.googleapis\.com when reading metadata of "
              r"gs://albert-bucket/albert_base \(offline, or no access\?")
  with pytest.raises(handles.Unreachable, match=expected):
    load_checkpoint(encoder, handle)
  with pytest.raises(OSError, match=expected):
    starts.start_defaults(dict(init_checkpoint=handle, albert_config_file="c.json"))
  assert re.search(expected, _convert_error(capsys, tmp_path, handle))


def test_a_reachable_gs_path_goes_on_to_the_loaders(encoder, monkeypatch):
  """gs:// is read through tf.io.gfile: once reachable, what is (not) there is the loaders'
  to say, as for a local path."""
  monkeypatch.setattr(tf.io.gfile, "exists", lambda path: False)
  monkeypatch.setattr(tf.io.gfile, "isdir", lambda path: False)
  assert handles.check_handle("gs://albert-bucket/model.ckpt") == "gs://albert-bucket/model.ckpt"
  with pytest.raises(FileNotFoundError, match=r"checkpoint not found: gs://albert-bucket/"
                                              r"model\.ckpt \(no gs://albert-bucket/model\.ckpt"
                                              r"\.index\)"):
    load_checkpoint(encoder, "gs://albert-bucket/model.ckpt")


def test_a_file_system_tensorflow_lacks_is_named():
  with pytest.raises(handles.Unreachable, match=r"cannot read s3://bucket/ckpt: this TensorFlow "
                                                r"has no file system for s3://"):
    handles.check_handle("s3://bucket/ckpt")


def test_run_classifier_with_a_tfhub_url_exits_1_with_one_line(tmp_path):
  (tmp_path / "sst2").mkdir()
  (tmp_path / "sst2" / "train.tsv").write_text("sentence\tlabel\na moving film\t1\n")
  url = "https://tfhub.dev/google/albert_base/3"
  done = subprocess.run(
      [sys.executable, str(ROOT / "run_classifier.py"), "--task_name=sst-2",
       f"--data_dir={tmp_path / 'sst2'}", f"--output_dir={tmp_path / 'out'}",
       f"--init_checkpoint={url}", f"--albert_config_file={ROOT / 'configs' / 'tiny.json'}",
       "--do_train", "--max_seq_length=32"], capture_output=True, text=True, timeout=240)
  assert done.returncode == 1, done.stderr[-3000:]
  assert "Traceback" not in done.stderr, done.stderr[-3000:]
  errors = [line for line in done.stderr.splitlines() if url in line]
  assert len(errors) == 1 and "does not download" in errors[0], done.stderr[-3000:]
