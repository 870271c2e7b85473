"""What a user of our tools reads: our lines, not TensorFlow's start-up chatter.

    from albert_tf.cli import quiet
    quiet.install()  # first, before anything imports TensorFlow

Every entry point calls `install` before TensorFlow loads: the scripts at their top, each
`python -m albert_tf.cli.<tool>` first thing in its `main`. Importing this module (or any of
albert_tf) changes nothing: a library user who imports albert_tf into their own process gets
none of it. Unless the user asked for TensorFlow's own logging (by setting
`TF_CPP_MIN_LOG_LEVEL`, or with absl's `--verbosity=1` / `-v 1`), `install` keeps out:

- TensorFlow's C++ INFO and WARNING lines (oneDNN, cpu_feature_guard, the CUDA stubs, tf.data
  notices): `TF_CPP_MIN_LOG_LEVEL=2`, read by TensorFlow at its first log line. Its C++ errors
  still show.
- The `failed call to cuInit` error of a machine without an accelerator: TensorFlow is told the
  truth, that only the CPU is there (`TF_ENABLED_DEVICE_TYPES=CPU`), so it does not probe for a
  CUDA driver that is not installed. Where a GPU, TPU or device plugin could be, nothing is set.
- absl's C++ INFO lines, which no environment variable reaches (XLA's "Compiled cluster using
  XLA!" and "All log messages before absl::InitializeLog() is called..."): absl's
  `SetMinLogLevel(kWarning)` in TensorFlow's library, once loaded.
- TensorFlow's (and Model Garden's) Python INFO lines: checkpoint sharding times, SavedModel
  signature and fingerprint notices, logged through the `tensorflow` and `absl` loggers (ours
  log through `albert_tf.*` and the root logger).
- orbit's controller, which prints every loop's output dict beside the core's progress line (which
  has the same values, with examples/s and ETA): sent to the debug log instead.

Our own warnings and errors, and TensorFlow's Python warnings and errors, are untouched.
"""

import ctypes
import glob
import importlib.machinery
import importlib.util
import logging
import os
import re
import sys


def asked_for_tensorflow_logs(argv, environ):
  """Whether the user chose TensorFlow's logging: `TF_CPP_MIN_LOG_LEVEL` set, or absl's
  `--verbosity` (`-v`) of 1 or more among the flags of `argv` (parsed later by absl)."""
  if "TF_CPP_MIN_LOG_LEVEL" in environ:
    return True
  for i, arg in enumerate(argv):
    if arg == "--":
      break
    name, has_value, value = arg.lstrip("-").partition("=")
    if not arg.startswith("-") or name not in ("verbosity", "v"):
      continue
    if not has_value:
      value = argv[i + 1] if i + 1 < len(argv) else ""
    try:
      if int(value) >= 1:
        return True
    except ValueError:
      pass
  return False


def only_a_cpu_here():
  """Whether TensorFlow can find no device here but the CPU: Linux with no NVIDIA driver
  (libcuda.so.1, which TensorFlow's CUDA probe loads), no AMD one (/dev/kfd), no TPU (libtpu,
  /dev/accel*, /dev/vfio/<n>) and no pluggable-device plugin."""
  if not sys.platform.startswith("linux"):
    return False
  if (os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH") or os.path.exists("/dev/kfd")
      or glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
      or importlib.util.find_spec("libtpu") is not None
      or any(os.path.isdir(os.path.join(p, "tensorflow-plugins")) for p in sys.path if p)):
    return False
  try:
    ctypes.CDLL("libcuda.so.1")
  except OSError:
    return True
  return False


def _absl_warnings_only(tensorflow):
  """absl::SetMinLogLevel(kWarning) in TensorFlow's own absl. Its symbol carries the inline
  namespace of that absl's version, which the wheel's headers name; if anything is not where
  expected, the INFO lines simply stay."""
  folder = os.path.dirname(tensorflow.__file__)
  try:
    with open(os.path.join(folder, "include", "absl", "base", "options.h")) as f:
      namespace = re.search(r"#define ABSL_OPTION_INLINE_NAMESPACE_NAME (\w+)",
                            f.read()).group(1)
    library = ctypes.CDLL(os.path.join(folder, "libtensorflow_framework.so.2"),
                          mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    set_min_log_level = getattr(
        library, f"_ZN4absl{len(namespace)}{namespace}14SetMinLogLevelENS0_18LogSeverityAtLeastE")
  except (OSError, AttributeError):
    return
  set_min_log_level.argtypes = [ctypes.c_int]
  set_min_log_level.restype = None
  set_min_log_level(1)  # absl::LogSeverityAtLeast::kWarning


def _orbit_to_debug_log(controller):
  controller._log = logging.getLogger("orbit").debug  # pylint: disable=protected-access


class _AfterImport:
  """A meta path finder that runs `callback(module)` once the module `name` is executed (at
  once if it already is): several tools import TensorFlow late, or not at all."""

  def __init__(self, name, callback):
    self.name, self.callback = name, callback

  def find_spec(self, name, path, target=None):
    del target
    if name != self.name:
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is not None and spec.loader is not None:
      execute = spec.loader.exec_module

      def exec_module(module):
        execute(module)
        self.callback(module)
      spec.loader.exec_module = exec_module
    return spec

  @classmethod
  def install(cls, name, callback):
    if name in sys.modules:
      callback(sys.modules[name])
    else:
      sys.meta_path.insert(0, cls(name, callback))


def _absl_warnings_and_above(record):
  return record.levelno >= logging.WARNING


def install(argv=None):
  """Quiets TensorFlow's start-up in this process (see the module doc), unless the user asked
  for TensorFlow's logs among `argv` (default: `sys.argv[1:]`) or the environment. Call it
  before TensorFlow is imported: its C++ log level is read once, at its first log line.

  A second call changes nothing: the first set `TF_CPP_MIN_LOG_LEVEL`, which reads as the
  user's choice."""
  if asked_for_tensorflow_logs(sys.argv[1:] if argv is None else argv, os.environ):
    return
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
  if "TF_ENABLED_DEVICE_TYPES" not in os.environ and only_a_cpu_here():
    os.environ["TF_ENABLED_DEVICE_TYPES"] = "CPU"
  logging.getLogger("tensorflow").setLevel(logging.WARNING)
  # A filter, not a level: absl resets its logger's level when it parses --verbosity.
  logging.getLogger("absl").addFilter(_absl_warnings_and_above)
  _AfterImport.install("tensorflow", _absl_warnings_only)
  _AfterImport.install("orbit.controller", _orbit_to_debug_log)
