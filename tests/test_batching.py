"""Server-side batching (albert_tf/serving/batching.py): TF Serving's --enable_batching and
--batching_parameters_file, with every answer identical to its unbatched answer.

The run functions here are plain numpy (rows doubled), so a test shows the queue's behaviour in
milliseconds; one tiny SavedModel shows `batchable()` on real signatures. Every wait is bounded
and every thread joined."""

import concurrent.futures
import os
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import rest_json
from albert_tf.serving import batching, grouping
from conftest import float32_atol

WAIT = 20  # seconds: the bound on any wait; a test that hits it has failed


class Recorder:
  """A signature's run: `doubled` = x * 2 row by row, `batch_rows` = the rows of the batch it
  ran in. It keeps each call's inputs, and after `hold()` the next call waits for `release()`,
  so requests can be queued behind it deterministically."""

  def __init__(self, fail=None):
    self.calls = []
    self.fail = fail
    self.entered = threading.Event()
    self.gate = threading.Event()
    self.gate.set()
    self.lock = threading.Lock()

  def hold(self):
    self.gate.clear()
    self.entered.clear()

  def release(self):
    self.gate.set()

  def __call__(self, arrays):
    with self.lock:
      self.calls.append({k: v.copy() for k, v in arrays.items()})
    self.entered.set()
    assert self.gate.wait(WAIT)
    if self.fail:
      self.fail(arrays)
    x = arrays["x"]
    return {"doubled": x * 2, "batch_rows": np.full(len(x), len(x))}


def params(**kwargs):
  kwargs.setdefault("num_batch_threads", 1)
  return batching.BatchingParameters(**kwargs)


def wait_until(condition):
  deadline = time.monotonic() + WAIT
  while not condition():
    assert time.monotonic() < deadline, "timed out"
    time.sleep(0.002)


def rows(*values, width=2):
  """A request of len(values) rows of `width` float32s each, row i filled with values[i]."""
  return {"x": np.repeat(np.array(values, np.float32)[:, None], width, axis=1)}


def queue_behind_a_running_batch(batcher, run, pool, requests):
  """Submits `requests` in order while one batch is running, so they wait in the queue
  together; returns their futures once all are queued, with the running batch released."""
  run.hold()
  first = pool.submit(batcher.submit, rows(100))
  assert run.entered.wait(WAIT)
  futures = []
  for i, request in enumerate(requests):
    futures.append(pool.submit(batcher.submit, request))
    wait_until(lambda n=i + 1: batcher.num_enqueued_tasks() == n)
  run.release()
  np.testing.assert_array_equal(first.result(WAIT)["doubled"], rows(100)["x"] * 2)
  return futures


@pytest.fixture
def pool():
  with concurrent.futures.ThreadPoolExecutor(8) as executor:
    yield executor


def test_queued_requests_run_as_one_batch_and_each_gets_exactly_its_own_rows(pool):
  run = Recorder()
  with batching.Batcher(params(max_batch_size=8), run, name="m/1") as batcher:
    requests = [rows(1), rows(2, 3), rows(4, 5, 6)]
    futures = queue_behind_a_running_batch(batcher, run, pool, requests)
    answers = [f.result(WAIT) for f in futures]
  assert len(run.calls) == 2  # the running batch, then the three requests merged
  np.testing.assert_array_equal(run.calls[1]["x"][:, 0], [1, 2, 3, 4, 5, 6])
  for request, answer in zip(requests, answers):
    np.testing.assert_array_equal(answer["doubled"], request["x"] * 2)
    np.testing.assert_array_equal(answer["batch_rows"], [6] * len(request["x"]))


@pytest.mark.parametrize("pad_variable_length_inputs", [False, True])
def test_requests_of_different_shapes_are_never_merged_or_padded(pool,
                                                                 pad_variable_length_inputs):
  # TF Serving would pad the shorter ids with their first element; we group by shape instead,
  # whatever the flag says, so every answer is the unbatched one.
  run = Recorder()
  with batching.Batcher(params(max_batch_size=8,
                               pad_variable_length_inputs=pad_variable_length_inputs),
                        run) as batcher:
    requests = [rows(1, width=3), rows(2, width=5), rows(3, width=3)]
    futures = queue_behind_a_running_batch(batcher, run, pool, requests)
    answers = [f.result(WAIT) for f in futures]
  widths = sorted((call["x"].shape[1], len(call["x"])) for call in run.calls[1:])
  assert widths == [(3, 2), (5, 1)]
  for request, answer in zip(requests, answers):
    np.testing.assert_array_equal(answer["doubled"], request["x"] * 2)


