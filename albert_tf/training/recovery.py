"""Guards every training job shares: what a run may trust after a fault.

- The run's own `albert_config.json` (and the flags that shape its model) lives in output_dir;
  resuming with another architecture is refused instead of silently restoring into it.
- A checkpoint is "good" only when the loss of its own state was finite: after a non-finite
  loss, the checkpoints of that state and later ones are moved aside, so a rerun resumes from
  a state that trained.
- Checkpoint writes that fail (disk full, read-only folder) become one clear error, with the
  half-written files removed and the earlier checkpoints untouched.
- Corrupt or mismatched TFRecords are traced back to the file (and record) that holds them.
"""

import json
import logging
import os
import re

import tensorflow as tf

from albert_tf import files
from albert_tf.config import CONFIG_NAME, MODEL_FLAGS_NAME

logger = logging.getLogger(__name__)

DISCARDED_DIR = "nonfinite"
DAMAGED_DIR = "damaged"


# --- the run's configuration ----------------------------------------------------------------
def check_run_config(output_dir, config, config_file, resuming, model_flags=None):
  """Saves `config` (and `model_flags`, the flags that shape the model) in `output_dir`, or,
  when resuming from a checkpoint there, refuses a config that differs from the saved one.

  Raises ValueError naming both files and every differing key.
  """
  saved_config = os.path.join(output_dir, CONFIG_NAME)
  saved_flags = os.path.join(output_dir, MODEL_FLAGS_NAME)
  wanted = {CONFIG_NAME: config.to_dict(), MODEL_FLAGS_NAME: dict(model_flags or {})}
  if resuming:
    problems = []
    for name, path, given in ((CONFIG_NAME, saved_config, f"--albert_config_file={config_file}"),
                              (MODEL_FLAGS_NAME, saved_flags, "this run's flags")):
      if not tf.io.gfile.exists(path):
        continue
      with tf.io.gfile.GFile(path) as f:
        before = json.load(f)
      changed = differences(before, wanted[name])
      if changed:
        problems.append(f"{path} differs from {given} in " + "; ".join(changed))
    if problems:
      raise ValueError(
          f"{output_dir} holds checkpoints of another model: " + ". ".join(problems) +
          ". Resume with the saved settings (e.g. --albert_config_file=" + saved_config +
          ") or train into a new --output_dir")
    if not tf.io.gfile.exists(saved_config):
      logger.warning("%s has checkpoints but no %s (an older run): saving this run's config "
                     "there without being able to check it", output_dir, CONFIG_NAME)
  for name, path in ((CONFIG_NAME, saved_config), (MODEL_FLAGS_NAME, saved_flags)):
    if name == MODEL_FLAGS_NAME and not wanted[name]:
      continue
    if resuming and tf.io.gfile.exists(path):
      continue
    files.write_json(path, wanted[name], sort_keys=True)


def differences(before, after):
  """["key: X there vs Y now"] of every key whose value in the saved dict `before` differs from
  `after` (this command's): the one rule by which a rerun is refused in a folder of other
  settings (this run's config, a sweep's finished runs)."""
  keys = sorted(set(before) | set(after))
  missing = object()
  return [f"{k}: {before.get(k, 'unset')!r} there vs {after.get(k, 'unset')!r} now"
          for k in keys if before.get(k, missing) != after.get(k, missing)]


def save_checkpoint(manager, step):
  """`manager.save(step)`; a failed write raises one clear OSError after removing what it
  half-wrote (TensorFlow's `<prefix>_temp` folder, partial files), earlier checkpoints kept."""
  prefix = f"{manager._checkpoint_prefix}-{step}"  # pylint: disable=protected-access
  try:
    return manager.save(checkpoint_number=step)
  except (tf.errors.OpError, OSError) as e:
    for path in tf.io.gfile.glob(prefix + "_temp*") + tf.io.gfile.glob(prefix + ".*"):
      files.remove_quietly(path)
    kept = tf.train.latest_checkpoint(manager.directory)
    raise OSError(f"could not write checkpoint {prefix}: {files.cause(e)}; the last complete "
                  f"checkpoint is {kept or 'none'}") from None


def remove_stale_temp_checkpoints(folder):
  """Removes `*_temp` folders a killed save left behind (never a complete checkpoint)."""
  for path in tf.io.gfile.glob(os.path.join(folder, "*_temp")):
    if tf.io.gfile.isdir(path):
      logger.info("removing %s, left by an interrupted checkpoint write", path)
      files.remove_quietly(path)


