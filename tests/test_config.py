"""AlbertConfig: the original's albert_config.json, verbatim, with clear errors."""

import json
import logging

import pytest

from albert_tf.config import ORIGINAL_DEFAULTS, AlbertConfig, ConfigError
from conftest import ROOT

CONFIGS = ROOT / "configs"
# A v1 file as released (it carries `layers_to_keep`, which the model ignores).
ORIGINAL_BASE_V1 = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0,
    "layers_to_keep": [], "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1,
    "down_scale_factor": 1, "type_vocab_size": 2, "vocab_size": 30000,
}


def write(tmp_path, values, name="albert_config.json"):
  path = tmp_path / name
  path.write_text(json.dumps(values) if not isinstance(values, str) else values)
  return path


def test_original_config_round_trips_verbatim_with_legacy_keys(tmp_path):
  config = AlbertConfig.from_json_file(write(tmp_path, ORIGINAL_BASE_V1))
  assert config.to_dict() == ORIGINAL_BASE_V1
  assert config.sharing == "all" and config.ln_type == "postln"
  out = tmp_path / "out.json"
  config.to_json_file(out)
  assert json.loads(out.read_text()) == ORIGINAL_BASE_V1
  assert AlbertConfig.from_json_file(out) == config


def test_shipped_configs_match_spec_shapes():
  expected = {"base": (768, 3072, 12, 12), "large": (1024, 4096, 16, 24),
              "xlarge": (2048, 8192, 16, 24), "xxlarge": (4096, 16384, 64, 12)}
  for size, (h, i, heads, layers) in expected.items():
    for version in (1, 2):
      c = AlbertConfig.from_json_file(CONFIGS / f"albert_{size}_v{version}.json")
      assert (c.hidden_size, c.intermediate_size, c.num_attention_heads,
              c.num_hidden_layers) == (h, i, heads, layers)
      assert (c.embedding_size, c.vocab_size, c.max_position_embeddings,
              c.type_vocab_size) == (128, 30000, 512, 2)
      dropout = 0.1 if version == 1 and size != "xxlarge" else 0.0
      assert c.hidden_dropout_prob == c.attention_probs_dropout_prob == dropout
      assert set(c.to_dict()) == set(ORIGINAL_DEFAULTS)  # every original key, nothing else
  for size in ("base", "large"):
    c = AlbertConfig.from_json_file(CONFIGS / f"bert_{size}.json")
    assert c.sharing == "none" and c.embedding_size == c.hidden_size


def test_xlarge_with_32_heads_is_accepted():
  c = AlbertConfig.from_json_file(CONFIGS / "albert_xlarge_v2.json").replace(
      num_attention_heads=32)
  assert c.attention_head_size == 64


def test_extension_keys_are_written_only_when_set(tmp_path):
  config = AlbertConfig.from_dict(ORIGINAL_BASE_V1).replace(sharing="ffn", ln_type="preln")
  assert config.to_dict()["sharing"] == "ffn" and config.to_dict()["ln_type"] == "preln"
  assert AlbertConfig.from_dict(config.to_dict()).sharing == "ffn"


def test_missing_keys_take_the_original_defaults():
  c = AlbertConfig.from_dict({"vocab_size": 100})
  assert (c.hidden_size, c.num_attention_heads, c.intermediate_size) == (4096, 64, 16384)


def test_unknown_keys_warn_and_are_kept(tmp_path, caplog):
  values = dict(ORIGINAL_BASE_V1, my_note="hi")
  with caplog.at_level(logging.WARNING):
    config = AlbertConfig.from_json_file(write(tmp_path, values))
  assert "my_note" in caplog.text and "albert_config.json" in caplog.text
  assert config.to_dict()["my_note"] == "hi"


@pytest.mark.parametrize("change, key", [
    (dict(hidden_size=100), "hidden_size"),            # not divisible by 12 heads
    (dict(hidden_act="gelu_fast"), "hidden_act"),
    (dict(num_hidden_groups=13), "num_hidden_groups"),  # more groups than layers
    (dict(embedding_size=-1), "embedding_size"),
    (dict(intermediate_size=0), "intermediate_size"),
    (dict(num_hidden_layers=2.5), "num_hidden_layers"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    (dict(initializer_range=0), "initializer_range"),
    (dict(sharing="some"), "sharing"),
    (dict(ln_type="sandwich"), "ln_type"),
    (dict(inner_group_num=True), "inner_group_num"),
])
def test_impossible_values_name_file_and_key(tmp_path, change, key):
  path = write(tmp_path, dict(ORIGINAL_BASE_V1, **change))
  with pytest.raises(ConfigError, match=rf"albert_config.json: '{key}'"):
    AlbertConfig.from_json_file(path)


def test_missing_and_malformed_files_are_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.json"):
    AlbertConfig.from_json_file(tmp_path / "nope.json")
  with pytest.raises(ConfigError, match=r"bad.json: not valid JSON \(line 2"):
    AlbertConfig.from_json_file(write(tmp_path, '{"vocab_size": 3,\n oops}', "bad.json"))
  with pytest.raises(ConfigError, match="list.json: an ALBERT config must be a JSON object"):
    AlbertConfig.from_json_file(write(tmp_path, "[1, 2]", "list.json"))
  with pytest.raises(ConfigError, match="'vocab_size'"):
    AlbertConfig.from_json_file(write(tmp_path, {"hidden_size": 8}, "novocab.json"))


def test_layer_group_follows_the_original_formula():
  c = AlbertConfig.from_dict(dict(ORIGINAL_BASE_V1, num_hidden_groups=5))
  assert [c.layer_group(i) for i in range(12)] == [int(i / 12 * 5) for i in range(12)]
  assert [c.layer_group(i) for i in range(12)] == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4]


def test_config_formats_are_decided_in_one_module_without_an_import_circle():
  """config_formats.py knows the formats and imports nothing of ours; config.py uses it and
  never huggingface.py (which imports config.py)."""
  import ast  # pylint: disable=g-import-not-at-top

  def imports(module):
    tree = ast.parse((ROOT / "albert_tf" / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.module:
        names.add(node.module)
        names.update(f"{node.module}.{a.name}" for a in node.names)
      elif isinstance(node, ast.Import):
        names.update(a.name for a in node.names)
    return {n for n in names if n.startswith("albert_tf")}

  assert imports("config_formats") == set()
  assert not any("huggingface" in n for n in imports("config"))
  assert "albert_tf.config_formats" in imports("interop/huggingface")
