"""Files that appear only whole: the one rule every writer of albert-tf follows.

A write of PATH (a file, or a folder such as a SavedModel) goes to `PATH.tmp-XXXXXXXX` (eight
hex digits, new for each write) beside it and is renamed to PATH once complete. So a reader
sees the old PATH or the new one, never half of one, and whatever a stopped or killed run
left is recognisable by its name alone: `remove_interrupted` removes it on the next start.
`check_writable`'s probe follows the same rule.

Paths with a scheme (`gs://...`) go through TensorFlow's file systems, imported only then: the
workers of the pretraining-data job never load TensorFlow. (On object stores a rename is a
copy: what appears is still whole, but not in one step.)
"""

import contextlib
import glob as local_glob
import json
import logging
import os
import re
import shutil
import uuid

logger = logging.getLogger(__name__)

TEMPORARY = re.compile(r"\.tmp-[0-9a-f]{8}$")


def temporary_name(path):
  """Where a write of `path` goes until it is complete: `<path>.tmp-<8 hex>`."""
  return f"{os.fspath(path).rstrip('/')}.tmp-{uuid.uuid4().hex[:8]}"


def is_temporary(path):
  """Whether `path` is the temporary of an atomic write (by the rule above)."""
  return bool(TEMPORARY.search(os.fspath(path).rstrip("/")))


# --- file systems: local, or TensorFlow's for paths with a scheme -----------------------------
def is_remote(path):
  return "://" in os.fspath(path)


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


def open_file(path, mode="r"):
  """`open(path, mode)`, UTF-8 for text; a path with a scheme through tf.io.gfile."""
  path = os.fspath(path)
  if is_remote(path):
    return _gfile().GFile(path, mode)
  return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def exists(path):
  path = os.fspath(path)
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path):
  path = os.fspath(path)
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def makedirs(path):
  path = os.fspath(path)
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path):
  path = os.fspath(path)
  return [n.rstrip("/") for n in _gfile().listdir(path)] if is_remote(path) else os.listdir(path)


def glob(pattern):
  """Paths matching `pattern` (`*`, `?`, `[...]`); a remote pattern through tf.io.gfile."""
  pattern = os.fspath(pattern)
  return _gfile().glob(pattern) if is_remote(pattern) else local_glob.glob(pattern)


def remove(path):
  """Removes the file or folder `path`."""
  path = os.fspath(path)
  if is_remote(path):
    gfile = _gfile()
    if gfile.isdir(path):
      gfile.rmtree(path)
    else:
      gfile.remove(path)
  elif os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path)
  else:
    os.remove(path)


def rename(source, target):
  """Renames the file `source` to `target`, replacing it."""
  source, target = os.fspath(source), os.fspath(target)
  if is_remote(target):
    _gfile().rename(source, target, overwrite=True)
  else:
    os.replace(source, target)


def remove_quietly(path):
  """Removes the file or folder `path` if it is there; a failure is not reported (it is
  cleaning up after another error, or what a stopped run left)."""
  try:
    if exists(path):
      remove(path)
  except Exception:  # pylint: disable=broad-except  (cleaning up after another error)
    pass


def cause(error):
  """The first line of what went wrong, without the traceback noise."""
  if isinstance(error, OSError) and error.strerror:
    return error.strerror
  message = (getattr(error, "message", None) or str(error)).strip()
  return message.splitlines()[0] if message else type(error).__name__


# --- atomic writes ---------------------------------------------------------------------------
def commit(temporary, path):
  """Puts the complete `temporary` (a file or a folder) at `path`, replacing what was there.

  A folder cannot be renamed over another: the old one is moved aside to a temporary name of
  its own first and removed after. Only a kill between those two renames leaves no `path`;
  both copies then stay, as temporaries, until the next `remove_interrupted`."""
  temporary, path = os.fspath(temporary), os.fspath(path).rstrip("/")
  if not isdir(temporary):
    rename(temporary, path)
    return
  move = _gfile().rename if is_remote(path) else os.rename  # folders: no overwrite
  if not exists(path):
    move(temporary, path)
    return
  aside = temporary_name(path)
  move(path, aside)
  try:
    move(temporary, path)
  except BaseException:
    move(aside, path)
    raise
  remove_quietly(aside)


