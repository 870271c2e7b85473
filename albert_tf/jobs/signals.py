"""SIGTERM as an exception, for the work of a job that a stop request may cut short.

The training loop ends within a step on SIGTERM by itself (core._sigterm_stops); everything
else (building features, evaluating, exporting, making pretraining data) writes its outputs
under temporary names renamed when complete, so it can stop at once: `raising_on_sigterm`
makes SIGTERM raise, as SIGINT raises KeyboardInterrupt. A job whose workers are processes it
does not manage itself (Beam's DirectRunner) uses `raising_on_stop`, whose first step can end
them (`stop_descendants`) before the error unwinds. No TensorFlow here: the data job uses it
without loading TensorFlow.
"""

import contextlib
import glob
import os
import signal
import threading
import time


@contextlib.contextmanager
def raising_on_sigterm(make_error):
  """While inside, SIGTERM raises `make_error(signal_number)` in the main thread. Elsewhere
  (a signal handler can only be set there), or when SIGTERM is ignored (nohup and the like),
  nothing changes. Nests: the innermost one's error is raised.

  The error is raised wherever the main thread is, and code on the way may not pass it on:
  a `__del__` that it interrupts drops it, and a library may turn it into an error of its
  own. So the stop is kept: an error of another kind leaving the block after SIGTERM came
  is raised as the stop's error (the other one its cause), and a block that finishes
  anyway raises it at its end. Later SIGTERMs, while the first one's error unwinds, are
  ignored, so the clean-up of temporary outputs is not cut short.
  """
  if (threading.current_thread() is not threading.main_thread()
      or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN):
    yield
    return
  received = []

  def stop(signum, frame):
    del frame
    if not received:
      received.append(make_error(signum))
      raise received[0]

  previous_handler = signal.signal(signal.SIGTERM, stop)
  try:
    yield
  except BaseException as e:  # pylint: disable=broad-except
    if received and e is not received[0]:
      raise received[0] from e  # the stop, turned into another error on the way
    raise
  finally:
    signal.signal(signal.SIGTERM, previous_handler)
  if received:
    raise received[0]  # dropped on the way: the work finished whole, and the job stops


@contextlib.contextmanager
def raising_on_stop(make_error, first=None):
  """While inside, SIGTERM and SIGINT (Ctrl-C) raise `make_error(signal_number)` in the main
  thread, after `first(signal_number)` when given: what must end before the error unwinds
  (worker processes that would otherwise write on, or print their own tracebacks). Later stop
  signals are ignored while the first one's error unwinds and the job cleans up; SIGKILL still
  ends it. As `raising_on_sigterm`: nothing changes outside the main thread, and a signal that
  is ignored (nohup, a background job's SIGINT) stays ignored.

    with signals.raising_on_stop(Interrupted, first=lambda signum: stop_descendants()):
      run_the_job()  # SIGTERM: the workers end, then Interrupted(15) is raised here
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  handled = [s for s in (signal.SIGTERM, signal.SIGINT)
             if signal.getsignal(s) is not signal.SIG_IGN]

  def stop(signum, frame):
    del frame
    for s in handled:
      signal.signal(s, signal.SIG_IGN)
    if first is not None:
      first(signum)
    raise make_error(signum)

  previous_handlers = {s: signal.signal(s, stop) for s in handled}
  try:
    yield
  finally:
    for s, handler in previous_handlers.items():
      signal.signal(s, handler)


def descendants(pid=None):
  """The live (not zombie) processes descended from `pid` (default: this one), read from
  Linux's /proc; none where there is no /proc."""
  parents, alive = {}, set()
  for stat in glob.glob("/proc/[0-9]*/stat"):
    try:
      with open(stat) as f:
        state, parent = f.read().rsplit(")", 1)[1].split()[:2]
    except (OSError, ValueError, IndexError):
      continue  # ended while we looked
    child = int(stat.split("/")[2])
    parents.setdefault(int(parent), []).append(child)
    if state != "Z":
      alive.add(child)
  found, queue = [], [os.getpid() if pid is None else pid]
  while queue:
    for child in parents.get(queue.pop(), []):
      found.append(child)
      queue.append(child)
  return [p for p in found if p in alive]


def stop_descendants(spared=(), grace_seconds=5.0):
  """Ends every process descended from this one but `spared` (say, those there before a job
  started its workers): SIGTERM, then SIGKILL for those still alive after `grace_seconds`.
  Returns once none is left alive (zombies wait for their parent to collect them), so nothing
  they would have written can appear after. Returns their ids.

    before = set(descendants())
    ...  # a Beam DirectRunner starts its worker processes
    stop_descendants(spared=before)
  """
  stopped = [pid for pid in descendants() if pid not in set(spared)]
  for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid in stopped:
      try:
        os.kill(pid, sig)
        os.kill(pid, signal.SIGCONT)  # a stopped process (Ctrl-Z, SIGSTOP) acts on SIGTERM now
      except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(alive(pid) for pid in stopped):
      time.sleep(0.02)
    if not any(alive(pid) for pid in stopped):
      break
  return stopped


def alive(pid):
  """Whether process `pid` runs (a zombie, ended but not yet collected, does not)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except (OSError, IndexError):
    return False
