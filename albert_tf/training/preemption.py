"""Preemption: SIGTERM (a preempted VM, `kill`, a scheduler's time limit) stops a job cleanly.

Inside the training loop it ends the current step, a checkpoint is saved and `Preempted` is
raised (`sigterm_stops`, read by the compiled loop); outside it (features, evaluations,
predictions, exports) it raises `Preempted` at once (`sigterm_raises`), as what that work
writes appears only whole. The scripts exit 0 on `Preempted` and the same command resumes.
"""

import contextlib
import logging
import os
import signal
import threading

from albert_tf.jobs import signals

logger = logging.getLogger(__name__)


class Preempted(BaseException):
  """SIGTERM stopped the job; `checkpoint` holds the state to resume from.

  `during` names the work outside the training loop that it stopped (an evaluation, the
  export), which the same command does again. A BaseException, as KeyboardInterrupt: a
  request to stop that no `except Exception` on the way may swallow.
  """

  def __init__(self, checkpoint, step, during=None):
    if during is None:
      message = (f"stopped by SIGTERM at step {step}; saved {checkpoint}: run the same "
                 "command again to resume")
    else:
      saved = f" ({checkpoint} is saved)" if checkpoint else ""
      message = (f"stopped by SIGTERM during {during}{saved}; its outputs appear only "
                 "whole: run the same command again to finish the job")
    super().__init__(message)
    self.checkpoint = checkpoint
    self.step = step
    self.during = during


@contextlib.contextmanager
def sigterm_stops(stop):
  """While inside, SIGTERM sets `stop` (read by the in-graph loop before every step).

  A Python signal handler runs only when the main thread returns to the interpreter, which a
  long `tf.function` call does not; so the signal's wake-up byte is read by a watcher thread
  that sets the variable at once, and the loop ends within one step.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  read_fd, write_fd = os.pipe()
  os.set_blocking(write_fd, False)

  def watch():
    while True:
      data = os.read(read_fd, 64)
      if not data:
        return
      if signal.SIGTERM in data:
        logger.warning("SIGTERM: stopping, with a checkpoint of this step")
        stop.assign(True)

  previous_handler = signal.signal(signal.SIGTERM, lambda signum, frame: None)
  previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
  watcher = threading.Thread(target=watch, name="sigterm-watcher", daemon=True)
  watcher.start()
  try:
    yield
  finally:
    signal.set_wakeup_fd(previous_fd)
    signal.signal(signal.SIGTERM, previous_handler)
    os.close(write_fd)
    watcher.join(timeout=5)
    os.close(read_fd)


def sigterm_raises(during, checkpoint=None, step=None):
  """While inside (in the main thread), SIGTERM raises `Preempted` at once, wherever the job
  is: for the work outside the training loop (features, evaluations, predictions, exports).
  What that work writes appears only whole (temporary names, renamed when complete) and the
  same command does it again, so stopping half-way loses nothing; waiting for its end could
  outlast a scheduler's grace period. Nests: the innermost `during` names the work.
  """
  return signals.raising_on_sigterm(lambda signum: Preempted(checkpoint, step, during))