# --- non-finite losses -----------------------------------------------------------------------
def nonfinite_error(manager, state, loss):
  """The error for a loss of `loss` computed from the weights after step `state`.

  Checkpoints of that state and later ones hold weights that do not train (their own loss is
  not finite): they are moved into `output_dir/nonfinite/` (kept for inspection, never resumed
  from), so the latest checkpoint is the last good one. Returns a FloatingPointError to raise.
  """
  discarded = _set_aside(manager, state, DISCARDED_DIR)
  good = tf.train.latest_checkpoint(manager.directory)
  message = (f"loss is {loss} at step {state + 1} (computed from the weights after step "
             f"{state}); stopped without saving. ")
  if discarded:
    message += (f"Moved aside {len(discarded)} checkpoint(s) of non-finite weights "
                f"({', '.join(discarded)}). ")
  message += (f"The last good checkpoint (its own loss was finite) is {good}; a rerun resumes "
              "from it (lower --learning_rate or check the data first)" if good else
              "No good checkpoint is left; a rerun starts from the initial weights")
  return FloatingPointError(message)


def damaged_checkpoint_error(manager, latest, cause):
  """The error for a latest checkpoint that TensorFlow cannot read (a truncated or damaged
  .index / .data file): it is moved into `output_dir/damaged/`, so that a rerun resumes from
  the checkpoint before it. Returns an OSError to raise."""
  moved = _set_aside(manager, _checkpoint_number(latest), DAMAGED_DIR)
  good = tf.train.latest_checkpoint(manager.directory)
  return OSError(f"cannot resume from {latest}: {cause} (its .index or .data files are damaged "
                 f"or truncated); moved it aside to {', '.join(moved)}. "
                 + (f"A rerun resumes from {good}, the checkpoint before it" if good else
                    "No other checkpoint is left; a rerun starts from the initial weights"))


def _set_aside(manager, first_number, folder_name):
  """Moves the checkpoints numbered `first_number` and later into `output_dir/<folder_name>/`
  and rewrites the state file on disk (what a rerun reads) to the ones kept."""
  moved = []
  for path in list(manager.checkpoints):
    if _checkpoint_number(path) >= first_number:
      moved.append(_move_aside(path, folder_name))
  if moved:
    kept = [p for p in manager.checkpoints if _checkpoint_number(p) < first_number]
    if kept:
      tf.compat.v1.train.update_checkpoint_state(manager.directory, kept[-1],
                                                 all_model_checkpoint_paths=kept)
    else:
      files.remove_quietly(os.path.join(manager.directory, "checkpoint"))
  return moved


class NonfiniteOutputs(FloatingPointError):
  """A task's evaluation found outputs (or a loss) that are not finite; the run turns it into
  `nonfinite_eval_error`, which names the step and the checkpoint."""

  def __init__(self, loss):
    super().__init__(f"eval loss is {loss}")
    self.loss = loss


def nonfinite_eval_error(loss, step, checkpoint):
  """The error for an evaluation whose loss is not finite: nothing is written for it."""
  return FloatingPointError(
      f"eval loss is {loss} at step {step} ({checkpoint or 'initial weights'}): the weights "
      "do not give finite outputs; eval_results.txt not written")


def _checkpoint_number(path):
  match = re.search(r"-(\d+)$", path)
  return int(match.group(1)) if match else -1


def _move_aside(prefix, folder_name):
  folder = os.path.join(os.path.dirname(prefix), folder_name)
  files.makedirs(folder)
  for path in files.glob(prefix + ".*"):
    files.rename(path, os.path.join(folder, os.path.basename(path)))
  return os.path.join(folder, os.path.basename(prefix))


# --- input records ---------------------------------------------------------------------------
_RECORD_ERRORS = ("corrupted record", "truncated record", "can't parse serialized example",
                  "feature:", "key:", "data_loss", "invalid argument: name:")


def is_record_error(error):
  """Whether `error` is TensorFlow's report of a bad TFRecord (corrupt, truncated, unparsable)."""
  if isinstance(error, tf.errors.DataLossError):
    return True
  if isinstance(error, tf.errors.InvalidArgumentError):
    text = str(error).lower()
    return any(marker in text for marker in _RECORD_ERRORS)
  return False


def locate_bad_record(paths, parse, error):
  """ValueError naming the file (and record) behind `error`, found by reading each file whole
  with `parse`; None when every file reads cleanly (the error was not the data's)."""
  offset = re.search(r"(?:corrupted|truncated) record at (\d+)", str(error))
  candidates = paths
  if offset:  # The offset is within one file: only files that long can hold it.
    at = int(offset.group(1))
    candidates = [f for f in paths if tf.io.gfile.stat(f).length > at] or paths
  for path in candidates:
    count = 0
    try:
      for batch in tf.data.TFRecordDataset(path).batch(256):
        parse(batch)
        count += int(batch.shape[0])
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
      return ValueError(f"{path} is corrupt or not of this run's format after record {count} "
                        f"(TensorFlow: {detail}); remove or recreate that file")
  return None