@contextlib.contextmanager
def atomic_path(path):
  """Yields the temporary name to write `path` under (a file, or a folder the caller creates);
  commits it when the block ends normally and removes it when the block raises (a stop request
  such as SIGTERM's or Ctrl-C's too), so `path` is never left half-written."""
  temporary = temporary_name(path)
  try:
    yield temporary
    commit(temporary, path)
  except BaseException as e:
    remove_quietly(temporary)
    if _is_io_error(e) and temporary in _full_message(e):
      # The temporary's name means nothing to the user (it is gone now): name the path asked
      # for, and the cause with that path in it.
      reason = cause(e).replace(temporary, os.fspath(path))
      error = OSError(f"could not write {os.fspath(path)}: {reason}")
      error.strerror = reason  # what `cause` reads: a caller's own wrapping adds no second one
      raise error from None
    raise


def _is_io_error(error):
  """An OSError, or TensorFlow's OpError (its file systems' errors)."""
  return isinstance(error, OSError) or (hasattr(error, "error_code") and
                                        type(error).__module__.startswith("tensorflow"))


def _full_message(error):
  """Everything an I/O error says, the file names of an OSError included."""
  names = [getattr(error, n, None) for n in ("filename", "filename2")] if isinstance(
      error, OSError) else []
  return " ".join([str(getattr(error, "message", None) or error)] + [str(n) for n in names
                                                                     if n])


def write_bytes(path, data):
  """Writes `data` to `path` (creating its folder), which appears only whole. A failure is an
  OSError naming `path` and the cause; nothing is left under either name."""
  path = os.fspath(path)
  try:
    makedirs(os.path.dirname(path) or ".")
    with atomic_path(path) as temporary:
      with open_file(temporary, "wb") as f:
        f.write(data)
  except Exception as e:  # pylint: disable=broad-except
    if not _is_io_error(e):
      raise
    raise OSError(f"could not write {path}: {cause(e)}") from None


def write_text(path, text):
  """Writes `text` (UTF-8, newlines as given) to `path`, which appears only whole."""
  write_bytes(path, text.encode("utf-8"))


def write_json(path, value, indent=2, sort_keys=False):
  """`value` as JSON (non-ASCII kept as is) and a final newline, written atomically."""
  write_text(path, json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
             + "\n")


# --- what stopped runs left ------------------------------------------------------------------
def interrupted_writes(folder):
  """The temporaries of atomic writes in `folder` (none if it does not exist)."""
  if not isdir(folder):
    return []
  return [os.path.join(os.fspath(folder), name) for name in listdir(folder)
          if is_temporary(name)]


def temporary_siblings(path):
  """The temporaries that writes of `path` left beside it."""
  path = os.fspath(path).rstrip("/")
  pattern = path + ".tmp-*" if is_remote(path) else local_glob.escape(path) + ".tmp-*"
  return [p for p in glob(pattern) if is_temporary(p)]


def remove_interrupted(folder=None, paths=()):
  """Removes the temporaries that stopped or killed runs left in `folder` and beside each of
  `paths` (an export folder's siblings, say): never anyone's results, as whole files are only
  ever renamed into place. Returns what it removed."""
  leftovers = interrupted_writes(folder) if folder else []
  for path in paths:
    if path:
      leftovers += temporary_siblings(path)
  for path in leftovers:
    logger.info("removing %s, left by a stopped run", path)
    remove_quietly(path)
  return leftovers


def check_writable(folder, flag="--output_dir"):
  """Creates `folder` and proves a file can be written there, else one OSError naming the flag
  and the cause. The probe is a temporary by the rule above, so a kill leaves nothing else."""
  probe = temporary_name(os.path.join(os.fspath(folder), ".write-test"))
  try:
    makedirs(folder)
    with open_file(probe, "wb") as f:
      f.write(b"ok")
    remove(probe)
  except Exception as e:  # pylint: disable=broad-except
    if not _is_io_error(e):
      raise
    raise OSError(f"{flag}={os.fspath(folder)} is not writable: {cause(e)}") from None
