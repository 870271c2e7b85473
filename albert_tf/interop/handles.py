"""Where a starting point lives: a local path, a file system TensorFlow reads (`gs://`), or a
web address, which albert-tf does not download.

    check_handle("gs://bucket/albert_base/model.ckpt-best")  # reachable: returned as it is
    check_handle("https://tfhub.dev/google/albert_base/3")
    # NotDownloaded: https://tfhub.dev/google/albert_base/3 is a web address: albert-tf does
    # not download; download and extract it (mkdir albert_base_3 && curl -L ...), then pass
    # the local folder

Every loader asks this first (`load_checkpoint`, `source_format`, the scripts' start
defaults), so a handle that cannot be read is one line naming it, not TensorFlow's traceback
("File system scheme 'https' not implemented", "Could not resolve host") from whichever file
probe came first. The original's `--albert_hub_module_handle` took TF Hub URLs because
tensorflow_hub downloaded them; we read what is on disk, so the message says how to get it
there.
"""

import os
import re
import urllib.parse

import tensorflow as tf

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_WEB = ("http", "https")


class NotDownloaded(ValueError):
  """A web address (TF Hub, Kaggle, Hugging Face, a storage URL): to be downloaded first."""


class Unreachable(OSError):
  """A remote path (gs://) whose file system cannot be reached or is not built in."""


def scheme_of(path):
  """The lower-cased scheme of a `scheme://...` handle, or None for a local path."""
  match = _SCHEME.match(os.fspath(path))
  return match.group(1).lower() if match else None


def _one_line(message):
  return " ".join(str(message).split())


def _download_advice(url):
  """How to get `url` onto disk, for the hosts ALBERT's artifacts are published on."""
  parsed = urllib.parse.urlparse(url)
  host = parsed.netloc.lower()
  parts = [p for p in parsed.path.split("/") if p]
  name = parts[-1] if parts else "model"
  if host.endswith("tfhub.dev") and len(parts) >= 2:
    folder = "_".join(parts[-2:])
    base = url.split("?")[0]
    return (f"mkdir {folder} && curl -L '{base}?tf-hub-format=compressed' | tar -xz -C "
            f"{folder}")
  if host.endswith("kaggle.com") and parts[:1] == ["models"]:
    # /models/<owner>/<model>/<framework>/<variation>/<version>, the long form naming each
    # part ("frameworks/", "variations/", "versions/") too.
    handle = [p for p in parts[1:] if p not in ("frameworks", "variations", "versions")]
    handle = "/".join(handle) if len(handle) == 5 else "<owner>/<model>/<framework>/" \
                                                       "<variation>/<version>"
    return (f"python -c \"import kagglehub; print(kagglehub.model_download('{handle}'))\" "
            "prints the folder")
  if host.endswith(("huggingface.co", "hf.co")) and len(parts) >= 2:
    return f"huggingface-cli download {parts[0]}/{parts[1]} --local-dir {parts[1]}"
  return f"curl -LO '{url}', then tar -xzf / unzip {name}"


def check_handle(path):
  """`path` as given, once it is known to be readable where it points: a local path is not
  probed (the loaders name what is missing); `gs://` and other TensorFlow file systems are
  asked once, and a web address is refused. Raises NotDownloaded (a ValueError) or Unreachable
  (an OSError), each one line naming the handle, the fault and the fix."""
  scheme = scheme_of(path)
  if scheme is None:
    return path
  path = os.fspath(path)
  if scheme in _WEB:
    raise NotDownloaded(
        f"{path} is a web address: albert-tf reads local folders (and gs:// paths) and does not "
        f"download. Download and extract it ({_download_advice(path)}), then pass the local "
        "folder")
  try:
    tf.io.gfile.exists(path)
  except tf.errors.UnimplementedError as e:
    raise Unreachable(f"cannot read {path}: this TensorFlow has no file system for {scheme}:// "
                      f"({_one_line(e.message)}); copy it to a local folder and pass that") \
        from None
  except tf.errors.OpError as e:
    raise Unreachable(f"cannot reach {path}: {_one_line(e.message)} (offline, or no access? "
                      "copy it to a local folder and pass that)") from None
  return path
