"""Throughput of create_pretraining_data.py against Model Garden's script, same corpus, same run.

  .venv/bin/python benchmarks/create_pretraining_data_bench.py [--corpus GLOB] [--repeats N]
      [--only NAMES] [--max_seq_length N] [--dupe_factor N] [--num_shards N]
      [--out results.json]

Every configuration runs as its own subprocess; its time is the wall clock of the whole command
(interpreter start-up and imports included) and instances/s = instances written / wall seconds.
Repeats are interleaved (A, B, C, ..., then A, B, C, ... again); the table gives medians.

Instances are counted, untimed, by reading each output TFRecord with tf.data in this process
after all the timed runs (once TensorFlow has run here, its idle thread pools measurably slow
the subprocesses on a 2-core machine). Ours must write the same count in every repeat (it is
deterministic; its own metadata count is checked too). The peer's count varies a little from
run to run (its n-gram masking draws the n-gram length from the unseeded global
`random.choices`, not from its seeded rng), so a row's instances/s is the median of its runs'.

Other processes on the machine distort the figures, the two-worker runs most. Before each run
the harness waits (up to --quiet_wait seconds) until the other processes use under 0.25 of a
core, and for each run it records how many cores the rest of the machine used meanwhile
(from /proc/stat, less the run's own CPU time). A run disturbed that way (0.25 cores or more)
is discarded and rerun, up to --retries times; the table shows the largest figure among a
row's kept runs and how many of them were disturbed.

--max_seq_length, --dupe_factor and --max_predictions_per_seq replace COMMON's values for
both programs; --num_shards N makes ours write N shards (the peer always writes one).

Configurations: max_seq_length 128, dupe_factor 1, max_predictions_per_seq 20,
masked_lm_prob 0.15, random_seed 12345, lower-cased, n-gram (n <= 3) whole-word masking in
both programs:

  ours    create_pretraining_data.py (top level) with --num_workers 1 and 2, in SentencePiece
          mode (--spm_model_file) and in WordPiece mode (--vocab_file); its other flags keep the
          original ALBERT script's defaults (sentence-order pairs, --ngram 3,
          --do_whole_word_mask).
  ours    the Apache Beam pipeline (--beam_pipeline_options) on the DirectRunner in
          multi_processing mode with --direct_num_workers 1 and 2, SentencePiece: the same
          shards as the local path (its tests check that), Beam's start-up and its passing of
          records between worker processes included.
  ours    SentencePiece, 1 worker, with --random_next_sentence (NSP-style pairs, as the peer
          makes): from the same text the peer writes ~40% more instances than SOP mode, so this
          row compares like with like. The "input MB/s" columns compare the same way without it.
  peer    python -m official.nlp.data.create_pretraining_data (tf-models-official), with
          --tokenization WordPiece --vocab_file and with --tokenization SentencePiece
          --sp_model_file, --do_whole_word_mask --max_ngram_size 3 (its n-gram masking, the
          nearest to ALBERT's; --peer_default_masking runs its per-token default instead).
          It is single-process: it has no worker flag.

WordPiece vocab: no English WordPiece vocab is available offline, so a BERT-style vocab.txt is
derived from the SentencePiece model into the temp dir (word-initial "▁x" -> "x", other pieces
-> "##x", both forms of every character, and [PAD] [UNK] [CLS] [SEP] [MASK]); both programs
use that same file. The corpus is ASCII apart from a few latin-1 bytes: ours reads it with
--input_encoding latin-1; the peer always decodes utf-8 (errors ignored), dropping them.

The 600 instances/s of the original ALBERT script is the issue's figure, quoted as a reference
and not measured here: the original script is not available offline.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = "/work/shared/data/corpus_en/nltk_gutenberg/*.txt"
DEFAULT_SPM = "/work/shared/data/sentencepiece/spiece.model"
ORIGINAL_REFERENCE_IPS = 600.0  # the figure for the original script; not measured here
QUIET_CORES = 0.25  # "idle enough" before a run: other processes use less than this

COMMON = {"max_seq_length": 128, "dupe_factor": 1, "max_predictions_per_seq": 20,
          "masked_lm_prob": 0.15, "random_seed": 12345, "do_lower_case": "true"}


def build_wordpiece_vocab(spm_model_file, path):
  """Writes a BERT-style vocab.txt derived from a SentencePiece model; returns its size."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  sp = spm.SentencePieceProcessor(model_file=spm_model_file)
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tokens, seen, chars = list(specials), set(specials), set()
  for i in range(sp.get_piece_size()):
    if sp.is_control(i) or sp.is_unknown(i):
      continue
    piece = sp.id_to_piece(i)
    if piece in specials or piece == "\u2581":
      continue
    token = piece[1:] if piece.startswith("\u2581") else "##" + piece
    chars.update(piece.lstrip("\u2581"))
    if token not in seen:
      seen.add(token)
      tokens.append(token)
  for c in sorted(chars):  # every character alone and as a continuation: few [UNK]s
    for token in (c, "##" + c):
      if token not in seen:
        seen.add(token)
        tokens.append(token)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return len(tokens)


