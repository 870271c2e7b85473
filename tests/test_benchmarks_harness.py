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


def test_finetune_rows_compare_each_job_with_its_own_peer_and_its_float32_peer(tmp_path):
  suite = run.SUITES["finetune"]
  rows, exports = run.plan(suite, str(tmp_path))
  assert exports == {} and all(name.startswith("finetune") for name, _ in rows)
  rows = dict(rows)
  squad = rows["finetune squad base bfloat16"]
  assert {side: (spec["task"], spec["seq"], spec["precision"]) for side, spec in squad.items()} \
      == {"ours": ("squad", 384, "bfloat16"), "peer": ("squad", 384, "bfloat16")}
  assert set(rows) == {f"finetune {t} base {p}" for t in ("classifier", "tagger", "squad")
                       for p in ("float32", "bfloat16")}

  step = lambda seconds: _result(step_seconds=[seconds], parameters=5, last_loss=1.0, seq=128,
                                 batch=32, precision="float32")
  runs = {"finetune classifier base float32": {"ours": [step(3.0)], "peer": [step(4.5)]},
          "finetune classifier base bfloat16": {"ours": [dict(step(1.5), precision="bfloat16")],
                                                "peer": [dict(step(3.0), precision="bfloat16")]},
          "finetune tagger base float32": {"ours": [step(2.0)], "peer": [step(8.0)]}}
  matmul = [{"float32": {"gflops_best": 100.0}, "bfloat16": {"gflops_best": 50.0}}]
  _, summary, _ = run.summarize(suite, runs, matmul)
  bf16 = summary["finetune classifier base bfloat16"]
  assert bf16["speed_ours_over_peer"] == 2.0 and bf16["speed_ours_over_peer_float32"] == 3.0
  assert summary["finetune tagger base float32"]["speed_ours_over_peer"] == 4.0
  # MFU from this row's own shape (seq 128 x batch 32) and precision's matmul rate.
  from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
  from albert_tf.modeling.summary import flops_per_token  # pylint: disable=import-outside-toplevel
  config = AlbertConfig.from_json_file(str(run.REPO + "/" + suite["config"]))
  gflop = flops_per_token(config, 128, 0)[1] * 128 * 32 / 1e9
  assert abs(bf16["ours"]["mfu"] - gflop / 1.5 / 50.0) < 1e-9
  assert "| finetune classifier base bfloat16 | ours | 128 x 32 | 1.500 |" in \
      run.format_tables(suite, {"float32": 100.0, "bfloat16": 50.0}, summary, 0.0, None)


def test_only_items_match_a_substring_or_with_a_trailing_dollar_the_whole_row_name(tmp_path):
  rows, _ = run.plan(run.SUITES["full"], str(tmp_path))
  names = [name for name, _ in rows]
  pick = lambda *items: [n for n in names if any(run.row_wanted(n, item) for item in items)]
  assert pick("train base bfloat16") == ["train base bfloat16", "train base bfloat16 jit"]
  assert pick("train base bfloat16$", "train base float32$") == [
      "train base float32", "train base bfloat16"]
  assert pick("base bfloat16$") == []