def test_a_partial_batch_waits_batch_timeout_micros_then_runs():
  run = Recorder()
  with batching.Batcher(params(max_batch_size=100, batch_timeout_micros=50_000), run) as batcher:
    start = time.monotonic()
    answer = batcher.submit(rows(7))
    waited = time.monotonic() - start
  assert waited >= 0.05
  np.testing.assert_array_equal(answer["doubled"], rows(7)["x"] * 2)


def test_a_full_batch_runs_without_waiting_out_the_timeout(pool):
  run = Recorder()
  with batching.Batcher(params(max_batch_size=3, batch_timeout_micros=WAIT * 10**6),
                        run) as batcher:
    futures = [pool.submit(batcher.submit, rows(1)), pool.submit(batcher.submit, rows(2, 3))]
    answers = [f.result(WAIT / 2) for f in futures]
  assert [a["batch_rows"][0] for a in answers] == [3, 3]


def test_a_full_queue_refuses_with_tf_servings_unavailable(pool):
  run = Recorder()
  with batching.Batcher(params(max_batch_size=1, max_enqueued_batches=1), run) as batcher:
    run.hold()
    running = pool.submit(batcher.submit, rows(1))
    assert run.entered.wait(WAIT)
    waiting = pool.submit(batcher.submit, rows(2))
    wait_until(lambda: batcher.num_enqueued_tasks() == 1)
    with pytest.raises(batching.Unavailable,
                       match="The batch scheduling queue to which this task was submitted is "
                       "full"):
      batcher.submit(rows(3))
    run.release()
    assert running.result(WAIT)["doubled"][0, 0] == 2
    assert waiting.result(WAIT)["doubled"][0, 0] == 4


def test_a_request_larger_than_max_batch_size_is_refused_before_it_runs():
  run = Recorder()
  with batching.Batcher(params(max_batch_size=4), run) as batcher:
    with pytest.raises(rest_json.RequestError,
                       match="Task size 5 is larger than maximum input batch size 4"):
      batcher.submit(rows(1, 2, 3, 4, 5))
  assert not run.calls


def test_allowed_batch_sizes_pad_with_the_last_requests_first_row_and_drop_its_answers(pool):
  run = Recorder()
  with batching.Batcher(params(max_batch_size=4, allowed_batch_sizes=[2, 4]), run) as batcher:
    futures = queue_behind_a_running_batch(batcher, run, pool, [rows(1), rows(2, 3)])
    answers = [f.result(WAIT) for f in futures]
  # The lone running request (1 row) was padded to 2, the merged 3 rows to 4, each with a copy
  # of its last request's first row (TF Serving's batching_session.cc).
  np.testing.assert_array_equal(run.calls[0]["x"][:, 0], [100, 100])
  np.testing.assert_array_equal(run.calls[1]["x"][:, 0], [1, 2, 3, 2])
  np.testing.assert_array_equal(answers[0]["doubled"], rows(1)["x"] * 2)
  np.testing.assert_array_equal(answers[1]["doubled"], rows(2, 3)["x"] * 2)
  np.testing.assert_array_equal(answers[1]["batch_rows"], [4, 4])


def refuse_negatives(arrays):
  negative = np.flatnonzero(arrays["x"][:, 0] < 0)
  if negative.size:
    raise rest_json.RequestError(f"x row {negative[0]} is negative")


def test_a_bad_request_in_a_merged_batch_fails_alone_with_its_own_row_numbers(pool):
  run = Recorder(fail=refuse_negatives)
  with batching.Batcher(params(max_batch_size=8), run) as batcher:
    requests = [rows(1), rows(2, -3), rows(4)]
    futures = queue_behind_a_running_batch(batcher, run, pool, requests)
    np.testing.assert_array_equal(futures[0].result(WAIT)["doubled"], rows(1)["x"] * 2)
    with pytest.raises(rest_json.RequestError, match=r"^x row 1 is negative$"):
      futures[1].result(WAIT)
    np.testing.assert_array_equal(futures[2].result(WAIT)["doubled"], rows(4)["x"] * 2)
  assert [len(call["x"]) for call in run.calls] == [1, 4, 1, 2, 1]


