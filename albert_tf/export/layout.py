"""TF Serving's --model_config_file (which models a server serves, from which base paths, which
versions) and the checks of a model's name. The versions themselves, `<base path>/<version>/`,
are `albert_tf.jobs.versions`: a training job writes them too."""

import dataclasses

from albert_tf import files
from albert_tf.jobs.versions import SAVED_MODEL, versions

# --- TF Serving's --model_config_file: a ModelServerConfig in protobuf text format -----------
# tensorflow-serving-api's own message (tensorflow_serving/config/model_server_config.proto), so
# a file TF Serving reads reads the same here. The fields a model server of SavedModels on local
# or cloud paths needs are used; a field set that this server would ignore is refused by name.
_UNSUPPORTED = ("model_type", "logging_config")


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
    return self.wanted(present)

  def wanted(self, present):
    """Of the versions `present` (ascending), those the policy serves, ascending."""
    if self.policy[0] == "specific":
      return sorted(set(self.policy[1]) & set(present))
    return list(present) if self.policy[0] == "all" else list(present)[-self.policy[1]:]


def read_model_config(path):
  """The ModelSpecs of TF Serving's --model_config_file `path` (text format)."""
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.config import model_server_config_pb2  # pylint: disable=g-import-not-at-top
  config = model_server_config_pb2.ModelServerConfig()
  try:
    with files.open_file(path, "r") as f:
      text_format.Parse(f.read(), config)
  except text_format.ParseError as e:
    raise ValueError(f"--model_config_file={path}: {e} (a ModelServerConfig in text format: "
                     "model_config_list { config { name: ... base_path: ... } })") from None
  return model_specs(config, f"--model_config_file={path}")


def model_name_problem(name):
  """Why `name` cannot name a served model (its URL is /v1/models/NAME:predict), or None."""
  if not name:
    return "a model needs a name"
  bad = sorted({c for c in name if not (c.isalnum() or c in "-_.")})
  if bad:
    return (f"the character {bad[0]!r} cannot stand in a model's URL (/v1/models/NAME:predict); "
            "use letters, digits, '-', '_' and '.'")
  return None


def model_specs(config, where):
  """The ModelSpecs of a ModelServerConfig message (a config file's, or a ReloadConfigRequest's);
  ValueError starting with `where` for one TF Serving would refuse or this server cannot serve."""
  if config.WhichOneof("config") == "custom_model_config":
    raise ValueError(f"{where}: custom_model_config; this server reads model_config_list")
  specs = []
  for i, model in enumerate(config.model_config_list.config):
    here = f"{where}: config #{i + 1}"
    if not model.name or not model.base_path:
      raise ValueError(f"{here} needs a name and a base_path")
    problem = model_name_problem(model.name)
    if problem:
      raise ValueError(f"{here}: model name {model.name!r}: {problem}")
    if model.model_platform not in ("", "tensorflow"):
      raise ValueError(f"{here} ({model.name}): model_platform {model.model_platform!r}; "
                       "this server serves tensorflow SavedModels")
    for field in _UNSUPPORTED:
      if model.HasField(field) if field == "logging_config" else getattr(model, field):
        raise ValueError(f"{here} ({model.name}): {field} is not supported by this server")
    choice = model.model_version_policy.WhichOneof("policy_choice")
    if choice == "all":
      policy = ("all",)
    elif choice == "specific":
      policy = ("specific", list(model.model_version_policy.specific.versions))
    else:
      policy = ("latest", model.model_version_policy.latest.num_versions or 1)
    specs.append(ModelSpec(model.name, model.base_path, policy, dict(model.version_labels)))
  if not specs:
    raise ValueError(f"{where}: lists no model (model_config_list {{ config "
                     "{ name: ... base_path: ... } })")
  names = [s.name for s in specs]
  twice = sorted({n for n in names if names.count(n) > 1})
  if twice:
    raise ValueError(f"{where}: model {twice[0]!r} is listed twice")
  return specs
