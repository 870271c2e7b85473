"""serve.py's own overhead: the SST-2 classifier export answered over HTTP against the same
signature called in-process, at 1, 4 and 16 concurrent clients, in one run.

    .venv/bin/python -m benchmarks.serve_bench [--config configs/albert_base_v2.json]
        [--clients 1,4,16] [--requests 96] [--out results.json]

Exports an `AlbertClassifier` of the config (random weights: latency does not depend on them;
2 labels, ALBERT's SentencePiece model, max_seq_length 128, or the config's positions if fewer)
with `export_classifier` into TF Serving's layout, starts `serve.py` on 127.0.0.1 with it, and sends SST-2 dev sentences one
per request (`{"instances": [sentence]}`, the row format) from C client threads, each on its
own keep-alive connection; then C threads call the loaded `serving_default` in this process
with the same sentences. In-process and HTTP alternate per client count (in-process first, then
HTTP, then in-process again; the in-process figures are the median of both passes). Prints,
per client count, latency p50 / p99 (ms per request) and requests/s of both and their ratios.
The clients run on the same machine as the server and share its cores: on 2 cores their JSON
and socket work is part of what the HTTP column pays.

`--peer` then times Model Garden's export of the same classifier in this process against ours,
at batch 1 on the same sentences, calls alternating: its `SentencepieceTokenizer` and
`BertPackInputs` (fixed at max_seq_length, as TF Hub's preprocessors pack) before
`BertClassifier` on its `AlbertEncoder`, saved and loaded as a SavedModel like ours.

    .venv/bin/python -m benchmarks.serve_bench --batching [--clients 1,4,16,64] [--requests 256]
        [--batching_parameters "max_batch_size { value: 64 } ..."]

`--batching` instead compares serve.py's three ways of running concurrent requests, over HTTP
with the same export and sentences: `unbatched` (each request its own call), `batched`
(`--enable_batching --group_batches_by_length=false`: a merged batch is one call at its longest
sentence) and `grouped` (`--enable_batching`: a merged batch runs as calls grouped by length when
the measured call costs say that is cheaper). Each server runs alone, one after another, warmed
up first (its grouping's cost figures included); per client count and server, p50 / p99 and
requests/s, and requests/s against unbatched.
"""

import argparse
import csv
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.export.task_models import export_classifier  # noqa: E402
from albert_tf.modeling.classifier import AlbertClassifier  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "..", "shared", "data")


