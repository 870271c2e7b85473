"""benchmarks/run.py's plan and arithmetic (no worker processes: those are timed by hand)."""

from benchmarks import run


def _result(**figures):
  return dict(figures, vmhwm_mib=1000.0, ru_maxrss_mib=1000.0, others_cores=0.0)


def test_the_plan_exports_an_xla_variant_and_the_summary_compares_it_with_the_plain_peer(tmp_path):
  suite = run.SUITES["quick"]
  rows, exports = run.plan(suite, str(tmp_path))
  rows = dict(rows)
  for side in run.SIDES:  # every side writes the same three exports, each to its own folder
    assert set(exports[side]["exports"]) == {"float32", "bfloat16", "float32 xla"}
    assert len(set(exports[side]["exports"].values())) == 3
  xla = rows["infer tiny float32 xla"]
  assert xla["ours"]["dir"] == exports["ours"]["exports"]["float32 xla"]
  assert xla["peer"]["dir"] == exports["peer"]["exports"]["float32 xla"]

  latency = lambda ms: _result(**{"1": {"latency_ms": ms}})
  runs = {"train tiny float32": {"ours": [_result(step_seconds=[1.0, 2.0, 3.0], parameters=5,
                                                  last_loss=1.0)],
                                 "peer": [_result(step_seconds=[4.0], parameters=5,
                                                  last_loss=1.0)]},
          "infer tiny float32": {"ours": [latency(9.0)], "peer": [latency(10.0)]},
          "infer tiny float32 xla": {"ours": [latency(6.0)], "peer": [latency(4.0)]}}
  matmul = [{"float32": {"gflops_best": 100.0}, "bfloat16": {"gflops_best": 50.0}}]
  _, summary, _ = run.summarize(suite, runs, matmul)
  assert summary["train tiny float32"]["speed_ours_over_peer"] == 2.0  # medians: 2 s vs 4 s
  assert summary["infer tiny float32 xla"]["latency_ours_over_peer"]["1"] == 1.5
  # Against the peer's plain float32 export (what it ships), not its XLA one.
  assert summary["infer tiny float32 xla"]["latency_ours_over_peer_float32"]["1"] == 0.6
  assert summary["infer tiny float32"]["latency_ours_over_peer_float32"]["1"] == 0.9
