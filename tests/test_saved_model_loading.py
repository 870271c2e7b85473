"""Loading an export again and again does not grow the process (issue 56): serving exports are
saved without custom gradients, and `load_saved_model` releases the gradients of one saved with
them (the encoder export, an export written before) when the loaded object goes.

Each load used to leave its graphs in TensorFlow's global gradient registry: per load of a tiny
export, 150 MB and 28 registry entries (classifier), 56 MB and 17 (encoder), 105 MB and 20 (the
e45fe7a classifier export). Measured in a fresh interpreter, so that nothing the suite loaded
before counts."""

import json
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT

LOADS = 4
# MB of resident memory a load may leave behind, on average over the loads after the first (which
# builds TensorFlow's caches); the smallest leak above is 56 MB.
MB_PER_LOAD = 20

# Loads each export LOADS times, dropping it each time: the registry's size before the first
# load, and after each load the registry's size while the object lives and once it is gone,
# and the resident memory once it is gone.
_MEASURE = """
import gc, json, sys
import tensorflow as tf
import tensorflow_text  # the serving exports' tokenizer ops
from albert_tf.interop.saved_models import load_saved_model, registered_gradients

def resident_mb():
  with open("/proc/self/status") as f:
    return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

loaders = {"tf.saved_model.load": tf.saved_model.load, "load_saved_model": load_saved_model}
results = {}
for name, path, loader, loads in json.loads(sys.stdin.read()):
  result = results[name] = {"before": registered_gradients(), "alive": [], "gone": [], "mb": []}
  for _ in range(loads):
    loaded = loaders[loader](path)
    result["alive"].append(registered_gradients())
    del loaded
    gc.collect()
    result["gone"].append(registered_gradients())
    result["mb"].append(resident_mb())
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def growth(classifier_export, encoder_export, tmp_path_factory):
  """What _MEASURE saw, by export: a serving export (tf.saved_model.load), the encoder export
  and e45fe7a's classifier export, saved with custom gradients (load_saved_model)."""
  old = tmp_path_factory.mktemp("e45fe7a")
  with tarfile.open(ROOT / "tests" / "fixtures" / "e45fe7a" / "classifier_export.tar.xz") as tar:
    tar.extractall(old, filter="data")
  exports = [("serving", classifier_export[1], "tf.saved_model.load", LOADS),
             ("encoder", encoder_export[1], "load_saved_model", LOADS),
             ("old", str(old / "classifier_export"), "load_saved_model", LOADS)]
  process = subprocess.run([sys.executable, "-c", _MEASURE], input=json.dumps(exports),
                           capture_output=True, text=True, cwd=ROOT, check=False, timeout=300)
  assert process.returncode == 0, process.stderr[-3000:]
  return json.loads(process.stdout.splitlines()[-1])


def mb_per_load(result):
  return (result["mb"][-1] - result["mb"][0]) / (len(result["mb"]) - 1)


def test_a_serving_export_registers_no_gradient_and_loads_without_growing(growth):
  serving = growth["serving"]
  assert serving["alive"] == serving["gone"] == [serving["before"]] * LOADS
  assert mb_per_load(serving) < MB_PER_LOAD, serving["mb"]


def test_the_encoder_export_keeps_its_gradients_and_load_saved_model_releases_them(growth):
  encoder = growth["encoder"]
  assert min(encoder["alive"]) > encoder["before"]  # fine-tuning differentiates through them
  assert encoder["gone"] == [encoder["before"]] * LOADS
  assert mb_per_load(encoder) < MB_PER_LOAD, encoder["mb"]


def test_an_export_written_with_custom_gradients_loads_without_growing(growth):
  old = growth["old"]
  assert min(old["alive"]) > old["before"]
  assert old["gone"] == [old["before"]] * LOADS
  assert mb_per_load(old) < MB_PER_LOAD, old["mb"]
