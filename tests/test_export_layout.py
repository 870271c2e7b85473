"""TF Serving's folder layout (`<base>/<version>/saved_model.pb`): the versions `--export_version`
writes, the bundle placed model by model, and TF Serving's --model_config_file as serve.py reads
it. No model is built: the SavedModels here are stand-in files."""

import os

import pytest

from albert_tf.export import bundle, layout
from albert_tf.jobs import versions


def saved_model(folder):
  os.makedirs(folder, exist_ok=True)
  (folder / versions.SAVED_MODEL).write_bytes(b"stand-in")


def test_versions_are_integer_folders_holding_a_complete_saved_model(tmp_path):
  for name in ("1", "3", "12"):
    saved_model(tmp_path / name)
  os.makedirs(tmp_path / "4")  # being written (or damaged): no saved_model.pb
  saved_model(tmp_path / "0")
  saved_model(tmp_path / "5.tmp-0a1b2c3d")
  assert versions.versions(tmp_path) == [1, 3, 12]
  assert versions.versions(tmp_path / "absent") == []


def test_auto_is_the_next_version_and_a_served_version_is_never_replaced(tmp_path):
  assert versions.version_path(tmp_path / "m", "auto") == str(tmp_path / "m" / "1")
  saved_model(tmp_path / "m" / "1")
  saved_model(tmp_path / "m" / "7")
  assert versions.version_path(tmp_path / "m", "auto") == str(tmp_path / "m" / "8")
  assert versions.version_path(tmp_path / "m", "2") == str(tmp_path / "m" / "2")
  assert versions.version_path(tmp_path / "m", None) == tmp_path / "m"
  with pytest.raises(FileExistsError, match=r"--export_version=7: .*m/7 exists \(a served "
                                            r"version is never replaced"):
    versions.version_path(tmp_path / "m", 7)
  for bad in ("0", "-1", "v2", "1.5"):
    with pytest.raises(ValueError, match=rf"--export_version must be a positive integer or "
                                         rf"auto, got '{bad}'"):
      versions.version_path(tmp_path / "m", bad)


def test_a_versioned_bundle_places_each_model_in_its_version_and_keeps_the_earlier_ones(tmp_path):
  """Each SavedModel of the bundle under <name>/<version>/, the other files in the encoder
  version's assets.extra/; earlier versions stay; auto counts over every model."""
  def write(folder):
    for name in ("encoder", "preprocessing", "fill_mask"):
      saved_model(folder / name)
    (folder / "encoder.tflite").write_bytes(b"tflite")
    return {"encoder": str(folder / "encoder"), "preprocessing": str(folder / "preprocessing"),
            "fill_mask": str(folder / "fill_mask"), "tflite": str(folder / "encoder.tflite")}

  base = tmp_path / "bundle"
  saved_model(base / "preprocessing" / "2")
  version = bundle._bundle_version(str(base), "auto")
  paths = bundle._export_version(lambda d: write(type(tmp_path)(d)), str(base), version)
  assert version == 3
  assert paths == {"encoder": str(base / "encoder" / "3"),
                   "preprocessing": str(base / "preprocessing" / "3"),
                   "fill_mask": str(base / "fill_mask" / "3"),
                   "tflite": str(base / "encoder" / "3" / "assets.extra" / "encoder.tflite")}
  assert (base / "encoder" / "3" / "assets.extra" / "encoder.tflite").read_bytes() == b"tflite"
  assert sorted(os.listdir(base)) == ["encoder", "fill_mask", "preprocessing"]
  assert versions.versions(base / "preprocessing") == [2, 3]
  with pytest.raises(FileExistsError, match=r"--export_version=3: .*exists"):
    bundle._bundle_version(str(base), 3)


def test_a_failed_versioned_bundle_leaves_no_version_and_no_temporary(tmp_path):
  def write(folder):
    saved_model(type(tmp_path)(folder) / "encoder")
    raise RuntimeError("the disk is full")

  with pytest.raises(RuntimeError):
    bundle._export_version(write, str(tmp_path / "b"), 1)
  assert os.listdir(tmp_path / "b") == []


