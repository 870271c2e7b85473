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


def _anchors(markdown):
  """The anchors GitHub gives a file's headings: lowercased, punctuation dropped, spaces -> -."""
  headings = re.findall(r"^#+ (.*)$", _prose(markdown), re.M)
  return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _prose(markdown):
  """The text outside fenced code blocks, where a `[...](...)` is code, not a link."""
  return re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)


def test_documentation_links_resolve():
  # A newcomer walks README -> docs/<guide>.md -> back; a moved or renamed file must not leave
  # a dead link (or a dead #section) behind.
  pages = [ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "benchmarks" / "README.md",
           *sorted((ROOT / "docs").glob("*.md"))]
  dead = []
  for page in pages:
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text())):
      if re.match(r"[a-z]+:", target):
        continue  # https:, mailto:
      path, _, anchor = target.partition("#")
      resolved = (page.parent / path).resolve() if path else page
      if not resolved.exists():
        dead.append(f"{page.relative_to(ROOT)}: {target}")
      elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text()):
        dead.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
  assert not dead, dead


def test_benchmarks_md_is_the_render_of_its_results_file():
  """BENCHMARKS.md is written by `python -m benchmarks.render_summary` from
  benchmarks/results/summary.json: an edit to one alone would let them drift."""
  import json  # pylint: disable=g-import-not-at-top
  from benchmarks import render_summary  # pylint: disable=g-import-not-at-top
  summary = json.loads((ROOT / "benchmarks" / "results" / "summary.json").read_text())
  assert (ROOT / "BENCHMARKS.md").read_text() == render_summary.render(summary), (
      "run .venv/bin/python -m benchmarks.render_summary")


def test_benchmarks_md_stays_a_summary_with_its_history_beside_it():
  assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) < 300
  history = (ROOT / "docs" / "benchmarks-history.md").read_text()
  assert "## serve.py over 50 rolled-out versions" in history  # the newest section, kept


def _paragraphs(markdown):
  """The prose paragraphs of `markdown`: runs of lines outside code blocks, tables, headings and
  lists."""
  paragraphs, current = [], []
  for line in _prose(markdown).splitlines() + [""]:
    if not line.strip() or line.startswith(("#", "|", "- ", "  ")):
      if current:
        paragraphs.append(current)
      current = []
    else:
      current.append(line)
  return paragraphs


def test_readme_is_short_and_its_paragraphs_are_too():
  readme = (ROOT / "README.md").read_text()
  assert len(readme.splitlines()) <= 130
  long = [p[0] for p in _paragraphs(readme) if len(p) > 8]
  assert not long, f"paragraphs over 8 lines, starting: {long}"