def test_an_error_of_the_batch_reaches_every_request_in_it(pool):
  def broken(arrays):
    if len(arrays["x"]) > 1:
      raise MemoryError("out of memory")
  run = Recorder(fail=broken)
  with batching.Batcher(params(max_batch_size=8), run) as batcher:
    futures = queue_behind_a_running_batch(batcher, run, pool, [rows(1), rows(2)])
    for future in futures:
      with pytest.raises(MemoryError, match="out of memory"):
        future.result(WAIT)
  assert len(run.calls) == 2  # not rerun: the batch, not a request, failed


def test_close_runs_the_queued_requests_then_refuses_and_stops_its_threads(pool):
  run = Recorder()
  batcher = batching.Batcher(params(max_batch_size=100, batch_timeout_micros=10 * WAIT * 10**6,
                                    num_batch_threads=2), run)
  futures = [pool.submit(batcher.submit, rows(1)), pool.submit(batcher.submit, rows(2))]
  wait_until(lambda: batcher.num_enqueued_tasks() == 2)
  start = time.monotonic()
  batcher.close(timeout=2 * WAIT)
  assert time.monotonic() - start < WAIT  # the queued batch ran at once, not at its timeout
  assert [f.result(WAIT)["doubled"][0, 0] for f in futures] == [2, 4]
  threads = batcher._threads  # pylint: disable=protected-access
  assert threads and not any(thread.is_alive() for thread in threads)
  with pytest.raises(batching.Unavailable, match="closing"):
    batcher.submit(rows(3))


def test_a_request_whose_inputs_disagree_on_rows_runs_alone_for_the_signature_to_refuse(pool):
  def two_inputs(arrays):
    if len(arrays["x"]) != len(arrays["y"]):
      raise rest_json.RequestError(f"x has {len(arrays['x'])} rows but y has {len(arrays['y'])}")
    return {"sum": arrays["x"] + arrays["y"]}
  with batching.Batcher(params(max_batch_size=8, batch_timeout_micros=20_000),
                        two_inputs) as batcher:
    good = pool.submit(batcher.submit, {"x": np.ones([1]), "y": np.ones([1])})
    with pytest.raises(rest_json.RequestError, match="x has 2 rows but y has 1"):
      batcher.submit({"x": np.ones([2]), "y": np.ones([1])})
    np.testing.assert_array_equal(good.result(WAIT)["sum"], [2])


def write(tmp_path, text):
  path = tmp_path / "batching.pbtxt"
  path.write_text(text)
  return str(path)


def test_read_batching_parameters_reads_tf_servings_example(tmp_path):
  # tensorflow_serving/g3doc/serving_config.md's --batching_parameters_file, plus the rest.
  path = write(tmp_path, """
      max_batch_size { value: 128 }
      batch_timeout_micros { value: 0 }
      max_enqueued_batches { value: 1000000 }
      num_batch_threads { value: 8 }
      thread_pool_name { value: "model_server_batch_threads" }
      allowed_batch_sizes: 32
      allowed_batch_sizes: 128
      pad_variable_length_inputs: true
      enable_large_batch_splitting { value: false }
  """)
  assert batching.read_batching_parameters(path) == batching.BatchingParameters(
      max_batch_size=128, batch_timeout_micros=0, max_enqueued_batches=1000000,
      num_batch_threads=8, thread_pool_name="model_server_batch_threads",
      allowed_batch_sizes=(32, 128), pad_variable_length_inputs=True)


