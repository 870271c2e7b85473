"""The house's rules (docs/DESIGN.md): imports point down the floors only, no import circle, no
module of the library imports a script."""

import ast
import pathlib

from conftest import ROOT

PACKAGE = ROOT / "albert_tf"

# The floors, bottom first: a module may import its own floor and those below.
FLOORS = (
    ("albert_tf.files", "albert_tf.signals", "albert_tf.option_fields", "albert_tf.tokenization"),
    ("albert_tf.config", "albert_tf.config_formats", "albert_tf.data"),
    ("albert_tf.modeling",),
    ("albert_tf.interop", "albert_tf.metrics"),
    ("albert_tf.training",),
    ("albert_tf.tasks",),
    ("albert_tf.export",),
    ("albert_tf.cli",),
)
SCRIPTS = {path.stem for path in ROOT.glob("*.py")}


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


def imports(path, known):
  """Every albert_tf module (and top-level script) `path` imports, at any depth of the file."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      found.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names:
        name = f"{node.module}.{alias.name}"
        found.add(name if name in known else node.module)
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


def test_the_floor_rule_sees_an_upward_import(tmp_path):
  """The checks above would catch a data module importing the training loop."""
  source = tmp_path / "albert_tf" / "data" / "bad.py"
  source.parent.mkdir(parents=True)
  source.write_text("from albert_tf.training.loop import TrainingLoop\n")
  found = imports(pathlib.Path(source), {"albert_tf.training.loop": None})
  assert found == {"albert_tf.training.loop"}
  assert floor("albert_tf.training.loop") > floor("albert_tf.data.bad")
