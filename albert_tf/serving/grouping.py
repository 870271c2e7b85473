"""Merged batches of raw text run as calls grouped by length: this server's own, not TF Serving's.

A raw-text signature computes each call at its longest text (`trim_padding`,
export/task_models.py). Merged into one call, a 5-token sentence is computed at the length of
its batch's 60-token one, and on a CPU, where time grows with rows x length, that padding can
cost more than sharing the call saves. So `Batcher` (serving/batching.py) may run a merged batch
of text requests as several calls:

    costs = CallCosts()                       # one per signature, fed by every call it runs
    costs.record(rows=16, longest=240, seconds=0.031)
    groups = plan(lengths, rows, costs.coefficients())   # [[2, 0], [3, 1]]: requests per call

The requests are ordered by `text_lengths` (the UTF-8 bytes of their texts, which grow with
their SentencePiece or WordPiece tokens) and cut into consecutive groups, each a call at its own
longest row; the cut is the one whose calls cost least by the signature's own measured call
times (`CallCosts`: a call's overhead, its rows, its rows x longest). Until those times tell a
cost of padding apart from the cost of a call, a batch stays one call, as TF Serving runs it.

Answers do not change: every request still gets exactly its own rows, each computed at a length
no shorter than its own, where padding is masked (identical to float32 rounding, issue 56).
"""

import collections
import threading

import numpy as np

TEXT_KINDS = "OSU"  # numpy's kinds of string arrays: object (bytes from JSON, gRPC), bytes, str


def _utf8_bytes(value):
  return len(value) if isinstance(value, bytes) else len(str(value).encode("utf-8"))


def text_lengths(arrays):
  """Per row of a request's `arrays` ({name: array}, rows on axis 0), an estimate of the tokens
  it is packed into: over its text inputs, the sum of each input's longest UTF-8 value in the
  row (a pair's two texts add up; of RACE's options, packed one by one, the longest counts).
  int64 [rows], or None when no input is text (ids merge only at one shape: nothing to group)."""
  total = None
  for value in arrays.values():
    if value.dtype.kind not in TEXT_KINDS or value.ndim == 0:
      continue
    flat = value.reshape(value.shape[0], -1)
    lengths = np.array([max((_utf8_bytes(v) for v in row), default=0) for row in flat],
                       np.int64)
    total = lengths if total is None else total + lengths
  return total


class CallCosts:
  """What a signature's calls cost, fitted to the last `window` calls it ran:
  seconds = overhead + per_row * rows + per_byte * rows * longest, where `longest` is the call's
  longest row by `text_lengths` (a call is computed at its longest row). Safe from any thread."""

  def __init__(self, window=64, min_calls=8):
    self._calls = collections.deque(maxlen=window)
    self._min_calls = min_calls
    self._lock = threading.Lock()

  def record(self, rows, longest, seconds):
    with self._lock:
      self._calls.append((rows, longest, seconds))

  def coefficients(self):
    """(overhead, per_row, per_byte) in seconds, or None while the calls seen cannot tell a
    call's cost from its padding's (too few, all of one shape) or padding costs nothing."""
    with self._lock:
      calls = np.array(self._calls, np.float64).reshape(-1, 3)
    if len(calls) < self._min_calls:
      return None
    rows, longest, seconds = calls.T
    x = np.stack([np.ones_like(rows), rows, rows * longest], axis=1)
    scale = np.abs(x).max(axis=0)  # columns of like size, so the rank says what the data tell
    if np.linalg.matrix_rank(x / scale) < 3:
      return None
    overhead, per_row, per_byte = np.linalg.lstsq(x / scale, seconds, rcond=None)[0] / scale
    if not per_byte > 0:
      return None
    return max(overhead, 0.0), max(per_row, 0.0), per_byte


def plan(lengths, rows, coefficients, allowed_batch_sizes=()):
  """The calls to run a merged batch of requests as: lists of request indices, each list one
  call, the calls shortest first. `lengths`: each request's longest row (`text_lengths`);
  `rows`: its rows; `coefficients`: `CallCosts.coefficients()` (None: one call, in the order
  given); `allowed_batch_sizes`: a call's rows are padded up to the next one (TF Serving's).

  Requests ordered by length, the cut into consecutive groups is the cheapest by the
  coefficients (dynamic programming over the cut points: O(requests^2), vectorised)."""
  count = len(lengths)
  if coefficients is None or count < 2:
    return [list(range(count))]
  overhead, per_row, per_byte = coefficients
  order = np.argsort(np.asarray(lengths), kind="stable")
  longest = np.asarray(lengths, np.float64)[order]
  ends = np.concatenate([[0], np.cumsum(np.asarray(rows, np.int64)[order])])
  sizes = np.asarray(allowed_batch_sizes, np.int64)
  best = np.zeros(count + 1)
  start = np.zeros(count + 1, np.int64)
  for j in range(1, count + 1):
    group_rows = ends[j] - ends[:j]  # the call of requests i..j-1, for every i < j
    if sizes.size:
      group_rows = np.where(group_rows <= sizes[-1],
                            sizes[np.minimum(np.searchsorted(sizes, group_rows), sizes.size - 1)],
                            group_rows)
    cost = best[:j] + overhead + group_rows * (per_row + per_byte * longest[j - 1])
    start[j] = np.argmin(cost)  # the first minimum: on a tie, the fewer calls
    best[j] = cost[start[j]]
  cuts = [count]
  while cuts[-1]:
    cuts.append(int(start[cuts[-1]]))
  cuts.reverse()
  if len(cuts) == 2:
    return [list(range(count))]
  return [order[a:b].tolist() for a, b in zip(cuts, cuts[1:])]