def test_tf_servings_model_config_file_is_read_with_its_version_policies(tmp_path):
  config = tmp_path / "models.config"
  config.write_text("""
model_config_list {
  config { name: 'sst2' base_path: '/models/sst2' model_platform: 'tensorflow'
           model_version_policy { specific { versions: 1 versions: 3 } }
           version_labels { key: 'stable' value: 1 } }
  config { name: 'all' base_path: '/models/all' model_version_policy { all {} } }
  config { name: 'two' base_path: '/models/two' model_version_policy { latest { num_versions: 2 } } }
  config { name: 'squad' base_path: '/models/squad' }
}""")
  specs = layout.read_model_config(str(config))
  assert [(s.name, s.base_path, s.policy, s.labels) for s in specs] == [
      ("sst2", "/models/sst2", ("specific", [1, 3]), {"stable": 1}),
      ("all", "/models/all", ("all",), {}), ("two", "/models/two", ("latest", 2), {}),
      ("squad", "/models/squad", ("latest", 1), {})]
  for name in ("1", "2", "3"):
    saved_model(tmp_path / "m" / name)
  chosen = [layout.ModelSpec("m", str(tmp_path / "m"), policy).chosen_versions()
            for policy in (("latest", 1), ("latest", 2), ("all",), ("specific", [3, 1]))]
  assert chosen == [[3], [2, 3], [1, 2, 3], [1, 3]]
  with pytest.raises(FileNotFoundError, match=r"model 'm': version 4 is not under .*present: "
                                              r"1, 2, 3"):
    layout.ModelSpec("m", str(tmp_path / "m"), ("specific", [4])).chosen_versions()
  with pytest.raises(FileNotFoundError, match=r"model 'e': no version under .*export with "
                                              r"--export_version"):
    layout.ModelSpec("e", str(tmp_path / "e")).chosen_versions()


@pytest.mark.parametrize("text, error", [
    ("model_config_list { config { name: 'a' bas_path: '/m' } }",
     r"1:40 : Message type \"tensorflow.serving.ModelConfig\" has no field named \"bas_path\""),
    ("model_config_list { config { name: 'a' } }", r"config #1 needs a name and a base_path"),
    ("model_config_list { config { name: 'a' base_path: '/m' model_platform: 'pytorch' } }",
     r"model_platform 'pytorch'"),
    ("model_config_list { config { name: 'a' base_path: '/m' } config { name: 'a' "
     "base_path: '/n' } }", r"model 'a' is listed twice"),
    ("", r"lists no model"),
    ("model_config_list { config { name: 'a/b' base_path: '/m' } }",
     r"model name 'a/b': the character '/' cannot stand in a model's URL"),
], ids=["unknown-field", "no-base-path", "platform", "twice", "empty", "name-with-slash"])
def test_a_model_config_file_tf_serving_would_refuse_is_named(tmp_path, text, error):
  config = tmp_path / "models.config"
  config.write_text(text)
  with pytest.raises(ValueError, match=rf"--model_config_file={config}: .*{error}"):
    layout.read_model_config(str(config))


@pytest.mark.parametrize("flags, error", [
    (["--max_request_bytes=-5"], "--max_request_bytes=-5: must be at least 1"),
    (["--rest_api_num_threads=-1"], "--rest_api_num_threads=-1: must be at least 1"),
    (["--model_name=a/b"], "--model_name='a/b': the character '/' cannot stand in a model's URL"),
    (["--port=8501"], "--port and --rest_api_port are both 8501"),
    (["--file_system_poll_wait_seconds=-1"], "--file_system_poll_wait_seconds=-1 is negative"),
    (["--batching_parameters_file=b.config"], "--batching_parameters_file needs "
                                              "--enable_batching"),
    (["--group_batches_by_length=false"], "--group_batches_by_length needs --enable_batching"),
], ids=["request-bytes", "threads", "model-name", "same-port", "poll", "batching-file",
        "grouping"])
def test_serve_refuses_a_flag_it_cannot_honour_before_loading_anything(tmp_path, capsys, flags,
                                                                       error):
  """serve.py's flags are checked before any model loads: a usage error (exit 2) naming the flag
  and what it must be, never a traceback later or a server that refuses every request."""
  from albert_tf.cli import serve  # pylint: disable=g-import-not-at-top
  with pytest.raises(SystemExit) as stopped:
    serve.main([f"--model_base_path={tmp_path}", *flags])
  assert stopped.value.code == 2
  assert error in capsys.readouterr().err