def test_read_batching_parameters_takes_tf_servings_defaults_for_absent_fields(tmp_path):
  path = write(tmp_path, "batch_timeout_micros { value: 5 }")
  params_ = batching.read_batching_parameters(path)
  assert (params_.max_batch_size, params_.batch_timeout_micros, params_.max_enqueued_batches,
          params_.allowed_batch_sizes, params_.pad_variable_length_inputs) == (1000, 5, 10, (),
                                                                                False)
  assert params_.num_batch_threads == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("text, words", [
    ("max_batch_siz { value: 8 }", "max_batch_siz"),
    ("max_batch_size: 8", "max_batch_size"),
    ("enable_large_batch_splitting { value: true }", "enable_large_batch_splitting"),
    ("max_execution_batch_size { value: 8 }", "max_execution_batch_size"),
    ("max_batch_size { value: 0 }", "max_batch_size must be at least 1"),
    ("num_batch_threads { value: 0 }", "num_batch_threads must be at least 1"),
    ("max_batch_size { value: 8 } allowed_batch_sizes: 4 allowed_batch_sizes: 2 "
     "allowed_batch_sizes: 8", "allowed_batch_sizes entries must be monotonically increasing"),
    ("max_batch_size { value: 16 } allowed_batch_sizes: 4 allowed_batch_sizes: 8",
     "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 8; "
     "expected 16"),
    ("allowed_batch_sizes: 8", "last entry was 8; expected 1000"),
])
def test_read_batching_parameters_refuses_what_it_cannot_honour_naming_file_and_field(
    tmp_path, text, words):
  path = write(tmp_path, text)
  with pytest.raises(ValueError) as error:
    batching.read_batching_parameters(path)
  assert path in str(error.value) and words in str(error.value)


@pytest.fixture(scope="module")
def signatures(tmp_path_factory):
  """A tiny SavedModel: `tags` (raw text in, a per-token output as long as the batch's longest
  text), `lengths` (raw text in, one number per text), `ids` (ids in, a per-token output)."""

  class Tiny(tf.Module):

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def tags(self, text):
      return {"tags": tf.strings.split(text).to_tensor("")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def lengths(self, text):
      return {"length": tf.strings.length(text), "pair": tf.stack([tf.strings.length(text)] * 2,
                                                                  axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="ids")])
    def ids(self, ids):
      return {"doubled": ids * 2}

  module = Tiny()
  path = str(tmp_path_factory.mktemp("tiny"))
  tf.saved_model.save(module, path, signatures={"tags": module.tags, "lengths": module.lengths,
                                                "ids": module.ids})
  return tf.saved_model.load(path).signatures


def test_batchable_refuses_a_text_signature_whose_output_length_depends_on_the_batch(signatures):
  ok, reason = batching.batchable(signatures["tags"])
  assert not ok and "'tags'" in reason and "'text'" in reason
  # Why: merged with a longer text, a short text's tags come back padded to that length.
  alone = signatures["tags"](text=tf.constant(["a b"]))["tags"]
  merged = signatures["tags"](text=tf.constant(["a b", "c d e f"]))["tags"][:1]
  assert alone.shape != merged.shape


def test_batchable_accepts_static_outputs_and_numeric_inputs(signatures):
  assert batching.batchable(signatures["lengths"])[0]
  ok, reason = batching.batchable(signatures["ids"])
  assert ok and "numeric" in reason


def test_a_batched_signature_answers_each_text_as_it_answers_it_alone(signatures, pool):
  # The server's path: rest_json.run on a loaded signature, texts of different lengths merged.
  function = signatures["lengths"]
  calls = []

  def run(arrays):
    calls.append(len(arrays["text"]))
    return rest_json.run(function, arrays)

  texts = [[b"a"], [b"a longer text", b"mid"], [b"\xc3\xa9t\xc3\xa9"]]
  alone = [rest_json.run(function, {"text": np.array(t, object)}) for t in texts]
  with batching.Batcher(params(max_batch_size=8, batch_timeout_micros=10 * WAIT * 10**6),
                        run) as batcher:
    futures = [pool.submit(batcher.submit, {"text": np.array(t, object)}) for t in texts]
    wait_until(lambda: batcher.num_enqueued_tasks() == 3)
    batcher.close(timeout=WAIT)
    answers = [f.result(WAIT) for f in futures]
  assert calls == [4]
  for one, batched in zip(alone, answers):
    assert one.keys() == batched.keys()
    for name in one:
      np.testing.assert_array_equal(batched[name], one[name])


# Grouping by length (serving/grouping.py, ours): a merged batch of texts runs as calls of texts
# of like length when the signature's call costs say that is cheaper.


class FixedCosts:
  """A signature's call costs, fixed: (overhead, per_row, per_byte) seconds."""

  def __init__(self, coefficients):
    self.fixed = coefficients

  def record(self, rows, longest, seconds):
    del rows, longest, seconds

  def coefficients(self):
    return self.fixed


# A call costs 50 ms, plus 1 ms per byte of its longest text per row: two calls of four short
# texts and of two long ones cost less than one call padding the short ones to the long ones'.
SPLIT = FixedCosts((0.05, 0.0, 0.001))


