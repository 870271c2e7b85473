"""serve.py over many rollouts: its memory after each of N versions, and the first request after
a rollout with and without TF Serving's warm-up file.

    .venv/bin/python -m benchmarks.serve_rollout [--config configs/tiny.json] [--versions 50]
        [--out results.json]

Exports an `AlbertClassifier` of the config (random weights, 2 labels, ALBERT's SentencePiece
model) once, starts `serve.py` on 127.0.0.1 over an empty-but-one-version base path (policy
latest 1, --file_system_poll_wait_seconds=1), then copies the export in as version 2, 3, ...
one at a time: each is loaded, warmed up, made AVAILABLE and the previous one unloaded. After
each rollout it reads the server's resident memory (/proc/PID/status VmRSS) and times the first
and second request. Every other version has its `assets.extra/tf_serving_warmup_requests`
removed before the copy, so the first request after those rollouts pays the functions' first
run; the table compares the two kinds. Prints a line per version and a summary: RSS at version
2, 10, N and its growth per version over the last half (a leak shows as a steady slope).
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.export.task_models import export_classifier  # noqa: E402
from albert_tf.export.warmup import WARMUP_FILE  # noqa: E402
from albert_tf.modeling.classifier import AlbertClassifier  # noqa: E402
from benchmarks.serve_bench import stop_server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM = os.path.join(os.path.dirname(ROOT), "shared", "data", "sentencepiece", "spiece.model")
TEXT = {"instances": ["a gripping, funny and moving film about three friends"]}


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _call(port, path, body=None):
  conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
  conn.request("GET" if body is None else "POST", path,
               body=None if body is None else json.dumps(body))
  response = conn.getresponse()
  data = response.read()
  conn.close()
  return response.status, json.loads(data)


def _rss_mb(pid):
  with open(f"/proc/{pid}/status") as f:
    for line in f:
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) / 1024
  raise RuntimeError("no VmRSS")


def _wait_available(port, version, deadline):
  while time.time() < deadline:
    status, answer = _call(port, "/v1/models/m")
    states = {int(v["version"]): v["state"] for v in answer["model_version_status"]}
    if states.get(version) == "AVAILABLE" and states.get(version - 1) in (None, "END"):
      return
    time.sleep(0.05)
  raise TimeoutError(f"version {version} not rolled out: {states}")


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", default=os.path.join(ROOT, "configs", "tiny.json"))
  p.add_argument("--versions", type=int, default=50)
  p.add_argument("--max_seq_length", type=int, default=128)
  p.add_argument("--out")
  args = p.parse_args(argv)
  work = tempfile.mkdtemp(prefix="rollout-")
  process = None
  try:
    config = AlbertConfig.from_json_file(args.config)
    if not os.path.exists(SPM):
      raise SystemExit(f"{SPM} is missing")
    max_len = min(args.max_seq_length, config.max_position_embeddings)
    source = export_classifier(AlbertClassifier(config, 2), os.path.join(work, "export"),
                               ["negative", "positive"], spm_model_file=SPM,
                               max_seq_length=max_len)
    base = os.path.join(work, "m")
    shutil.copytree(source, os.path.join(base, "1"))
    port = _free_port()
    log = open(os.path.join(work, "server.log"), "w")
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "serve.py"), "--model_name=m",
         f"--model_base_path={base}", f"--rest_api_port={port}", "--port=0",
         "--file_system_poll_wait_seconds=1"], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.time() + 300
    while True:
      assert process.poll() is None, open(log.name).read()
      try:
        if _call(port, "/v1/models/m")[0] == 200:
          break
      except OSError:
        time.sleep(0.2)
      assert time.time() < deadline, "server did not start"
    rows = []
    for version in range(2, args.versions + 2):
      warmed = version % 2 == 0
      staged = os.path.join(work, f"staged-{version}")
      shutil.copytree(source, staged)
      if not warmed:
        os.remove(os.path.join(staged, WARMUP_FILE))
      os.rename(staged, os.path.join(base, str(version)))
      _wait_available(port, version, time.time() + 300)
      times = []
      for _ in range(2):
        start = time.perf_counter()
        status, answer = _call(port, "/v1/models/m:predict", TEXT)
        times.append((time.perf_counter() - start) * 1000)
        assert status == 200, answer
      shutil.rmtree(os.path.join(base, str(version - 1)))  # what a rollout script cleans up
      rows.append({"version": version, "warm_up": warmed, "rss_mb": _rss_mb(process.pid),
                   "first_ms": times[0], "second_ms": times[1]})
      print("version {version:3d} warm-up {warm_up!s:5} RSS {rss_mb:7.1f} MB first "
            "{first_ms:8.1f} ms second {second_ms:6.1f} ms".format(**rows[-1]), flush=True)
    half = rows[len(rows) // 2:]
    slope = (half[-1]["rss_mb"] - half[0]["rss_mb"]) / max(1, len(half) - 1)
    summary = {
        "config": os.path.basename(args.config), "versions": args.versions,
        "rss_mb_at": {str(r["version"]): round(r["rss_mb"], 1) for r in rows
                      if r["version"] in (2, 10, rows[-1]["version"])},
        "rss_growth_mb_per_version_last_half": round(slope, 2),
        "first_ms_median_with_warm_up": round(statistics.median(
            r["first_ms"] for r in rows if r["warm_up"]), 1),
        "first_ms_median_without_warm_up": round(statistics.median(
            r["first_ms"] for r in rows if not r["warm_up"]), 1),
        "second_ms_median": round(statistics.median(r["second_ms"] for r in rows), 1)}
    print(json.dumps(summary, indent=1))
    if args.out:
      with open(args.out, "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    return 0
  finally:
    stop_server(process)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
  sys.exit(main())
