"""The progress line of a training loop: step, loss, the task's metrics, learning rate, steps/s,
examples/s and ETA."""

import logging
import math
import time

logger = logging.getLogger(__name__)


class Progress:
  """One progress line every `log_every_seconds` (and at the end). The rates count from the end
  of the first loop on: that loop traces (and compiles) the step, a one-off that would make a
  short run's examples/s and every early ETA a fraction of what training runs at.

  `describe(results)` gives the task's own fields of the line; `history` (a list, or None)
  receives every loop's results with its step.
  """

  def __init__(self, start_step, train_steps, train_batch_size, log_every_seconds,
               describe=None, history=None):
    self.train_steps, self.train_batch_size = train_steps, train_batch_size
    self.log_every_seconds, self.describe, self.history = log_every_seconds, describe, history
    self.start_step, self.start_time, self.last_log = start_step, time.time(), 0.0
    self.first_loop = None  # (step, time) at the end of the first loop
    self.last = {}

  def __call__(self, step, results):
    results = {k: float(v) for k, v in results.items()}
    self.last = results
    if self.history is not None:
      self.history.append(dict(results, step=step))
    now = time.time()
    if self.first_loop is None:
      self.first_loop = (step, now)
    if now - self.last_log < self.log_every_seconds and step != self.train_steps:
      return
    self.last_log = now
    since_step, since = self.first_loop if step > self.first_loop[0] else (self.start_step,
                                                                            self.start_time)
    rate = (step - since_step) / max(now - since, 1e-9)
    eta = (self.train_steps - step) / rate if rate > 0 else float("inf")
    extra = self.describe(results) if self.describe else ""
    logger.info("step %d/%d  loss %.4f  %slr %.3g  %.2f steps/s  %.1f examples/s  ETA %s",
                step, self.train_steps, results["loss"], extra + "  " if extra else "",
                results["learning_rate"], rate, rate * self.train_batch_size, duration(eta))


def duration(seconds):
  """H:MM:SS, or "?" for an unknown (infinite) time."""
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
