"""The paper's numbers, its claims per study, and how a claim is judged on our runs."""

import dataclasses
import math
import statistics

from albert_tf.metrics.majority import at_majority_share


# The paper's numbers (Lan et al. 2020, arXiv 1909.11942v6), ALBERT-base.
# Downstream "avg" is the paper's mean of SQuAD1.1, SQuAD2.0, MNLI, SST-2, RACE.
PAPER = {
    "sentence_task": {  # Table 5
        "none": {"mlm_accuracy": 54.9, "nsp_accuracy": 52.4, "sop_accuracy": 53.3,
                 "sst2_accuracy": 89.9, "avg": 79.0},
        "nsp": {"mlm_accuracy": 54.5, "nsp_accuracy": 90.5, "sop_accuracy": 52.0,
                "sst2_accuracy": 91.1, "avg": 79.2},
        "sop": {"mlm_accuracy": 54.0, "nsp_accuracy": 78.9, "sop_accuracy": 86.5,
                "sst2_accuracy": 90.3, "avg": 80.1},
    },
    "sharing": {  # Table 4, E = 128
        "all-shared": {"parameters": 12e6, "sst2_accuracy": 90.3, "avg": 80.1},
        "shared-attention": {"parameters": 64e6, "sst2_accuracy": 91.9, "avg": 81.7},
        "shared-FFN": {"parameters": 38e6, "sst2_accuracy": 91.7, "avg": 80.2},
        "not-shared": {"parameters": 89e6, "sst2_accuracy": 91.5, "avg": 81.6},
    },
    "embedding_size": {  # Table 3, E = 64, 128, 256, 768 at H = 768
        "not-shared E/H=1/8": {"E": 64, "parameters": 87e6, "sst2_accuracy": 91.5, "avg": 81.3},
        "not-shared E/H=1/4": {"E": 128, "parameters": 89e6, "sst2_accuracy": 91.5, "avg": 81.7},
        "not-shared E/H=1/2": {"E": 256, "parameters": 93e6, "sst2_accuracy": 91.9, "avg": 81.8},
        "not-shared E/H=1": {"E": 768, "parameters": 108e6, "sst2_accuracy": 92.8, "avg": 82.3},
        "all-shared E/H=1/8": {"E": 64, "parameters": 10e6, "sst2_accuracy": 89.4, "avg": 79.0},
        "all-shared E/H=1/4": {"E": 128, "parameters": 12e6, "sst2_accuracy": 90.3, "avg": 80.1},
        "all-shared E/H=1/2": {"E": 256, "parameters": 16e6, "sst2_accuracy": 90.3, "avg": 79.6},
        "all-shared E/H=1": {"E": 768, "parameters": 31e6, "sst2_accuracy": 90.6, "avg": 79.8},
    },
}


@dataclasses.dataclass(frozen=True)
class Claim:
  text: str
  metric: str
  a: str
  b: str
  expect: str  # ">" a beats b; "~" a and b about equal; "<=" a does not beat b


def claims(study):
  if study == "sentence_task":
    return [
        Claim("SOP training solves SOP far better than NSP training", "sop_accuracy",
              "sop", "nsp", ">"),
        Claim("an NSP-trained head is no better than chance (the untrained head) on SOP",
              "sop_accuracy", "nsp", "none", "~"),
        Claim("SOP training solves NSP relatively well (far above the untrained head)",
              "nsp_accuracy", "sop", "none", ">"),
        Claim("NSP training solves NSP better than SOP training does", "nsp_accuracy",
              "nsp", "sop", ">"),
        Claim("the sentence task leaves MLM accuracy about the same (SOP against none)",
              "mlm_accuracy", "sop", "none", "~"),
        Claim("the sentence task leaves MLM accuracy about the same (NSP against none)",
              "mlm_accuracy", "nsp", "none", "~"),
        Claim("SOP gives better downstream results than NSP", "downstream", "sop", "nsp", ">"),
        Claim("SOP gives better downstream results than no sentence task", "downstream",
              "sop", "none", ">"),
    ]
  if study == "sharing":
    return [
        Claim("not sharing beats sharing everything downstream", "downstream", "not-shared",
              "all-shared", ">"),
        Claim("sharing attention only costs about nothing downstream (against not-shared)",
              "downstream", "shared-attention", "not-shared", "~"),
        Claim("sharing the FFN hurts more than sharing attention", "downstream",
              "shared-attention", "shared-FFN", ">"),
    ]
  if study == "embedding_size":
    return [
        Claim("not-shared: a larger E is better (E = H against E = H/8)", "downstream",
              "not-shared E/H=1", "not-shared E/H=1/8", ">"),
        Claim("all-shared: E = H/4 beats E = H/8", "downstream", "all-shared E/H=1/4",
              "all-shared E/H=1/8", ">"),
        Claim("all-shared: E beyond H/4 does not help (E = H against E = H/4)", "downstream",
              "all-shared E/H=1", "all-shared E/H=1/4", "<="),
    ]
  raise ValueError(study)


