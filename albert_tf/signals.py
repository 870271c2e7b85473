"""SIGTERM as an exception, for the work of a job that a stop request may cut short.

The training loop ends within a step on SIGTERM by itself (core._sigterm_stops); everything
else (building features, evaluating, exporting, making pretraining data) writes its outputs
under temporary names renamed when complete, so it can stop at once: `raising_on_sigterm`
makes SIGTERM raise, as SIGINT raises KeyboardInterrupt. No TensorFlow here: the data job
uses it without loading TensorFlow.
"""

import contextlib
import signal
import threading


@contextlib.contextmanager
def raising_on_sigterm(make_error):
  """While inside, SIGTERM raises `make_error(signal_number)` in the main thread. Elsewhere
  (a signal handler can only be set there), or when SIGTERM is ignored (nohup and the like),
  nothing changes. Nests: the innermost one's error is raised."""
  if (threading.current_thread() is not threading.main_thread()
      or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN):
    yield
    return

  def stop(signum, frame):
    del frame
    raise make_error(signum)

  previous_handler = signal.signal(signal.SIGTERM, stop)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous_handler)
