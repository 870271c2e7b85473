"""The README's promises about set-up stay true."""

import re

from conftest import ROOT


def readme_commands():
  block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
  return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_two_commands_main_job_and_tests():
  commands = readme_commands()
  assert len(commands) == 2
  assert commands[0].endswith("-m albert_tf.cli.quickstart")
  assert commands[1].endswith("-m pytest -q -n 2 --dist loadfile tests")
  assert all("pip install -q -r requirements.txt" in c for c in commands)


def test_ci_runs_exactly_the_readme_test_command():
  ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
  assert readme_commands()[1] in ci_lines


def test_requirements_pin_the_design_stack():
  reqs = (ROOT / "requirements.txt").read_text().split()
  for pin in ("tensorflow~=2.20.0", "tensorflow-text~=2.20.0", "tf-models-official==2.20.0",
              "tf-keras~=2.20.0", "sentencepiece", "absl-py", "pytest"):
    # A bare name of the design may be pinned (sentencepiece: the one that loads with
    # apache-beam's protobuf).
    assert pin in reqs or "=" not in pin and any(r.startswith(pin + "==") for r in reqs), pin