PAPER_SIDE = {  # where the paper's a/b numbers for a claim's metric come from
    "downstream": "avg",
}


def mean(xs):
  return sum(xs) / len(xs)


def _var(xs):
  return statistics.variance(xs) if len(xs) > 1 else 0.0


def sampling_error(metric, value, counts):
  """One evaluation's standard error for `metric` at `value`; `counts` gives the examples."""
  if metric in ("mlm_accuracy",):
    return math.sqrt(0.25 / counts["mlm_predictions"])
  if metric in ("sop_accuracy", "nsp_accuracy"):
    return math.sqrt(0.25 / counts[metric.replace("accuracy", "examples")])
  if metric == "sst2_accuracy":
    return math.sqrt(0.25 / counts["sst2_dev"])
  if metric == "stsb_pearson":
    return (1 - min(value * value, 1.0)) / math.sqrt(max(counts["stsb_dev"] - 1, 1))
  if metric == "downstream":
    raise ValueError("downstream's error comes from its parts")
  raise ValueError(f"no sampling error for {metric}")


def downstream(run):
  """The mean of the downstream metrics (SST-2 accuracy, STS-B Pearson), as the paper's Avg."""
  return mean([run["sst2_accuracy"], run["stsb_pearson"]])


def metric_values(runs, metric):
  return [downstream(r) if metric == "downstream" else r[metric] for r in runs]


def noise_level(metric, a_runs, b_runs, counts):
  """max(2 x the seeds' standard error of the difference, 2 x the evaluations' own)."""
  a, b = metric_values(a_runs, metric), metric_values(b_runs, metric)
  seeds = math.sqrt(_var(a) / len(a) + _var(b) / len(b))

  def evaluation(runs, values):
    if metric == "downstream":
      parts = [math.hypot(sampling_error("sst2_accuracy", r["sst2_accuracy"], counts),
                          sampling_error("stsb_pearson", r["stsb_pearson"], counts)) / 2
               for r in runs]
    else:
      parts = [sampling_error(metric, v, counts) for v in values]
    return mean(parts) / math.sqrt(len(runs))  # the mean over seeds of independent evals
  own = math.hypot(evaluation(a_runs, a), evaluation(b_runs, b))
  return 2 * max(seeds, own)


def above_chance(runs, metric, counts):
  """Whether the seed mean of `metric` ("nsp_accuracy" or "sop_accuracy") beats its eval set's
  majority-label share (a constant guess) by more than twice the mean's sampling error."""
  majority = counts.get(metric.replace("accuracy", "majority"))
  if majority is None or not runs:
    return None
  values = metric_values(runs, metric)
  error = sampling_error(metric, mean(values), counts) / math.sqrt(len(values))
  return mean(values) - majority > 2 * error


def majority_share_runs(results, counts):
  """[(variant, seed)] of the runs whose SST-2 dev accuracy is exactly the dev set's majority
  share (to within one example): the score a constant prediction gets, i.e. a fine-tuned
  classifier that most likely learned nothing. None when `counts` lacks the share."""
  majority, n = counts.get("sst2_majority"), counts.get("sst2_dev")
  if majority is None or not n:
    return None
  return [(name, run["seed"]) for name, runs in results.items() for run in runs
          if at_majority_share(run["sst2_accuracy"], majority, n)]


def judge(claim, results, counts):
  """{difference, noise, verdict} of `claim` on {variant: [per-seed runs]}."""
  a_runs, b_runs = results.get(claim.a, []), results.get(claim.b, [])
  if not a_runs or not b_runs:
    return {"difference": None, "noise": None, "verdict": "not measured"}
  difference = (mean(metric_values(a_runs, claim.metric))
                - mean(metric_values(b_runs, claim.metric)))
  noise = noise_level(claim.metric, a_runs, b_runs, counts)
  if claim.expect == ">":
    verdict = ("agrees" if difference > noise else "disagrees" if difference < -noise
               else "within noise")
  elif claim.expect == "~":
    verdict = "agrees" if abs(difference) <= noise else "disagrees"
  elif claim.expect == "<=":
    verdict = "agrees" if difference <= noise else "disagrees"
  else:
    raise ValueError(claim.expect)
  return {"difference": difference, "noise": noise, "verdict": verdict}
