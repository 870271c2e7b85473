"""The best checkpoint by a dev metric, kept in `output_dir/best` with its results.

An update fills a temporary sibling of `best` (files.py's rule: the checkpoint's files, then
`best_results.txt`) and commits it. Unlike other atomic writes, a stop half-way leaves that
temporary on purpose: the next run sees that the update was under way and finishes or redoes
it (`finish_interrupted_update`), so a dev evaluation cut short is done again.
"""

import logging
import os

import tensorflow as tf

from albert_tf import files
from albert_tf.metrics.results import read_result, read_results, write_results

logger = logging.getLogger(__name__)

RESULTS_NAME = "best_results.txt"


class BestCheckpoint:
  """`output_dir/best`: the checkpoint with the highest `metric`, and its results."""

  def __init__(self, output_dir, metric):
    self.folder = os.path.join(output_dir, "best")
    self.metric = metric

  def score(self):
    """The kept checkpoint's `metric`, or None when none is kept."""
    return read_result(os.path.join(self.folder, RESULTS_NAME), self.metric)

  def results(self):
    """The kept checkpoint's results ({} when none is kept)."""
    return read_results(os.path.join(self.folder, RESULTS_NAME))

  def step(self):
    """The global step of the kept checkpoint, or None when none is kept."""
    return read_result(os.path.join(self.folder, RESULTS_NAME), "global_step")

  def checkpoint_prefix(self):
    """The kept checkpoint's prefix (`best/ckpt-N`), or None when none is kept."""
    if self.step() is None:
      return None
    indexes = tf.io.gfile.glob(os.path.join(self.folder, "*.index"))
    return indexes[0][:-len(".index")] if len(indexes) == 1 else None

  def finish_interrupted_update(self):
    """Completes what a stopped update left: a complete temporary newer than `best` is
    committed now; an incomplete one is removed and True returned (the checkpoint it was for
    is to be evaluated again). Call before `files.remove_interrupted`, which would remove the
    temporaries without looking."""
    current = read_result(os.path.join(self.folder, RESULTS_NAME), "global_step")
    steps = {tmp: read_result(os.path.join(tmp, RESULTS_NAME), "global_step")
             for tmp in files.temporary_siblings(self.folder)}
    newer = [tmp for tmp, step in steps.items()
             if step is not None and (current is None or step > current)]
    newest = max(newer, key=steps.get, default=None)
    if newest:
      files.commit(newest, self.folder)
      logger.info("%s: finished replacing it by %s, which a stopped run had completed",
                  self.folder, newest)
    interrupted = False
    for tmp, step in steps.items():
      if tmp != newest:
        files.remove(tmp)
        interrupted |= step is None
        logger.info("removed %s, left %s by a stopped run", tmp,
                    "incomplete" if step is None else "behind")
    return interrupted

  def keep_if_best(self, checkpoint, results, best):
    """Keeps `checkpoint` (a prefix) and its `results` when their metric beats `best` (the
    score kept so far, or None); returns the best score after."""
    score = results[self.metric]
    if best is not None and not score > best:
      return best
    # Not files.atomic_path: a stop half-way must leave the temporary (see the module doc).
    tmp = files.temporary_name(self.folder)
    tf.io.gfile.makedirs(tmp)
    for source in tf.io.gfile.glob(checkpoint + ".*"):
      tf.io.gfile.copy(source, os.path.join(tmp, os.path.basename(source)))
    write_results(os.path.join(tmp, RESULTS_NAME), results)
    files.commit(tmp, self.folder)
    logger.info("New best %s = %.4f at step %d -> %s", self.metric, score,
                results["global_step"], self.folder)
    return score