def common(args):
  """COMMON with the command line's overrides."""
  flags = dict(COMMON)
  for key in ("max_seq_length", "dupe_factor", "max_predictions_per_seq"):
    if getattr(args, key) is not None:
      flags[key] = getattr(args, key)
  return flags


def flag_args(flags):
  return [f"--{k}={v}" for k, v in flags.items()]


def make_configs(args, vocab_file, peer_corpus):
  """[(name, mode, kind, argv_for(output_path))] in run order."""
  py = sys.executable
  ours_script = os.path.join(REPO, "create_pretraining_data.py")
  configs = []

  def ours(name, mode, workers, extra=()):
    tok = ({"spm_model_file": args.spm_model_file} if mode == "SentencePiece"
           else {"vocab_file": vocab_file})
    def argv(out):
      shards = ",".join(f"{out}-{i:02d}-of-{args.num_shards:02d}"
                        for i in range(args.num_shards)) if args.num_shards > 1 else out
      return ([py, ours_script, f"--input_file={args.corpus}", f"--output_file={shards}",
               f"--metadata_file={out}.json", f"--num_workers={workers}",
               "--input_encoding=latin-1"] + flag_args(tok) + flag_args(common(args))
              + list(extra))
    configs.append((name, mode, "ours", argv))

  def peer(name, mode):
    tok = ({"tokenization": "SentencePiece", "sp_model_file": args.spm_model_file}
           if mode == "SentencePiece" else {"tokenization": "WordPiece", "vocab_file": vocab_file})
    masking = ([] if args.peer_default_masking
               else ["--do_whole_word_mask=true", "--max_ngram_size=3"])
    def argv(out):
      return ([py, "-m", "official.nlp.data.create_pretraining_data",
               f"--input_file={peer_corpus}", f"--output_file={out}"]
              + flag_args(tok) + flag_args(common(args)) + masking)
    configs.append((name, mode, "peer", argv))

  ours("ours spm workers=1", "SentencePiece", 1)
  ours("ours spm workers=2", "SentencePiece", 2)
  for workers in (1, 2):  # the Beam pipeline on the DirectRunner, the same shards
    ours(f"ours spm beam DirectRunner workers={workers}", "SentencePiece", 1,
         ["--beam_pipeline_options=--runner=DirectRunner "
          f"--direct_num_workers={workers} --direct_running_mode=multi_processing"])
  ours("ours spm workers=1 --random_next_sentence", "SentencePiece", 1,
       ["--random_next_sentence"])
  peer("peer spm", "SentencePiece")
  ours("ours wordpiece workers=1", "WordPiece", 1)
  ours("ours wordpiece workers=2", "WordPiece", 2)
  peer("peer wordpiece", "WordPiece")
  return configs


class CpuMeter:
  """CPU used by the whole machine (from /proc/stat) and by our children (rusage)."""

  def __init__(self):
    self.hz = os.sysconf("SC_CLK_TCK")

  def machine_busy_seconds(self):
    try:
      with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
      return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / self.hz  # user nice system idle iowait irq softirq steal

  @staticmethod
  def children_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

  def others_cores(self, seconds):
    """Cores used by other processes over the next `seconds` (we run nothing meanwhile)."""
    b0 = self.machine_busy_seconds()
    time.sleep(seconds)
    b1 = self.machine_busy_seconds()
    return None if b0 is None else (b1 - b0) / seconds

  def wait_quiet(self, max_wait):
    """Waits until other processes use < QUIET_CORES; returns (waited s, last load)."""
    start = time.time()
    while True:
      load = self.others_cores(0.5)
      if load is None or load < QUIET_CORES or time.time() - start >= max_wait:
        return time.time() - start, load
      time.sleep(1.0)


