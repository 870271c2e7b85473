"""The house's rules (docs/DESIGN.md): imports point down the floors only, no import circle, no
module of the library imports a script, and importing the library changes nothing in the
process."""

import ast
import json
import os
import pathlib
import subprocess
import sys

from conftest import ROOT

PACKAGE = ROOT / "albert_tf"

# The floors, bottom first: a module may import its own floor and those below.
FLOORS = (
    ("albert_tf.files", "albert_tf.jobs", "albert_tf.tokenization"),
    ("albert_tf.config", "albert_tf.config_formats", "albert_tf.data"),
    ("albert_tf.modeling",),
    ("albert_tf.interop", "albert_tf.metrics"),
    ("albert_tf.training",),
    ("albert_tf.tasks",),
    ("albert_tf.export",),
    ("albert_tf.serving",),
    ("albert_tf.cli",),
)
SCRIPTS = {path.stem for path in ROOT.glob("*.py")}
# Commands documented before the re-foldering (issue 42), each now a module that only points to
# its new place and exits 1.
MOVED_COMMANDS = {
    "albert_tf.convert": "albert_tf.cli.convert",
    "albert_tf.quickstart": "albert_tf.cli.quickstart",
    "albert_tf.summary": "albert_tf.cli.summary",
    "albert_tf.data.inspect": "albert_tf.cli.inspect",
    "albert_tf.export.saved_model_cli": "albert_tf.cli.saved_model_cli",
    "albert_tf.interop.convert": "albert_tf.cli.convert",
}
# Files that may rename: files.py's atomic-write rule is the one place a rename happens.
RENAMES = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move"),
           ("gfile", "rename"), ("gfile", "Rename")}


def module_name(path):
  parts = path.relative_to(ROOT).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
  return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def floor(module):
  for level, prefixes in enumerate(FLOORS):
    if any(module == p or module.startswith(p + ".") for p in prefixes):
      return level
  raise AssertionError(f"{module} is on no floor: add its room to FLOORS and docs/DESIGN.md")