def text_run(calls, refuse=b""):
  """A raw-text signature's run: per row its text's bytes and the longest text of its call (the
  length a raw-text export computes the call at); `calls` gets each call's texts. A text
  starting with `refuse` is a bad request (refuse=b"": none)."""

  def run(arrays):
    texts = list(arrays["text"])
    calls.append(texts)
    bad = [i for i, t in enumerate(texts) if refuse and t.startswith(refuse)]
    if bad:
      raise rest_json.RequestError(f"text row {bad[0]} is refused")
    lengths = np.array([len(t) for t in texts])
    return {"bytes": lengths, "call_longest": np.full(len(texts), lengths.max())}
  return run


def texts(*values):
  return {"text": np.array(values, object)}


def run_together(batcher, pool, requests):
  """Submits `requests` into one open batch, then closes the batcher, which runs that batch at
  once; returns each request's future."""
  futures = []
  for i, request in enumerate(requests):
    futures.append(pool.submit(batcher.submit, request))
    wait_until(lambda n=i + 1: batcher.num_enqueued_tasks() == n)
  batcher.close(timeout=WAIT)
  return futures


LONG_A, LONG_B = b"x" * 100, b"y" * 90
MIXED = [texts(b"a fine film"), texts(LONG_A), texts(b"dull", b"bad"), texts(LONG_B)]


def grouped_batcher(run, costs=SPLIT, **kwargs):
  return batching.Batcher(params(max_batch_size=16, batch_timeout_micros=10 * WAIT * 10**6,
                                 **kwargs), run, costs=costs)


def test_a_batch_of_short_and_long_texts_runs_as_calls_each_at_its_own_longest_text(pool):
  calls = []
  futures = run_together(grouped_batcher(text_run(calls)), pool, MIXED)
  answers = [f.result(WAIT) for f in futures]
  # Shortest first, each call at its own longest row: no short text padded to 100 bytes.
  assert calls == [[b"dull", b"bad", b"a fine film"], [LONG_B, LONG_A]]
  for request, answer in zip(MIXED, answers):  # each request exactly its own rows, in order
    np.testing.assert_array_equal(answer["bytes"], [len(t) for t in request["text"]])
  assert [a["call_longest"].tolist() for a in answers] == [[11], [100], [11, 11], [100]]


@pytest.mark.parametrize("why", ["no cost figures yet", "grouping off"])
def test_a_batch_of_texts_stays_one_call_without_cost_figures_or_with_grouping_off(pool, why):
  calls = []
  if why == "grouping off":
    batcher = grouped_batcher(text_run(calls), group_by_length=False)
  else:
    batcher = grouped_batcher(text_run(calls), costs=grouping.CallCosts())
  futures = run_together(batcher, pool, MIXED)
  answers = [f.result(WAIT) for f in futures]
  assert calls == [[b"a fine film", LONG_A, b"dull", b"bad", LONG_B]]  # as TF Serving runs it
  for request, answer in zip(MIXED, answers):
    np.testing.assert_array_equal(answer["bytes"], [len(t) for t in request["text"]])


def test_requests_of_token_ids_are_never_grouped(pool):
  # Ids merge only at one shape: a call is already at every request's own length.
  run = Recorder()
  with batching.Batcher(params(max_batch_size=8), run, costs=SPLIT) as batcher:
    futures = queue_behind_a_running_batch(batcher, run, pool, [rows(1), rows(2, 3), rows(4)])
    answers = [f.result(WAIT) for f in futures]
  np.testing.assert_array_equal(run.calls[1]["x"][:, 0], [1, 2, 3, 4])
  np.testing.assert_array_equal(answers[1]["doubled"], rows(2, 3)["x"] * 2)


def test_a_bad_request_fails_alone_and_the_other_calls_of_its_batch_run_once(pool):
  calls = []
  requests = MIXED + [texts(b"no good")]
  futures = run_together(grouped_batcher(text_run(calls, refuse=b"no")), pool, requests)
  with pytest.raises(rest_json.RequestError, match=r"^text row 0 is refused$"):
    futures[-1].result(WAIT)
  for request, future in zip(MIXED, futures):
    np.testing.assert_array_equal(future.result(WAIT)["bytes"], [len(t) for t in request["text"]])
  # The short call failed on "no good" and was run again request by request; the long call ran
  # once, untouched.
  assert calls == [[b"dull", b"bad", b"no good", b"a fine film"], [b"dull", b"bad"],
                   [b"no good"], [b"a fine film"], [LONG_B, LONG_A]]