def _sentences():
  with open(os.path.join(DATA, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
    return [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _clients(count, per_client, sentences, ask):
  """Runs `count` threads, each asking `per_client` sentences through `ask(state, sentence)`
  (state: the thread's own, e.g. a connection); returns (latencies in s, wall seconds)."""
  latencies, errors = [], []

  def client(c):
    state = {}
    try:
      for i in range(per_client):
        sentence = sentences[(c * per_client + i) % len(sentences)]
        start = time.perf_counter()
        ask(state, sentence)
        latencies.append(time.perf_counter() - start)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(repr(e))
    finally:
      if "connection" in state:
        state["connection"].close()

  threads = [threading.Thread(target=client, args=(c,)) for c in range(count)]
  start = time.perf_counter()
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  if errors:
    raise RuntimeError(errors[0])
  return latencies, time.perf_counter() - start


def _summary(latencies, wall):
  ordered = sorted(latencies)
  return {"p50_ms": 1000 * statistics.median(ordered),
          "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
          "requests_per_s": len(ordered) / wall}


BATCHING = ("max_batch_size { value: 64 } batch_timeout_micros { value: 0 } "
            "num_batch_threads { value: 1 } max_enqueued_batches { value: 100 }")

SERVERS = {  # --batching's servers: their flags beside the model's
    "unbatched": [],
    "batched": ["--enable_batching", "--group_batches_by_length=false"],
    "grouped": ["--enable_batching"],
}


def _start_server(folder, flags):
  """serve.py on the export in `folder`/sst2 with `flags`, answering; returns (process, ask):
  ask(state, sentence) sends one sentence over the thread's own keep-alive connection."""
  port = _free_port()
  log_path = os.path.join(folder, "server.log")
  log = open(log_path, "w")  # pylint: disable=consider-using-with
  server = subprocess.Popen(
      [sys.executable, os.path.join(REPO, "serve.py"), "--model_name=sst2",
       f"--model_base_path={os.path.join(folder, 'sst2')}", f"--rest_api_port={port}",
       "--port=0"] + flags, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)

  def ask(state, sentence):
    if "connection" not in state:
      state["connection"] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    state["connection"].request("POST", "/v1/models/sst2:predict",
                                json.dumps({"instances": [sentence]}))
    response = state["connection"].getresponse()
    answer = json.loads(response.read())
    assert response.status == 200, answer

  deadline = time.time() + 300
  while True:
    try:
      ask({}, "a first request")
      return server, ask
    except OSError:
      if server.poll() is not None or time.time() > deadline:
        with open(log_path) as f:
          raise RuntimeError(f.read()[-3000:]) from None
      time.sleep(0.5)


def stop_server(server):
  """SIGTERM to a running server, then a kill if it has not ended within a minute."""
  if server is not None and server.poll() is None:
    server.send_signal(signal.SIGTERM)
    try:
      server.wait(60)
    except subprocess.TimeoutExpired:
      server.kill()


def _compare_batching(args, folder, sentences):
  """--batching: each of SERVERS in turn at every client count; the rows of figures."""
  with open(os.path.join(folder, "batching.config"), "w") as f:
    f.write(args.batching_parameters)
  counts = [int(c) for c in args.clients.split(",")]
  figures = {}
  for name, flags in SERVERS.items():
    if flags:
      flags = flags + [f"--batching_parameters_file={os.path.join(folder, 'batching.config')}"]
    server, ask = _start_server(folder, flags)
    try:
      for count in (1, 4, max(counts)):  # warm up: threads, lengths, grouping's call costs
        _clients(count, max(2, 32 // count), sentences, ask)
      for count in counts:
        figures[name, count] = _summary(*_clients(count, max(1, args.requests // count),
                                                  sentences, ask))
    finally:
      stop_server(server)
  print("| clients | " + " | ".join(f"{name} p50 / p99 ms | req/s" for name in SERVERS) +
        " | req/s " + " | req/s ".join(f"{name} / unbatched" for name in list(SERVERS)[1:]) +
        " |")
  print("|---" * (1 + 2 * len(SERVERS) + len(SERVERS) - 1) + "|")
  rows = []
  for count in counts:
    row = {"clients": count, **{name: figures[name, count] for name in SERVERS}}
    rows.append(row)
    cells = [f"{row[name]['p50_ms']:.1f} / {row[name]['p99_ms']:.1f} | "
             f"{row[name]['requests_per_s']:.1f}" for name in SERVERS]
    ratios = [f"{row[name]['requests_per_s'] / row['unbatched']['requests_per_s']:.2f}"
              for name in list(SERVERS)[1:]]
    print(f"| {count} | " + " | ".join(cells + ratios) + " |")
  return rows


def _peer_export(config, folder, seq_length):
  """Model Garden's raw-text classifier (random weights), saved to `folder`/peer: its loaded
  `serving_default(text)` -> logits."""
  # pylint: disable=import-outside-toplevel
  from official.nlp.modeling import layers, models
  from benchmarks.train_step_bench import peer_encoder
  tokenizer = layers.SentencepieceTokenizer(
      lower_case=True, model_file_path=os.path.join(DATA, "sentencepiece", "spiece.model"))
  pack = layers.BertPackInputs(seq_length,
                               special_tokens_dict=tokenizer.get_special_tokens_dict())
  classifier = models.BertClassifier(peer_encoder(config), num_classes=2)
  module = tf.Module()
  module.tokenizer, module.pack, module.classifier = tokenizer, pack, classifier

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def serving(text):
    return {"logits": classifier(pack([tokenizer(text)]), training=False)}
  serving(tf.constant(["warm up"]))
  path = os.path.join(folder, "peer")
  tf.saved_model.save(module, path, signatures={"serving_default": serving})
  return tf.saved_model.load(path).signatures["serving_default"]


def _against_peer(serve, peer, sentences, calls):
  """Batch-1 latency of ours and the peer's export, calls alternating: the figures per side."""
  times = {"ours": [], "peer": []}
  calls_of = {"ours": lambda t: serve(text_a=t), "peer": lambda t: peer(text=t)}
  for name, call in calls_of.items():  # warm up
    for sentence in sentences[:4]:
      call(tf.constant([sentence]))
  for i in range(calls):
    text = tf.constant([sentences[i % len(sentences)]])
    for name in (("ours", "peer") if i % 2 == 0 else ("peer", "ours")):
      start = time.perf_counter()
      for value in calls_of[name](text).values():
        value.numpy()
      times[name].append(time.perf_counter() - start)
  return {name: _summary(values, sum(values)) for name, values in times.items()}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
  parser.add_argument("--clients", help="client counts (default 1,4,16; --batching 1,4,16,64)")
  parser.add_argument("--requests", type=int, default=96, help="requests per client count")
  parser.add_argument("--out", help="also write the figures as JSON here")
  parser.add_argument("--peer", action="store_true",
                      help="also time Model Garden's export at batch 1 in this process")
  parser.add_argument("--peer_calls", type=int, default=120, help="--peer's calls per side")
  parser.add_argument("--batching", action="store_true",
                      help="compare serve.py unbatched, batched and batched grouped by length")
  parser.add_argument("--batching_parameters", default=BATCHING,
                      help="--batching's BatchingParameters (TF Serving's text format)")
  args = parser.parse_args(argv)
  args.clients = args.clients or ("1,4,16,64" if args.batching else "1,4,16")
  folder = tempfile.mkdtemp(prefix="serve_bench-")
  server = None
  try:
    config = AlbertConfig.from_json_file(args.config)
    model = AlbertClassifier(config, 2)
    model(model.encoder.dummy_inputs(1, 8))
    export = export_classifier(model, os.path.join(folder, "sst2", "1"), ["0", "1"],
                               spm_model_file=os.path.join(DATA, "sentencepiece", "spiece.model"),
                               max_seq_length=min(128, config.max_position_embeddings))
    sentences = _sentences()
    if args.batching:
      print(f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
      rows = _compare_batching(args, folder, sentences)
      print(f"load average after: {os.getloadavg()[0]:.2f}")
      if args.out:
        with open(args.out, "w") as f:
          json.dump(rows, f, indent=1)
      return 0
    serve = tf.saved_model.load(export).signatures["serving_default"]
    server, over_http = _start_server(folder, [])

    def in_process(state, sentence):
      del state
      for value in serve(text_a=tf.constant([sentence])).values():
        value.numpy()

    for count in (4, 1):  # warm both paths (threads included)
      _clients(count, 2, sentences, over_http)
      _clients(count, 2, sentences, in_process)
    rows = []
    print(f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
    print("| clients | in-process p50 / p99 ms | req/s | HTTP p50 / p99 ms | req/s | "
          "p50 HTTP / in-process | req/s HTTP / in-process |")
    print("|---|---|---|---|---|---|---|")
    for count in [int(c) for c in args.clients.split(",")]:
      per_client = max(1, args.requests // count)
      first = _clients(count, per_client, sentences, in_process)
      http_run = _summary(*_clients(count, per_client, sentences, over_http))
      second = _clients(count, per_client, sentences, in_process)
      local = {k: statistics.median([_summary(*first)[k], _summary(*second)[k]])
               for k in ("p50_ms", "p99_ms", "requests_per_s")}
      rows.append({"clients": count, "in_process": local, "http": http_run})
      print(f"| {count} | {local['p50_ms']:.1f} / {local['p99_ms']:.1f} | "
            f"{local['requests_per_s']:.1f} | {http_run['p50_ms']:.1f} / "
            f"{http_run['p99_ms']:.1f} | {http_run['requests_per_s']:.1f} | "
            f"{http_run['p50_ms'] / local['p50_ms']:.2f} | "
            f"{http_run['requests_per_s'] / local['requests_per_s']:.2f} |")
    if args.peer:
      seq_length = min(128, config.max_position_embeddings)
      peer = _against_peer(serve, _peer_export(config, folder, seq_length), sentences,
                           args.peer_calls)
      print(f"\nbatch 1 in-process, {args.peer_calls} SST-2 dev sentences, calls alternating:")
      print("| export | p50 / p99 ms |\n|---|---|")
      print(f"| ours (each request at its longest text) | {peer['ours']['p50_ms']:.1f} / "
            f"{peer['ours']['p99_ms']:.1f} |")
      print(f"| Model Garden (BertPackInputs at {seq_length}) | {peer['peer']['p50_ms']:.1f} / "
            f"{peer['peer']['p99_ms']:.1f} |")
      print(f"p50 ours / Model Garden: {peer['ours']['p50_ms'] / peer['peer']['p50_ms']:.2f}")
      rows.append({"batch_1_in_process_against_model_garden": peer})
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.out:
      with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
  finally:
    stop_server(server)
    shutil.rmtree(folder, ignore_errors=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
