"""Distillation and int8 TFLite on real SST-2: a small ALBERT teacher, a half-depth student
distilled from it, the same student on the labels alone, their latencies, and the teacher
and the student as float32 and dynamic-range int8 TFLite files.

    .venv/bin/python benchmarks/distill_bench.py [--work_dir /tmp/distill_bench]
        [--layers 4] [--teacher_steps 1500] [--teacher_lr 5e-4] [--student_steps 1000]
        [--student_lr 2e-4] [--distill T:alpha ...] [--reuse {none,teacher,all}]
        [--out results.json]

`--reuse all` keeps the runs an earlier invocation left in `--work_dir` (training only those
missing, a new `--distill` value say) and redoes the measurements.

There are no pretrained weights offline, so the teacher is fine-tuned from random weights:
an all-shared ALBERT (E 128, H 128, `--layers` applications of one block, 4 heads, I 512,
ALBERT's 30k SentencePiece vocabulary, max_position_embeddings 128), trained on SST-2's
train.tsv and evaluated on dev.tsv (872 rows) at every checkpoint; `<run>/best` keeps the best
one. Every run goes through `albert_tf.cli.runs.run_classifier` (what run_classifier.py
does), one process, fixed seed:

1. teacher: `--layers` layers from random weights;
2. student, distilled: `DistillOptions(teacher_checkpoint=teacher run, student_num_hidden_layers
   = layers // 2)`: the teacher's shared block applied half as often, starting from the
   teacher's best weights (with cross-layer sharing it has exactly the teacher's variables);
   one run per `--distill T:alpha`;
3. student, labels only: the same half-depth config and starting weights
   (`init_checkpoint=teacher/best`), no teacher; same steps, seed and learning rate as 2.

Accuracies are of each run's best checkpoint (`best/best_results.txt`; chosen on the dev set
it is scored on, as GLUE dev figures usually are) and of its last step.

TFLite: `albert_tf.export.tflite.export_classifier_tflite` of the teacher and of the best
distilled student, float32 and `quantize=True` (dynamic-range int8 weights), resizable batch;
dev accuracy over all rows through `tflite_logits`.

Latency, float32 Keras (the model's call in a `tf.function`, training=False; no SavedModel)
and each TFLite file (one interpreter's signature runner, `--tflite_threads` threads), on dev
rows at seq `--max_seq_length`, batch 1 and 32: the median of `--calls` timed calls after
`--warmup` calls, the calls of all models and batch sizes interleaved in `--rounds` rounds (a
burst of other load falls on all of them alike; the students have the same shape, so their
spread shows the noise left). Prints a JSON summary (and writes it with `--out`) and Markdown
tables (benchmarks-history.md's "Distillation and int8 TFLite (SST-2)" section is built from them).
"""

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import tokenization  # noqa: E402
from albert_tf.cli.runs import run_classifier  # noqa: E402
from albert_tf.config import AlbertConfig  # noqa: E402
from albert_tf.data.classification.features import convert_examples_to_features  # noqa: E402
from albert_tf.data.classification.registry import get_processor  # noqa: E402
from albert_tf.export.tflite import export_classifier_tflite, tflite_logits  # noqa: E402
from albert_tf.interop.checkpoints import load_checkpoint  # noqa: E402
from albert_tf.modeling.classifier import AlbertClassifier  # noqa: E402
from albert_tf.tasks.classification import ClassifierOptions  # noqa: E402
from albert_tf.tasks.distillation import DistillOptions  # noqa: E402

DATA = os.path.join(REPO, "..", "shared", "data")


def small_config(layers):
  """All-shared ALBERT: E 128, H 128, `layers` applications of one block, 4 heads, I 512."""
  with open(os.path.join(REPO, "configs", "tiny.json"), encoding="utf-8") as f:
    config = AlbertConfig.from_dict(json.load(f))
  return config.replace(embedding_size=128, hidden_size=128, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=512,
                        max_position_embeddings=128, vocab_size=30000)