def test_text_lengths_add_a_pairs_texts_and_take_the_longest_of_a_rows_options():
  pair = {"text_a": np.array([b"ab", "\u00e9t\u00e9"], object),  # 3 characters, 5 bytes
          "text_b": np.array([b"c", b""], object)}
  np.testing.assert_array_equal(grouping.text_lengths(pair), [3, 5])
  race = {"article": np.array([b"12345"], object), "options": np.array([[b"a", b"abc"]], object),
          "ids": np.zeros([1, 3], np.int32)}
  np.testing.assert_array_equal(grouping.text_lengths(race), [8])
  assert grouping.text_lengths({"ids": np.zeros([2, 3], np.int32)}) is None


def test_call_costs_are_fitted_to_the_calls_seen_and_none_until_they_tell_padding_apart():
  costs = grouping.CallCosts()
  assert costs.coefficients() is None
  shapes = [(rows_, longest) for rows_ in (1, 4, 16) for longest in (10, 60, 200)]
  for rows_, longest in shapes:
    costs.record(rows_, longest, 0.004 + 0.0002 * rows_ + 3e-6 * rows_ * longest)
  # Exact data: the least-squares answer moves from the coefficients by the float64 rounding of
  # the costs (a few ulps each) times the condition number of the columns as fitted (scaled to
  # like size, so the scaled coefficients are of like size too: 3 of them, 16 ulps in all).
  x = np.array([[1, rows_, rows_ * longest] for rows_, longest in shapes], np.float64)
  rtol = 16 * np.finfo(np.float64).eps * np.linalg.cond(x / np.abs(x).max(axis=0))
  np.testing.assert_allclose(costs.coefficients(), (0.004, 0.0002, 3e-6), rtol=rtol)
  single_rows = grouping.CallCosts()
  for longest in range(10, 30):  # one row each: a call's cost cannot be told from a row's
    single_rows.record(1, longest, 0.004 + 3e-6 * longest)
  assert single_rows.coefficients() is None


def test_plan_keeps_one_call_when_padding_to_an_allowed_batch_size_eats_the_gain():
  lengths, rows_ = [10, 10, 10, 10, 100], [1] * 5
  cheap_calls = (0.001, 0.0, 0.001)
  assert grouping.plan(lengths, rows_, cheap_calls) == [[0, 1, 2, 3], [4]]
  # Each call padded to 8 rows, the long one alone would cost 8 long rows anyway.
  assert grouping.plan(lengths, rows_, cheap_calls, allowed_batch_sizes=(8,)) == [
      [0, 1, 2, 3, 4]]
  assert grouping.plan(lengths, rows_, None) == [[0, 1, 2, 3, 4]]


def test_a_raw_text_export_answers_each_grouped_text_as_it_answers_it_alone(classifier_export,
                                                                            pool):
  model, _, loaded = classifier_export
  function = loaded.signatures["serving_default"]
  # Calls of other shapes may sum in other orders: a few ulps of each value per term of the
  # model's longest sum, its feed-forward layer's.
  terms = model.config.intermediate_size
  calls = []

  def run(arrays):
    calls.append(len(arrays["text_a"]))
    return rest_json.run(function, arrays)

  sentences = ["it 's a charming and often affecting journey .", "unflinchingly bleak .",
               "the acting , costumes , music , cinematography and sound are all astounding "
               "given the production 's austere locales .", "a gorgeous , witty , seductive "
               "movie .", "it 's slow -- very , very slow ."]
  requests = [{"text_a": np.array([t.encode()], object)} for t in sentences]
  alone = [rest_json.run(function, r) for r in requests]
  futures = run_together(grouped_batcher(run, costs=FixedCosts((3e-3, 0.0, 1e-4))), pool,
                         requests)
  answers = [f.result(WAIT) for f in futures]
  assert 1 < len(calls) < len(requests) and sum(calls) == len(requests)
  for one, batched in zip(alone, answers):
    assert one.keys() == batched.keys()
    for name, value in one.items():
      if value.dtype.kind == "f":
        np.testing.assert_allclose(batched[name], value, rtol=0,
                                   atol=float32_atol(value, terms))
      else:
        np.testing.assert_array_equal(batched[name], value)