def import_statements(path):
  """(module, names) of each absolute import in `path`, at any depth of the file: `import a.b`
  gives ("a.b", []), `from a import b, c` gives ("a", ["b", "c"])."""
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      yield from ((alias.name, []) for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      yield node.module, [alias.name for alias in node.names]


def imports(path, known):
  """Every albert_tf module (and top-level script) `path` imports, at any depth of the file."""
  found = set()
  for module, names in import_statements(path):
    found.update([f"{module}.{name}" if f"{module}.{name}" in known else module
                  for name in names] or [module])
  return {n for n in found if n.startswith("albert_tf.") or n in SCRIPTS}


def test_every_import_points_down_the_floors():
  known = modules()
  upward = []
  for name, path in sorted(known.items()):
    if name == "albert_tf":
      continue  # the package's lazy facade (AlbertConfig, load_checkpoint, ...)
    for target in sorted(imports(path, known)):
      assert target not in SCRIPTS, f"{name} imports the script {target}"
      if floor(target) > floor(name):
        upward.append(f"{name} (floor {floor(name)}) -> {target} (floor {floor(target)})")
  assert not upward, "\n".join(upward)


def test_no_import_circle():
  known = modules()
  graph = {name: {t for t in imports(path, known) if t in known}
           for name, path in known.items()}
  state = {}

  def visit(node, trail):
    state[node] = "open"
    for target in sorted(graph[node]):
      if state.get(target) == "open":
        cycle = trail[trail.index(target):] + [target]
        raise AssertionError("import circle: " + " -> ".join(cycle))
      if target not in state:
        visit(target, trail + [target])
    state[node] = "done"

  for name in sorted(graph):
    if name not in state:
      visit(name, [name])


def test_the_package_root_holds_at_most_four_modules():
  """The rest lives in rooms; a pointer left for a moved command is not a module of the root."""
  root = sorted(f"albert_tf.{path.stem}" for path in PACKAGE.glob("*.py")
                if path.stem != "__init__" and f"albert_tf.{path.stem}" not in MOVED_COMMANDS)
  assert len(root) <= 4, root


def renames(path):
  """The lines of `path` that call a rename (`os.replace`, `tf.io.gfile.rename`, ...)."""
  found = []
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
      owner = node.func.value
      owner = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
      if (owner, node.func.attr) in RENAMES:
        found.append(node.lineno)
  return found


def test_only_files_py_renames():
  """Every atomic write goes through files.py, which renames on local disks and gs:// alike;
  an os.replace elsewhere would fail on a bucket."""
  found = [f"{name}:{line}" for name, path in sorted(modules().items())
           if name != "albert_tf.files" for line in renames(path)]
  assert not found, found


def test_the_rename_check_sees_os_replace_and_gfile_rename(tmp_path):
  source = tmp_path / "bad.py"
  source.write_text("import os\nos.replace(a, b)\ntf.io.gfile.rename(a, b, overwrite=True)\n"
                    "name.replace('a', 'b')\n")
  assert renames(source) == [2, 3]


def test_each_moved_command_points_to_its_new_module():
  for old, new in sorted(MOVED_COMMANDS.items()):
    run = subprocess.run([sys.executable, "-m", old, "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, (old, run.stdout, run.stderr)
    assert run.stderr.strip().splitlines()[-1] == f"python -m {old} moved: run python -m {new}"
    assert (ROOT / (new.replace(".", "/") + ".py")).exists()


def test_the_floor_rule_sees_an_upward_import(tmp_path):
  """The checks above would catch a data module importing the training loop."""
  source = tmp_path / "albert_tf" / "data" / "bad.py"
  source.parent.mkdir(parents=True)
  source.write_text("from albert_tf.training.loop import TrainingLoop\n")
  found = imports(pathlib.Path(source), {"albert_tf.training.loop": None})
  assert found == {"albert_tf.training.loop"}
  assert floor("albert_tf.training.loop") > floor("albert_tf.data.bad")


# Run in a fresh interpreter: imports everything the package imports from outside itself (their
# own import-time changes are not ours), then each albert_tf module, noting what each changed.
_IMPORT_EACH = """
import importlib, json, logging, os, sys

def state():
  loggers = dict(logging.root.manager.loggerDict, **{"(root)": logging.root})
  return {
      "os.environ": dict(os.environ),
      "sys.meta_path": {repr(finder): "installed" for finder in sys.meta_path},
      "logging": dict({"(logger class)": repr(logging.getLoggerClass()),
                       "(disable)": logging.root.manager.disable}, **{
          name: f"level {logger.level}, propagate {logger.propagate}, disabled "
                f"{logger.disabled}, handlers {logger.handlers}, filters {logger.filters}"
          for name, logger in loggers.items() if isinstance(logger, logging.Logger)
          and (logger.level or logger.handlers or logger.filters or logger.disabled
               or not logger.propagate)}),
  }

outside, package = json.loads(sys.stdin.read())
for name in outside:
  try:
    importlib.import_module(name)
  except Exception:  # an optional dependency, absent here: albert_tf's import needs none
    pass
changes, last = [], state()
for name in package:
  importlib.import_module(name)
  now = state()
  for what in now:
    changes += [[name, what, key, last[what].get(key), now[what].get(key)]
                for key in sorted(set(last[what]) | set(now[what]), key=str)
                if last[what].get(key) != now[what].get(key)]
  last = now
print(json.dumps(changes))
"""


def test_importing_albert_tf_and_each_module_changes_nothing_in_the_process(tmp_path):
  """No environment variable, import hook or logging set-up comes with an import: the tools
  quiet TensorFlow by calling `albert_tf.cli.quiet.install` (tested in
  test_fault_interruption.py), and a library user's process stays as they set it."""
  known = modules()
  outside = sorted({module for path in known.values() for module, _ in import_statements(path)
                    if module.split(".")[0] != "albert_tf"})
  # A clean environment: no TF_CPP_MIN_LOG_LEVEL (which would make the quieting stand aside).
  env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
  run = subprocess.run([sys.executable, "-c", _IMPORT_EACH], input=json.dumps(
      [outside, sorted(known)]), cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
  changes = json.loads(run.stdout.splitlines()[-1])
  assert not changes, "\n".join(f"importing {name} changed {what}[{key!r}]: {before!r} -> {after!r}"
                                for name, what, key, before, after in changes)
