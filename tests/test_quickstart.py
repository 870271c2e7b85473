"""The README's main job (python -m albert_tf.cli.quickstart), shortened: every stage runs."""

from albert_tf.cli import quickstart


def test_stdlib_corpus_is_sentences_and_documents(tmp_path):
  documents, size = quickstart.write_corpus(str(tmp_path / "c.txt"), 50_000)
  text = (tmp_path / "c.txt").read_text()
  assert documents > 20 and size > 40_000
  blocks = [b for b in text.split("\n\n") if b.strip()]
  assert len(blocks) == documents and all(len(b.splitlines()) >= 2 for b in blocks)


def test_quickstart_runs_every_stage_and_plots(tmp_path, capsys):
  status = quickstart.main(["--output_dir", str(tmp_path), "--corpus_mb", "0.4",
                            "--vocab_size", "1000", "--num_train_steps", "30",
                            "--log_every_steps", "10", "--dupe_factor", "1",
                            "--max_seq_length", "64", "--train_batch_size", "16",
                            "--learning_rate", "0.01"])
  assert status == 0
  out = capsys.readouterr().out
  assert "held-out eval, untrained -> after 30 steps" in out and "masked_lm_accuracy" in out
  assert "fill-mask 'Return the [MASK] of the list.':" in out
  png = tmp_path / "training_curves.png"
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
  assert (tmp_path / "spm.model").exists() and (tmp_path / "model" / "eval_results.txt").exists()
  assert (tmp_path / "data" / "train.json").exists()