def run_once(argv, out, log_path, timeout, meter):
  """Runs one command; returns dict(seconds, cpu_seconds, others_cores) or None on timeout."""
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
  with open(log_path, "wb") as log:
    busy0, cpu0 = meter.machine_busy_seconds(), meter.children_seconds()
    start = time.perf_counter()
    try:
      proc = subprocess.run(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env,
                            timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
      return None
    wall = time.perf_counter() - start
    busy1, cpu1 = meter.machine_busy_seconds(), meter.children_seconds()
  if proc.returncode != 0 or not output_files(out):
    with open(log_path, "rb") as log:
      tail = log.read()[-3000:].decode("utf-8", "replace")
    raise RuntimeError(f"{' '.join(argv)} failed (rc={proc.returncode}):\n{tail}")
  cpu = cpu1 - cpu0
  others = None if busy0 is None else max(0.0, (busy1 - busy0 - cpu) / wall)
  return {"seconds": wall, "cpu_seconds": cpu, "others_cores": others}


def output_files(out):
  """The TFRecord files a run wrote for `out`: itself, or its `-NN-of-NN` shards."""
  return [out] if os.path.exists(out) else sorted(glob.glob(out + "-[0-9]*-of-[0-9]*"))


def count_records(out):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return int(tf.data.TFRecordDataset(output_files(out)).reduce(0, lambda n, _: n + 1).numpy())


def startup_seconds(module, repeats):
  """Median wall seconds of `python -c "import module"` (informational)."""
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def machine():
  cpu = "unknown"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  info = {"cpu_model": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
          "platform": platform.platform()}
  try:
    info["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, check=True,
                                        capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(  # GIT_OPTIONAL_LOCKS=0: do not refresh the index
        ["git", "status", "--porcelain", "--", "albert_tf", "create_pretraining_data.py"],
        cwd=REPO, capture_output=True, text=True, check=True,
        env=dict(os.environ, GIT_OPTIONAL_LOCKS="0")).stdout
    info["uncommitted_changes_in_albert_tf"] = bool(dirty.strip())
  except (OSError, subprocess.CalledProcessError):
    pass
  return info


def cut_corpus(files, fraction, directory):
  """The first `fraction` of every file (to a line end) into `directory`; returns bytes."""
  os.makedirs(directory)
  total = 0
  for i, path in enumerate(files):
    with open(path, "rb") as src:
      data = src.read()
    data = data[:data.rfind(b"\n", 0, int(len(data) * fraction)) + 1]
    with open(os.path.join(directory, f"{i:03d}.txt"), "wb") as dst:
      dst.write(data)
    total += len(data)
  return total


def ratio(x):
  return "-" if x is None else f"{x:.2f}x"


def summarize(runs, corpus_bytes, peer_bytes):
  peer = {}
  for r in runs.values():
    if not r["seconds"]:
      continue
    nbytes = peer_bytes if r["kind"] == "peer" else corpus_bytes
    r["instances_per_second_each"] = [n / s for n, s in zip(r["instances"], r["seconds"])]
    r["median_seconds"] = statistics.median(r["seconds"])
    r["median_cpu_seconds"] = statistics.median(r["cpu_seconds"])
    r["median_instances"] = statistics.median(r["instances"])
    r["instances_per_second"] = statistics.median(r["instances_per_second_each"])
    r["input_mb_per_second"] = nbytes / 1e6 / r["median_seconds"]
    known = [x for x in r["others_cores"] if x is not None]
    r["max_others_cores"] = max(known) if known else None
    if r["kind"] == "peer":
      peer[r["mode"]] = r
  for r in runs.values():
    if not r["seconds"]:
      continue
    p = peer.get(r["mode"])
    r["ratio_vs_peer_instances_per_second"] = (
        r["instances_per_second"] / p["instances_per_second"] if p else None)
    r["ratio_vs_peer_input_mb_per_second"] = (
        r["input_mb_per_second"] / p["input_mb_per_second"] if p else None)
    r["ratio_vs_original_reference_600"] = r["instances_per_second"] / ORIGINAL_REFERENCE_IPS


def table(runs):
  header = ("config", "median wall s", "CPU s", "instances", "inst/s", "input MB/s",
            "inst/s vs peer", "MB/s vs peer", "vs 600/s (issue)", "others' cores (disturbed)")
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  for name, r in runs.items():
    if not r["seconds"]:
      cells = [name, "timed out"] + ["-"] * (len(header) - 2)
    else:
      counts = sorted(set(r["instances"]))
      shown = (str(counts[0]) if len(counts) == 1
               else f"{r['median_instances']:.0f} ({counts[0]}-{counts[-1]})")
      others = r["max_others_cores"]
      cells = [name, f"{r['median_seconds']:.2f}", f"{r['median_cpu_seconds']:.2f}", shown,
               f"{r['instances_per_second']:.0f}", f"{r['input_mb_per_second']:.2f}",
               ratio(r["ratio_vs_peer_instances_per_second"]),
               ratio(r["ratio_vs_peer_input_mb_per_second"]),
               ratio(r["ratio_vs_original_reference_600"]),
               ("-" if others is None else f"{others:.2f}") + f" ({r['disturbed_runs']})"]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="input glob (both programs)")
  parser.add_argument("--spm_model_file", default=DEFAULT_SPM)
  parser.add_argument("--repeats", type=int, default=3, help="runs per config (median)")
  parser.add_argument("--out", help="also write the results as JSON here")
  parser.add_argument("--only", default="",
                      help="comma list of substrings: run only the configs whose name has one")
  parser.add_argument("--max_seq_length", type=int, help="instead of COMMON's 128")
  parser.add_argument("--dupe_factor", type=int, help="instead of COMMON's 1")
  parser.add_argument("--max_predictions_per_seq", type=int, help="instead of COMMON's 20")
  parser.add_argument("--num_shards", type=int, default=1,
                      help="ours writes this many output shards (the peer always one)")
  parser.add_argument("--peer_max_seconds", type=float, default=300.0,
                      help="kill a peer run after this long (then try --peer_fraction)")
  parser.add_argument("--peer_fraction", type=float, default=1.0,
                      help="give the peer only the first FRACTION of every input file, for a "
                           "very slow peer; its rates are then over that smaller input")
  parser.add_argument("--peer_default_masking", action="store_true",
                      help="run the peer with its default per-token masking instead of "
                           "--do_whole_word_mask --max_ngram_size=3")
  parser.add_argument("--quiet_wait", type=float, default=60.0,
                      help="before each run wait up to this long for the machine to be idle")
  parser.add_argument("--retries", type=int, default=2,
                      help="rerun (up to this many times) a run during which other processes "
                           "used a quarter of a core or more; a run kept after that is counted "
                           "as disturbed")
  args = parser.parse_args()

  files = sorted(f for f in glob.glob(args.corpus) if os.path.isfile(f))
  if not files:
    sys.exit(f"--corpus {args.corpus!r} matches no files")
  corpus_bytes = sum(os.path.getsize(f) for f in files)
  meter = CpuMeter()
  tmp = tempfile.mkdtemp(prefix="cpd_bench_")
  try:
    vocab_file = os.path.join(tmp, "vocab.txt")
    vocab_size = build_wordpiece_vocab(args.spm_model_file, vocab_file)
    peer_corpus, peer_bytes = args.corpus, corpus_bytes
    if args.peer_fraction < 1.0:
      peer_bytes = cut_corpus(files, args.peer_fraction, os.path.join(tmp, "peer_corpus"))
      peer_corpus = os.path.join(tmp, "peer_corpus", "*.txt")

    configs = make_configs(args, vocab_file, peer_corpus)
    if args.only:
      wanted = [s.strip() for s in args.only.split(",") if s.strip()]
      configs = [c for c in configs if any(w in c[0] for w in wanted)]
    runs = {name: {"mode": mode, "kind": kind, "seconds": [], "cpu_seconds": [],
                   "others_cores": [], "instances": [], "timed_out": False,
                   "disturbed_runs": 0, "discarded_disturbed_runs": 0}
            for name, mode, kind, _ in configs}
    outputs = []  # (name, path), counted after all the timed runs
    load_before = os.getloadavg()
    started = time.time()
    for rep in range(args.repeats):
      for i, (name, _, kind, argv_for) in enumerate(configs):
        r = runs[name]
        if r["timed_out"]:
          continue
        for attempt in range(1 + args.retries):
          waited, load = meter.wait_quiet(args.quiet_wait)
          if waited >= 1.0:
            print(f"  (waited {waited:.0f}s for other processes; they use "
                  f"{load:.2f} cores)", flush=True)
          out = os.path.join(tmp, f"run{i}_{rep}_{attempt}.tfrecord")
          argv = argv_for(out)
          r["command"] = " ".join(argv).replace(tmp, "$TMP")
          result = run_once(argv, out, os.path.join(tmp, f"run{i}_{rep}_{attempt}.log"),
                            args.peer_max_seconds if kind == "peer" else None, meter)
          if result is None:
            r["timed_out"] = True
            print(f"[{rep + 1}/{args.repeats}] {name}: killed after "
                  f"{args.peer_max_seconds:.0f}s; try --peer_fraction", flush=True)
            for p in glob.glob(out + "*"):
              os.remove(p)
            break
          others = result["others_cores"]
          clean = others is None or others < QUIET_CORES
          print(f"[{rep + 1}/{args.repeats}] {name}: {result['seconds']:.2f}s wall, "
                f"{result['cpu_seconds']:.2f}s CPU"
                + ("" if others is None else f", other processes {others:.2f} cores")
                + ("" if clean else " (disturbed)"), flush=True)
          if clean or attempt == args.retries:
            for key in ("seconds", "cpu_seconds", "others_cores"):
              r[key].append(result[key])
            r["disturbed_runs"] += 0 if clean else 1
            outputs.append((name, out))
            break
          r["discarded_disturbed_runs"] += 1
          for p in glob.glob(out + "*"):
            os.remove(p)
    startup = {"ours: import albert_tf.data.pretraining.create":
                   startup_seconds("albert_tf.data.pretraining.create", 1),
               "peer: import official.nlp.data.create_pretraining_data":
                   startup_seconds("official.nlp.data.create_pretraining_data", 1)}
    timed_seconds = time.time() - started
    load_after = os.getloadavg()

    # TensorFlow is imported only now: see the module docstring.
    for name, out in outputs:
      r = runs[name]
      n = count_records(out)
      if r["kind"] == "ours":
        with open(out + ".json", encoding="utf-8") as f:
          reported = json.load(f)["total_instances"]
        if reported != n:
          raise RuntimeError(f"{name}: its metadata says {reported} instances, the file has {n}")
        if r["instances"] and r["instances"][0] != n:
          raise RuntimeError(f"{name}: {n} instances, {r['instances'][0]} in an earlier repeat")
      r["instances"].append(n)
      for p in glob.glob(out + "*"):
        os.remove(p)

    summarize(runs, corpus_bytes, peer_bytes)
    print()
    print(f"corpus: {args.corpus} ({len(files)} files, {corpus_bytes / 1e6:.2f} MB"
          + (f"; the peer gets the first {args.peer_fraction:.0%} of each: "
             f"{peer_bytes / 1e6:.2f} MB" if peer_bytes != corpus_bytes else "") + ")")
    print(f"SentencePiece model: {args.spm_model_file}; WordPiece vocab derived from it "
          f"({vocab_size} tokens), the same file for both programs")
    print(f"repeats: {args.repeats}, medians; ratios are against the peer in the same tokenizer "
          "mode, measured in this run; 600/s is the issue's figure for the original script, "
          "not measured here")
    print(table(runs))
    print()
    for what, s in startup.items():
      print(f"start-up alone ({what}): {s:.2f}s, included in the wall times above")
    print(f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}; "
          f"timed part {timed_seconds:.0f}s")

    if args.out:
      results = {
          "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
          "machine": machine(),
          "corpus": {"glob": args.corpus, "files": len(files), "bytes": corpus_bytes,
                     "peer_bytes": peer_bytes, "peer_fraction": args.peer_fraction},
          "spm_model_file": args.spm_model_file,
          "wordpiece_vocab": {"derived_from": args.spm_model_file, "tokens": vocab_size},
          "common_flags": common(args),
          "num_shards": args.num_shards,
          "peer_masking": ("default per-token" if args.peer_default_masking
                           else "--do_whole_word_mask=true --max_ngram_size=3"),
          "repeats": args.repeats,
          "original_reference_instances_per_second": ORIGINAL_REFERENCE_IPS,
          "original_reference_note": "quoted from the issue, not measured in this run",
          "startup_seconds": startup,
          "load_average_1min": {"before": load_before[0], "after": load_after[0]},
          "timed_seconds": timed_seconds,
          "runs": runs,
      }
      with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
