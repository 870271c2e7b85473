"""REPORT.md, the PNGs and results.json of the studies."""

import json
import os

from albert_tf import files
from benchmarks.ablations.claims import (PAPER, PAPER_SIDE, above_chance, downstream,
                                         majority_share_runs, mean)

NO_FLAGS = "none of avx512f/avx512_bf16/amx_bf16"


def _fmt(values, scale=100.0, digits=1):
  if not values:
    return "-"
  xs = [v * scale for v in values]
  m = mean(xs)
  if len(xs) == 1:
    return f"{m:.{digits}f}"
  return f"{m:.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def plots(study, results, report_dir):
  """Training curves and the intrinsic tasks' bar chart; returns the PNG names."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  names = []
  fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
  for variant, runs in results.items():
    for i, run in enumerate(runs):
      steps = [p["step"] for p in run["curve"]]
      for ax, key in zip(axes, ("loss", "masked_lm_accuracy", "sentence_order_accuracy")):
        ax.plot(steps, [p.get(key, float("nan")) for p in run["curve"]],
                color=f"C{list(results).index(variant)}", alpha=0.9 if i == 0 else 0.5,
                label=variant if i == 0 else None, linewidth=1)
  for ax, title in zip(axes, ("training loss", "MLM accuracy (training batches)",
                              "sentence-task accuracy (training batches)")):
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
    ax.tick_params(labelsize=7)
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  name = f"{study}_curves.png"
  fig.savefig(os.path.join(report_dir, name), dpi=80)
  plt.close(fig)
  names.append(name)

  metrics = ("mlm_accuracy", "nsp_accuracy", "sop_accuracy", "sst2_accuracy", "stsb_pearson")
  fig, ax = plt.subplots(figsize=(10, 3.4))
  width = 0.8 / max(len(results), 1)
  for j, (variant, runs) in enumerate(results.items()):
    means, low, high = [], [], []
    for metric in metrics:
      xs = [r[metric] for r in runs]
      means.append(mean(xs))
      low.append(mean(xs) - min(xs))
      high.append(max(xs) - mean(xs))
    ax.bar([i + j * width for i in range(len(metrics))], means, width, yerr=[low, high],
           label=variant, color=f"C{j}", capsize=2)
  ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(metrics))])
  ax.set_xticklabels(metrics, fontsize=8)
  ax.axhline(0.5, color="grey", linewidth=0.6, linestyle="--")
  ax.set_title("held-out intrinsic tasks and downstream dev metrics (bars: seed mean; "
               "whiskers: seed min-max)", fontsize=9)
  ax.legend(fontsize=7, ncol=4)
  fig.tight_layout()
  name = f"{study}_metrics.png"
  fig.savefig(os.path.join(report_dir, name), dpi=80)
  plt.close(fig)
  names.append(name)
  return names


# Why a study's corpus was chosen, by corpus: said once beside its numbers.
CORPUS_NOTES = {
    "gutenberg": "NLTK's Gutenberg books (13 books, 6 MB; the lines as sentences).",
    "docstrings": (
        "The standard library's docstrings (the quickstart's corpus: about 6,600 docstrings, "
        "1.6 MB, cut into sentences; one in 8 held out). Chosen because SOP is learned there "
        "at this scale and not on the Gutenberg books: the first sentence-task study "
        "(Gutenberg, ALBERT's 30k-piece vocabulary, seq 64, 1,500 steps, 2 seeds, on the AMX "
        "Xeon, commit d6a06d8) left the SOP-trained model at chance on held-out SOP (50.5%), "
        "and so did a pilot at this study's scale on the books with an 8k-piece vocabulary "
        "trained on them (seq 128, 1,500 steps, seed 1: 50.6% held-out SOP), while the same "
        "pilot on the docstrings reached 83.2%. A docstring's sentences follow a convention "
        "(a summary line, then details, arguments, what it returns), an order a small model "
        "can learn in 1,500 steps; the books' discourse, with MLM accuracy still near 14%, is "
        "beyond it."),
}


def _corpus_lines(scale):
  """The corpus and vocabulary of a scale, and why that corpus (studies before the option
  existed used the books and ALBERT's vocabulary)."""
  corpus, vocab = scale.get("corpus", "gutenberg"), scale.get("vocab", 0)
  pieces = ("ALBERT's 30k-piece SentencePiece model" if not vocab else
            f"a {vocab}-piece SentencePiece model trained on the training split (lower-cased)")
  return [f"Corpus: {CORPUS_NOTES[corpus]} Vocabulary: {pieces}.", ""]


def study_section(study, entry):
  """The Markdown of one study from its results.json entry."""
  results, counts, scale = entry["variants"], entry["counts"], entry["scale"]
  reused = {r["reused_from"] for runs in results.values() for r in runs if "reused_from" in r}
  machine = entry.get("machine", {})
  lines = [f"## {study}", "", f"Command: `{entry['command']}`", "",
           f"Machine: {machine.get('cpu_model')}, {machine.get('cpus')} CPUs, flags "
           f"{', '.join(machine.get('cpu_flags', [])) or NO_FLAGS}; commit "
           f"{machine.get('git_commit', '?')[:7]}; {entry.get('date', '?')}.", "",
           f"Scale: H={scale['hidden']}, L={scale['layers']}, E={scale['embedding']} (unless the "
           f"variant says), {scale['heads']} heads, FFN {scale['intermediate']}, seq "
           f"{scale['seq']}, {scale['max_predictions']} predictions, batch {scale['batch']}, "
           f"{scale['steps']} LAMB steps (warm-up {scale['warmup']}, lr "
           f"{scale['learning_rate']}), {len(entry['seeds'])} seeds. Evaluated on "
           f"{counts['sop_examples']} held-out SOP-style and {counts['nsp_examples']} NSP-style "
           f"instances (the majority label's share, i.e. chance for a constant guess: "
           f"{100 * counts.get('sop_majority', 0.5):.1f}% and "
           f"{100 * counts.get('nsp_majority', 0.5):.1f}%); SST-2 dev {counts['sst2_dev']} "
           f"examples, STS-B dev {counts['stsb_dev']}. "
           f"Wall time of the study's runs (pretraining, evaluations, fine-tuning; data "
           f"creation excluded): {entry['seconds'] / 60:.1f} min"
           + (", not counting the runs taken from " + ", ".join(sorted(reused))
              + " (the same variant, scale and data)" if reused else "") + ".", "",
           *([entry["note"], ""] if entry.get("note") else []),
           *_corpus_lines(scale),
           "Pretraining data (`create_pretraining_data`, seq " + str(scale["seq"]) + "): "
           + "; ".join(f"{name} {d['instances']} instances, {100 * d['random_partner']:.0f}% "
                       f"with a random partner, {100 * d['label_1']:.0f}% label 1"
                       + (" (--pure_sop)" if d["pure_sop"] else "")
                       for name, d in entry.get("data", {}).items()) + ".", "",
           "| variant | parameters | MLM acc | NSP acc | SOP acc | SST-2 acc | STS-B Pearson "
           "| downstream mean |", "|---|---|---|---|---|---|---|---|"]
  for variant, runs in results.items():
    lines.append("| " + " | ".join([
        variant, f"{runs[0]['parameters'] / 1e6:.2f}M",
        _fmt([r["mlm_accuracy"] for r in runs]), _fmt([r["nsp_accuracy"] for r in runs]),
        _fmt([r["sop_accuracy"] for r in runs]), _fmt([r["sst2_accuracy"] for r in runs]),
        _fmt([r["stsb_pearson"] for r in runs]), _fmt([downstream(r) for r in runs])]) + " |")
  lines += ["", "Cells: the seed mean (min-max over seeds), in % (Pearson x 100), as the paper "
            "writes them. Parameters: the encoder's (embeddings, projection, blocks, pooler), "
            "as the paper counts them. Downstream mean: of SST-2 accuracy and STS-B Pearson.",
            ""]
  learned = {(name, metric): above_chance(runs, metric, counts)
             for name, runs in results.items() for metric in ("nsp_accuracy", "sop_accuracy")}
  if all(v is not None for v in learned.values()):
    lines += ["Above chance (the seed mean beats the eval set's majority share by more than "
              "twice its sampling error): " + "; ".join(
                  f"{name}: NSP {'yes' if learned[name, 'nsp_accuracy'] else 'no'}, SOP "
                  f"{'yes' if learned[name, 'sop_accuracy'] else 'no'}" for name in results)
              + ". A claim that two variants are alike on a task neither solves says only "
              "that neither learned it.", ""]
  constant = majority_share_runs(results, counts)
  if constant is not None:
    share = f"{100 * counts['sst2_majority']:.1f}%"
    lines += [("SST-2 runs scoring exactly the dev set's majority share (" + share + ", what a "
               "constant prediction scores: a classifier that learned nothing): "
               + ", ".join(f"{name} seed {seed}" for name, seed in constant) + ".")
              if constant else f"No SST-2 run scores the dev set's majority share ({share}).",
              ""]
  paper = PAPER[study]
  lines += ["The paper's numbers (ALBERT-base, Lan et al. 2020"
            + {"sentence_task": ", Table 5", "sharing": ", Table 4, E = 128",
               "embedding_size": ", Table 3 (E = 64, 128, 256, 768 at H = 768)"}[study]
            + "; accuracies in %, Avg = the mean of SQuAD1.1, SQuAD2.0, MNLI, SST-2, RACE):", "",
            "| variant | " + " | ".join(k for k in next(iter(paper.values()))) + " |",
            "|---|" + "---|" * len(next(iter(paper.values())))]
  for variant, numbers in paper.items():
    lines.append(f"| {variant} | " + " | ".join(
        f"{v / 1e6:.0f}M" if k == "parameters" else f"{v:g}" for k, v in numbers.items())
        + " |")
  lines += ["", "Differences and noise levels below are in points (of %, or Pearson x 100). "
            "The noise level is the larger of twice the seeds' standard error of the "
            "difference and twice the evaluations' own sampling error; \"a > b\" agrees "
            "when a - b exceeds it and disagrees when a - b is below minus it, \"a ~ b\" "
            "agrees when |a - b| is within it, \"a <= b\" agrees unless a - b exceeds it.", "",
            "| claim of the paper | metric | paper (a / b) | ours: a - b | noise | verdict |",
            "|---|---|---|---|---|---|"]
  for judged in entry["claims"]:
    side = PAPER_SIDE.get(judged["metric"], judged["metric"])
    pa, pb = paper.get(judged["a"], {}).get(side), paper.get(judged["b"], {}).get(side)
    paper_cell = f"{pa:g} / {pb:g}" if pa is not None and pb is not None else "-"
    diff = ("-" if judged["difference"] is None
            else f"{100 * judged['difference']:+.1f}")
    noise = "-" if judged["noise"] is None else f"{100 * judged['noise']:.1f}"
    lines.append(f"| {judged['text']} ({judged['a']} {judged['expect']} {judged['b']}) | "
                 f"{judged['metric']} | {paper_cell} | {diff} | {noise} | "
                 f"**{judged['verdict']}** |")
  lines += [""] + [f"![{p}]({p})" for p in entry["plots"]] + [""]
  return "\n".join(lines)


def write_report(report_dir, all_results):
  os.makedirs(report_dir, exist_ok=True)
  header = ["# The paper's ablations at small scale", "",
            "Written by `python -m benchmarks.ablations` (see its docstring for the method, "
            "`benchmarks/README.md` for the commands). Numbers are this project's runs on the "
            "machine each study names; the paper's are quoted beside them, not rerun.", ""]
  body = [study_section(study, entry) for study, entry in all_results.items()]
  text = "\n".join(header + body)
  files.write_text(os.path.join(report_dir, "REPORT.md"), text)


def machine_info():
  from benchmarks.create_pretraining_data_bench import machine  # pylint: disable=import-outside-toplevel
  info = machine()
  flags = set()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("flags"):
          flags = set(line.split(":", 1)[1].split())
          break
  except OSError:
    pass
  info["cpu_flags"] = sorted(flags & {"avx512f", "avx512_bf16", "amx_bf16"})
  return info


def load_results(report_dir):
  path = os.path.join(report_dir, "results.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  return {}


def save_results(report_dir, all_results):
  files.write_text(os.path.join(report_dir, "results.json"),
                        json.dumps(all_results, indent=1) + "\n")


def rebuild_report(report_dir):
  """REPORT.md and the PNGs again from results.json (after a change to the report's form)."""
  all_results = load_results(report_dir)
  if not all_results:
    raise SystemExit(f"--report_only: no results.json in {report_dir}")
  for study, entry in all_results.items():
    entry["plots"] = plots(study, entry["variants"], report_dir)
  save_results(report_dir, all_results)
  write_report(report_dir, all_results)
  return all_results
