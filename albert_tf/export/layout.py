"""TF Serving's model folder layout: `<base path>/<version>/saved_model.pb`.

A model server watches a model's base path and serves its versions, each a folder named by a
positive integer, the highest by default. `--export_version` writes an export straight into
that layout, so the folder `--export_dir` names is served as it is (by TF Serving's Docker
image or our `serve.py`):

    run_classifier.py ... --export_dir=models/sst2 --export_version=auto   # models/sst2/1, 2, ...
"""

import dataclasses
import os

from albert_tf import files
from albert_tf.option_fields import VERSION, is_version

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


# --- TF Serving's --model_config_file: a ModelServerConfig in protobuf text format -----------
# The part of tensorflow_serving/config/model_server_config.proto (and of
# file_system_storage_path_source.proto's ServableVersionPolicy) that a model server of
# SavedModels reads, with TF Serving's field numbers; any other field is an error naming it.
_CONFIG_PROTO = """
name: "albert_tf_model_server_config.proto" package: "tensorflow.serving" syntax: "proto3"
message_type {
  name: "ServableVersionPolicy"
  nested_type { name: "Latest" field { name: "num_versions" number: 1 type: TYPE_UINT32
                                       label: LABEL_OPTIONAL } }
  nested_type { name: "All" }
  nested_type { name: "Specific" field { name: "versions" number: 1 type: TYPE_INT64
                                         label: LABEL_REPEATED } }
  field { name: "latest" number: 100 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".tensorflow.serving.ServableVersionPolicy.Latest" oneof_index: 0 }
  field { name: "all" number: 101 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".tensorflow.serving.ServableVersionPolicy.All" oneof_index: 0 }
  field { name: "specific" number: 102 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".tensorflow.serving.ServableVersionPolicy.Specific" oneof_index: 0 }
  oneof_decl { name: "policy_choice" }
}
message_type {
  name: "ModelConfig"
  nested_type { name: "VersionLabelsEntry" options { map_entry: true }
                field { name: "key" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
                field { name: "value" number: 2 type: TYPE_INT64 label: LABEL_OPTIONAL } }
  field { name: "name" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "base_path" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "model_platform" number: 4 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "model_version_policy" number: 7 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".tensorflow.serving.ServableVersionPolicy" }
  field { name: "version_labels" number: 8 type: TYPE_MESSAGE label: LABEL_REPEATED
          type_name: ".tensorflow.serving.ModelConfig.VersionLabelsEntry" }
}
message_type {
  name: "ModelConfigList"
  field { name: "config" number: 1 type: TYPE_MESSAGE label: LABEL_REPEATED
          type_name: ".tensorflow.serving.ModelConfig" }
}
message_type {
  name: "ModelServerConfig"
  field { name: "model_config_list" number: 1 type: TYPE_MESSAGE label: LABEL_OPTIONAL
          type_name: ".tensorflow.serving.ModelConfigList" }
}
"""


@dataclasses.dataclass
class ModelSpec:
  """One model to serve: its name, base path, which versions (`policy`: ("latest", n),
  ("all",) or ("specific", [versions])) and version labels ({label: version})."""
  name: str
  base_path: str
  policy: tuple = ("latest", 1)
  labels: dict = dataclasses.field(default_factory=dict)

  def chosen_versions(self):
    """The versions under base_path that the policy serves, ascending; an error naming the
    path when there are none, or when a specific version is missing."""
    present = versions(self.base_path)
    if self.policy[0] == "specific":
      missing = sorted(set(self.policy[1]) - set(present))
      if missing:
        raise FileNotFoundError(
            f"model {self.name!r}: version {missing[0]} is not under {self.base_path} "
            f"(present: {', '.join(map(str, present)) or 'none'})")
      return sorted(set(self.policy[1]))
    if not present:
      raise FileNotFoundError(
          f"model {self.name!r}: no version under {self.base_path} (TF Serving's layout: "
          f"{self.base_path}/<version>/{SAVED_MODEL}; export with --export_version)")
    return present if self.policy[0] == "all" else present[-self.policy[1]:]


def read_model_config(path):
  """The ModelSpecs of TF Serving's --model_config_file `path` (text format)."""
  from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format  # pylint: disable=g-import-not-at-top
  pool = descriptor_pool.DescriptorPool()
  pool.Add(text_format.Parse(_CONFIG_PROTO, descriptor_pb2.FileDescriptorProto()))
  config = message_factory.GetMessageClass(
      pool.FindMessageTypeByName("tensorflow.serving.ModelServerConfig"))()
  try:
    with files.open_file(path, "r") as f:
      text_format.Parse(f.read(), config)
  except text_format.ParseError as e:
    raise ValueError(f"--model_config_file={path}: {e} (a ModelServerConfig in text format: "
                     "model_config_list { config { name: ... base_path: ... } })") from None
  specs = []
  for i, model in enumerate(config.model_config_list.config):
    where = f"--model_config_file={path}: config #{i + 1}"
    if not model.name or not model.base_path:
      raise ValueError(f"{where} needs a name and a base_path")
    if model.model_platform not in ("", "tensorflow"):
      raise ValueError(f"{where} ({model.name}): model_platform {model.model_platform!r}; "
                       "this server serves tensorflow SavedModels")
    choice = model.model_version_policy.WhichOneof("policy_choice")
    if choice == "all":
      policy = ("all",)
    elif choice == "specific":
      policy = ("specific", list(model.model_version_policy.specific.versions))
    else:
      policy = ("latest", model.model_version_policy.latest.num_versions or 1)
    specs.append(ModelSpec(model.name, model.base_path, policy, dict(model.version_labels)))
  if not specs:
    raise ValueError(f"--model_config_file={path}: lists no model (model_config_list {{ config "
                     "{ name: ... base_path: ... } })")
  names = [s.name for s in specs]
  twice = sorted({n for n in names if names.count(n) > 1})
  if twice:
    raise ValueError(f"--model_config_file={path}: model {twice[0]!r} is listed twice")
  return specs