def machine():
  """CPU model and matmul-relevant flags, cores, versions, load average, commit."""
  cpu, flags = "unknown", set()
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    for line in f:
      if line.startswith("model name") and cpu == "unknown":
        cpu = line.split(":", 1)[1].strip()
      if line.startswith("flags"):
        flags |= set(line.split(":", 1)[1].split())
  wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
  info = {"cpu_model": cpu, "cpu_flags": [f for f in wanted if f in flags],
          "cpus": os.cpu_count(), "python": platform.python_version(),
          "tensorflow": tf.__version__}
  try:
    import ai_edge_litert  # pylint: disable=g-import-not-at-top
    info["ai_edge_litert"] = getattr(ai_edge_litert, "__version__", "installed")
  except ImportError:
    info["ai_edge_litert"] = None
  try:
    info["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                        check=True, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "albert_tf"], cwd=REPO,
                           capture_output=True, text=True, check=True,
                           env=dict(os.environ, GIT_OPTIONAL_LOCKS="0")).stdout
    info["uncommitted_changes_in_albert_tf"] = bool(dirty.strip())
  except (OSError, subprocess.CalledProcessError):
    pass
  return info


def load_average():
  return [round(x, 2) for x in os.getloadavg()]


def busy_others():
  """Processes other than this one using CPU now (ps's lifetime %CPU over 5%), for the record."""
  try:
    out = subprocess.run(["ps", "-eo", "pid,pcpu,etime,args", "--sort=-pcpu"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[1:]
  except (OSError, subprocess.CalledProcessError):
    return []
  rows = []
  for line in out:
    pid, pcpu, etime, args = line.split(None, 3)
    if int(pid) != os.getpid() and float(pcpu) > 5.0:
      rows.append(f"{pcpu}% {etime} {args[:80]}")
  return rows[:5]


class EvalLog(logging.Handler):
  """Collects run_classifier's "Eval at step N: ..." lines (one per checkpoint)."""

  def __init__(self):
    super().__init__(logging.INFO)
    self.lines = []

  def emit(self, record):
    message = record.getMessage()
    if message.startswith("Eval at step"):
      self.lines.append(message)


def read_results(path):
  results = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      key, _, value = line.strip().partition(" = ")
      if value:
        results[key] = float(value)
  return results


def fine_tune(args, name, config_file, steps, learning_rate, init_checkpoint=None,
              distill=None):
  """One run_classifier run in `work_dir/name` (removed first); its accuracies and wall time
  (set-up and dev evaluations included)."""
  output_dir = os.path.join(args.work_dir, name)
  if os.path.exists(output_dir):
    shutil.rmtree(output_dir)
  options = ClassifierOptions(
      task_name="sst-2", data_dir=args.data_dir, output_dir=output_dir,
      albert_config_file=config_file, init_checkpoint=init_checkpoint,
      spm_model_file=args.spm_model_file, do_lower_case=True,
      max_seq_length=args.max_seq_length, do_train=True, do_eval=True,
      eval_batch_size=128, train_step=steps, warmup_step=steps // 10,
      cached_dir=os.path.join(args.work_dir, "features"), train_batch_size=32,
      optimizer="adamw", learning_rate=learning_rate, save_checkpoints_steps=args.eval_every,
      iterations_per_loop=100, keep_checkpoint_max=2, seed=args.seed, log_every_seconds=30,
      csv_options={}, distill=distill)
  log = EvalLog()
  logging.getLogger("albert_tf").addHandler(log)
  load = load_average()
  start = time.perf_counter()
  try:
    last = run_classifier(options)
  finally:
    logging.getLogger("albert_tf").removeHandler(log)
  wall = time.perf_counter() - start
  best = read_results(os.path.join(output_dir, "best", "best_results.txt"))
  row = {"run": name, "steps": steps, "learning_rate": learning_rate,
         "dev_accuracy_best": best["accuracy"], "best_step": int(best["global_step"]),
         "dev_accuracy_last": last["accuracy"],
         "wall_s": round(wall, 1), "steps_per_wall_s": round(steps / wall, 2),
         "load_average_before": load, "evals": log.lines, "output_dir": output_dir}
  print(json.dumps({k: v for k, v in row.items() if k != "evals"}), flush=True)
  return row


def dev_features(args):
  """The dev set's model inputs (numpy int32 [872, seq]) and labels, as the runner builds them."""
  processor = get_processor("sst-2")
  examples = processor.get_dev_examples(args.data_dir)
  tokenizer = tokenization.FullTokenizer(vocab_file=None, do_lower_case=True,
                                         spm_model_file=args.spm_model_file)
  features = convert_examples_to_features(examples, processor.get_labels(),
                                          args.max_seq_length, tokenizer)
  inputs = {"input_word_ids": np.array([f["input_ids"] for f in features], np.int32),
            "input_mask": np.array([f["input_mask"] for f in features], np.int32),
            "input_type_ids": np.array([f["segment_ids"] for f in features], np.int32)}
  return inputs, np.array([f["label_id"] for f in features])


def trained_classifier(config, checkpoint):
  model = AlbertClassifier(config, 2)
  load_checkpoint(model, checkpoint)
  return model


def keras_logits(model, inputs, batch_size=128):
  call = tf.function(lambda x: model(x, training=False), reduce_retracing=True)
  rows = len(inputs["input_word_ids"])
  return np.concatenate([call({k: tf.constant(v[i:i + batch_size]) for k, v in inputs.items()})
                         .numpy() for i in range(0, rows, batch_size)])


def interleaved_ms(calls_by_name, args):
  """Median ms per call of each named function: `--warmup` calls each, then `--rounds` rounds
  that each time `--calls / --rounds` calls of every function in turn, so that a burst of
  load from other processes falls on all of them alike."""
  for fn in calls_by_name.values():
    for _ in range(args.warmup):
      fn()
  times = {name: [] for name in calls_by_name}
  per_round = max(1, args.calls // args.rounds)
  for _ in range(args.rounds):
    for name, fn in calls_by_name.items():
      for _ in range(per_round):
        start = time.perf_counter()
        fn()
        times[name].append(time.perf_counter() - start)
  return {name: round(1000 * statistics.median(t), 2) for name, t in times.items()}


def keras_call(model, inputs, batch_size):
  call = tf.function(lambda x: model(x, training=False))
  batch = {k: tf.constant(v[:batch_size]) for k, v in inputs.items()}
  return lambda: call(batch).numpy()


def tflite_call(tflite_file, inputs, batch_size, args):
  try:
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  except ImportError:
    Interpreter = tf.lite.Interpreter  # pylint: disable=invalid-name
  runner = Interpreter(model_path=tflite_file,
                       num_threads=args.tflite_threads).get_signature_runner()
  batch = {k: v[:batch_size] for k, v in inputs.items()}
  return lambda: runner(**batch)


def tflite_rows(name, stem, model, inputs, labels, args):
  """Float32 and int8 TFLite files of `model` (work_dir/stem_*.tflite): size, dev accuracy,
  agreement with the Keras model."""
  keras = keras_logits(model, inputs)
  rows = []
  for quantize in (False, True):
    path = os.path.join(args.work_dir, f"{stem}_{'int8' if quantize else 'float32'}.tflite")
    start = time.perf_counter()
    size = export_classifier_tflite(model, path, args.max_seq_length, quantize=quantize)
    convert_s = time.perf_counter() - start
    logits = tflite_logits(path, **inputs)
    row = {"model": name, "format": "tflite int8 (dynamic range)" if quantize
           else "tflite float32", "bytes": size, "convert_s": round(convert_s, 1),
           "dev_accuracy": float(np.mean(np.argmax(logits, -1) == labels)),
           "agreement_with_keras": float(np.mean(np.argmax(logits, -1) == np.argmax(keras, -1))),
           "max_abs_logit_diff": float(np.max(np.abs(logits - keras))), "path": path}
    print(json.dumps(row), flush=True)
    rows.append(row)
  return rows


def mb(n):
  return f"{n / 1e6:.2f}"


def markdown(summary, args):
  """The tables of benchmarks-history.md's section (the prose around them is written by hand)."""
  m, b = summary["machine"], args.batch_sizes
  lines = [f"CPU: `{m['cpu_model']}`, {m['cpus']} cores, flags: "
           f"{', '.join(m['cpu_flags']) or 'none of avx2/fma/avx512*/amx*'}; TensorFlow "
           f"{m['tensorflow']}, ai-edge-litert {m['ai_edge_litert']}; commit "
           f"`{m.get('git_commit')}`.", "",
           "| model | layers | params | steps | lr | dev acc (best ckpt, step) | dev acc (last) "
           "| train wall s | "
           + " | ".join(f"Keras fp32 ms b{x}" for x in b) + " |",
           "|---|---|---|---|---|---|---|---|" + "---|" * len(b)]
  for r in summary["runs"]:
    lines.append(
        f"| {r['label']} | {r['layers']} | {r['params']:,} | {r['steps']} | "
        f"{r['learning_rate']:g} | {r['dev_accuracy_best']:.4f} ({r['best_step']}) | "
        f"{r['dev_accuracy_last']:.4f} | {r['wall_s']:.0f} | "
        + " | ".join(f"{r['keras_latency_ms'][str(x)]:.2f}" for x in b) + " |")
  lines += ["", "| model | file | MB | dev acc | agrees with Keras | max abs logit diff | "
            + " | ".join(f"ms b{x}" for x in b) + " |",
            "|---|---|---|---|---|---|" + "---|" * len(b)]
  for r in summary["tflite"]:
    lines.append(f"| {r['model']} | {r['format']} | {mb(r['bytes'])} | {r['dev_accuracy']:.4f} | "
                 f"{r['agreement_with_keras']:.4f} | {r['max_abs_logit_diff']:.3g} | "
                 + " | ".join(f"{r[f'latency_ms_b{x}']:.2f}" for x in b) + " |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--work_dir", default="/tmp/distill_bench")
  parser.add_argument("--data_dir", default=os.path.join(DATA, "glue", "SST-2"))
  parser.add_argument("--spm_model_file",
                      default=os.path.join(DATA, "sentencepiece", "spiece.model"))
  parser.add_argument("--layers", type=int, default=4, help="teacher layers; student: half")
  parser.add_argument("--max_seq_length", type=int, default=64)
  parser.add_argument("--teacher_steps", type=int, default=1500)
  parser.add_argument("--teacher_lr", type=float, default=5e-4)
  parser.add_argument("--student_steps", type=int, default=1000)
  parser.add_argument("--student_lr", type=float, default=2e-4)
  parser.add_argument("--distill", nargs="+", default=["2.0:0.7"],
                      help="T:alpha of each distilled student run")
  parser.add_argument("--eval_every", type=int, default=250)
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 32])
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--calls", type=int, default=60, help="timed calls per model and batch")
  parser.add_argument("--rounds", type=int, default=10,
                      help="the timed calls are interleaved across models in this many rounds")
  parser.add_argument("--tflite_threads", type=int, default=os.cpu_count())
  parser.add_argument("--reuse", choices=("none", "teacher", "all"), default="none",
                      help="reuse an earlier invocation's runs in work_dir (their rows are "
                      "re-read from <run>.json): the teacher, or every run found there (runs "
                      "not found, e.g. a new --distill T:alpha, are trained); the measurements "
                      "after training are always redone")
  parser.add_argument("--teacher_only", action="store_true",
                      help="stop after the teacher run (to choose --teacher_lr)")
  parser.add_argument("--out", help="also write the JSON summary here")
  args = parser.parse_args()
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
  os.makedirs(args.work_dir, exist_ok=True)
  start = time.perf_counter()
  summary = {"machine": machine(), "args": vars(args), "load_average_start": load_average(),
             "busy_processes_start": busy_others()}

  teacher_config = small_config(args.layers)
  student_config = teacher_config.replace(num_hidden_layers=args.layers // 2)
  teacher_file = os.path.join(args.work_dir, "teacher_config.json")
  student_file = os.path.join(args.work_dir, "student_config.json")
  teacher_config.to_json_file(teacher_file)
  student_config.to_json_file(student_file)

  def run(reuse, name, *run_args, **run_kwargs):
    """fine_tune's row, saved to work_dir/name.json; with `reuse`, re-read from there if
    there (the teacher must be)."""
    path = os.path.join(args.work_dir, name + ".json")
    if reuse and (name == "teacher" or os.path.exists(path)):
      with open(path, encoding="utf-8") as f:
        return json.load(f)
    row = fine_tune(args, name, *run_args, **run_kwargs)
    with open(path, "w", encoding="utf-8") as f:
      json.dump(row, f)
    return row

  teacher = run(args.reuse != "none", "teacher", teacher_file, args.teacher_steps,
                args.teacher_lr)
  teacher.update(label=f"teacher ({args.layers} layers, from random weights)",
                 layers=args.layers, config=teacher_config)
  if args.teacher_only:
    return
  best = os.path.join(teacher["output_dir"], "best")

  runs = [teacher]
  for spec in args.distill:
    temperature, alpha = (float(x) for x in spec.split(":"))
    row = run(args.reuse == "all", f"student_distilled_T{temperature:g}_a{alpha:g}",
              teacher_file, args.student_steps, args.student_lr,
              distill=DistillOptions(teacher_checkpoint=teacher["output_dir"],
                                     temperature=temperature, alpha=alpha, hidden_weight=0.0,
                                     student_num_hidden_layers=args.layers // 2))
    row.update(label=f"student, distilled (T {temperature:g}, alpha {alpha:g})",
               temperature=temperature, alpha=alpha)
    runs.append(row)
  row = run(args.reuse == "all", "student_labels_only", student_file, args.student_steps,
            args.student_lr, init_checkpoint=best)
  row.update(label="student, labels only")
  runs.append(row)

  inputs, labels = dev_features(args)
  summary["dev_rows"] = int(len(labels))
  summary["dev_majority"] = float(max(np.mean(labels), 1 - np.mean(labels)))
  models = {}
  for r in runs:
    config = r.pop("config", None) or student_config
    r.setdefault("layers", config.num_hidden_layers)
    model = trained_classifier(config, os.path.join(r["output_dir"], "best"))
    models[r["run"]] = model
    r["params"] = int(model.count_params())
    r["dev_accuracy_recomputed"] = float(
        np.mean(np.argmax(keras_logits(model, inputs), -1) == labels))
  summary["runs"] = runs

  distilled = max(runs[1:-1], key=lambda r: r["dev_accuracy_best"])
  summary["tflite"] = (
      tflite_rows("teacher", "teacher", models["teacher"], inputs, labels, args)
      + tflite_rows(f"student (distilled, T {distilled['temperature']:g}, alpha "
                    f"{distilled['alpha']:g})", "student", models[distilled["run"]], inputs,
                    labels, args))

  calls = {}
  for b in args.batch_sizes:
    for r in runs:
      calls[("keras", r["run"], b)] = keras_call(models[r["run"]], inputs, b)
    for i, t in enumerate(summary["tflite"]):
      calls[("tflite", i, b)] = tflite_call(t["path"], inputs, b, args)
  summary["load_average_before_timing"] = load_average()
  summary["busy_processes_before_timing"] = busy_others()
  ms = interleaved_ms(calls, args)
  summary["busy_processes_after_timing"] = busy_others()
  for r in runs:
    r["keras_latency_ms"] = {str(b): ms[("keras", r["run"], b)] for b in args.batch_sizes}
  for i, t in enumerate(summary["tflite"]):
    for b in args.batch_sizes:
      t[f"latency_ms_b{b}"] = ms[("tflite", i, b)]
  summary["load_average_end"] = load_average()
  summary["total_wall_s"] = round(time.perf_counter() - start, 1)
  print(json.dumps(summary, indent=1))
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(summary, f, indent=1)
  print("\n" + markdown(summary, args))


if __name__ == "__main__":
  main()
