"""TF Serving's model folder layout: `<base path>/<version>/saved_model.pb`.

A model server watches a model's base path and serves its versions, each a folder named by a
positive integer, the highest by default. `--export_version` writes an export straight into
that layout, so the folder `--export_dir` names is served as it is (by TF Serving's Docker
image or our `serve.py`):

    run_classifier.py ... --export_dir=models/sst2 --export_version=auto   # models/sst2/1, 2, ...
"""

import os

from albert_tf import files
from albert_tf.jobs.option_fields import VERSION, is_version

SAVED_MODEL = "saved_model.pb"


def versions(base_path):
  """The versions under `base_path`, ascending: integer-named folders that hold a complete
  SavedModel (a version being written is a temporary folder, not yet named by its number)."""
  if not files.isdir(base_path):
    return []
  found = []
  for name in files.listdir(base_path):
    if name.isdigit() and int(name) > 0 and files.exists(
        os.path.join(base_path, name, SAVED_MODEL)):
      found.append(int(name))
  return sorted(found)


def parse_version(value, flag="--export_version"):
  """`value` of `flag` as a version: a positive integer, "auto" (the next after the highest
  present), or None (no layout: the export is the folder itself)."""
  if value is None or value == "":
    return None
  text = str(value).strip()
  if not is_version(text):
    raise ValueError(f"{flag} must be {VERSION}, got {value!r}")
  return text if text == "auto" else int(text)


def version_path(base_path, version, flag="--export_version"):
  """Where an export of `version` (parse_version's values) under `base_path` goes. An existing
  version is not overwritten: a model server may be serving it."""
  version = parse_version(version, flag)
  if version is None:
    return base_path
  present = versions(base_path)
  if version == "auto":
    version = (present[-1] if present else 0) + 1
  path = os.path.join(base_path, str(version))
  if files.exists(path):
    raise FileExistsError(f"{flag}={version}: {path} exists (a served version is never "
                          "replaced; give a new version or 'auto')")
  return path
