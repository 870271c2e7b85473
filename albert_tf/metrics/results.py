"""The original's results files (`eval_results.txt`, `best_results.txt`, ...): `key = value`
lines sorted by key, written atomically; and reading them back."""

from albert_tf import files


def write_results(path, results):
  """`results` ({name: number}) as `key = value` lines, sorted by key; the file appears whole."""
  files.write_text(path, "".join(f"{k} = {results[k]}\n" for k in sorted(results)))


def read_results(path):
  """{key: float} of a results file ({} when there is none)."""
  if not files.exists(path):
    return {}
  with files.open_file(path) as f:
    pairs = (line.rstrip("\n").partition(" = ") for line in f)
    return {name: float(value) for name, _, value in pairs if value}


def read_result(path, key):
  """The value of `key` in a results file, or None (no such file or key)."""
  return read_results(path).get(key)


def write_summaries(folder, results, step):
  """Every number of `results` but the step as a TensorBoard scalar at `step`, in `folder`."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  writer = tf.summary.create_file_writer(folder)
  with writer.as_default(step=step):
    for key, value in results.items():
      if key != "global_step" and isinstance(value, (int, float)) and not isinstance(value, bool):
        tf.summary.scalar(key, value)
  writer.flush()
