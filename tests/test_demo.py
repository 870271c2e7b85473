"""The README's main job (python -m albert_tf.demo) end to end, on the tiny config."""

from albert_tf import demo
from conftest import ROOT


def test_demo_real_data_writes_reloads_and_loads_its_checkpoint(tmp_path, capsys, shared_data):
  spm = str(shared_data / "sentencepiece" / "spiece.model")
  args = ["--albert_config_file", str(ROOT / "configs" / "tiny.json"),
          "--spm_model_file", spm, "--output_dir", str(tmp_path)]
  assert demo.main(args) == 0
  out = capsys.readouterr().out
  assert "max |difference| in outputs: 0.00e+00" in out
  assert "[CLS] ▁the ▁quick" in out and "▁1990 ," in out
  assert "sop_logits        (1, 2)" in out and "encoder_outputs   2 x (1, 32, 32)" in out
  assert (tmp_path / "tf1" / "model.ckpt.index").exists()

  assert demo.main(args + ["--init_checkpoint", str(tmp_path / "native")]) == 0
  assert "from native checkpoint" in capsys.readouterr().out


def test_demo_reports_a_vocab_that_does_not_fit_the_config(tmp_path, capsys, shared_data):
  spm = str(shared_data / "sentencepiece" / "test_sentencepiece.model")
  args = ["--albert_config_file", str(ROOT / "configs" / "tiny.json"),
          "--spm_model_file", spm, "--output_dir", str(tmp_path)]
  assert demo.main(args) == 2
  assert "vocab_size=30000" in capsys.readouterr().err
