"""Parameter counts of built models against SPEC.md's exact figures and the paper's tables."""

import gc

import pytest

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.cli.summary import main
from albert_tf.modeling.summary import flops_per_token, format_summary, parameter_counts
from conftest import ROOT

V2_ENCODER_COUNTS = {"base": 11_683_584, "large": 17_683_968, "xlarge": 58_724_864,
                     "xxlarge": 222_595_584}
# SPEC.md: exact encoder+pooler counts of ALBERT-base's ablations (paper Tables 3 and 4),
# with the paper's rounded figure; the paper counts the not-shared row without the pooler.
ABLATIONS = [
    # (E, sharing, exact, paper figure in millions)
    (64, "none", 87_648_000, 87), (128, "none", 89_650_176, 89),
    (256, "none", 93_654_528, 93), (768, "none", 109_081_344, 108),
    (64, "all", 9_681_408, 10), (128, "all", 11_683_584, 12),
    (256, "all", 15_687_936, 16), (768, "all", 31_114_752, 31),
    (128, "attention", 63_647_232, 64), (768, "attention", 83_078_400, 83),
    (128, "ffn", 37_686_528, 38), (768, "ffn", 57_117_696, 57),
]
POOLER = 590_592


def built_count(config, pretrainer=False):
  model = (AlbertPretrainer if pretrainer else AlbertEncoder)(config)
  count = model.count_params()
  del model
  gc.collect()
  return count


def built_counts(config):
  """(encoder + pooler, with the pretraining heads) of one built pretrainer."""
  model = AlbertPretrainer(config)
  counts = model.encoder.count_params(), model.count_params()
  del model
  gc.collect()
  return counts


# Building is what costs time: the counting formula is checked against built models below
# (test_summary_counts_agree_with_built_models, every sharing mode, groups, E; base itself in
# test_base_with_pretraining_heads_has_spec_count); SPEC's figures against the formula here.
@pytest.mark.parametrize("size", sorted(V2_ENCODER_COUNTS))
def test_v2_configs_have_spec_parameter_counts(size):
  config = AlbertConfig.from_json_file(ROOT / "configs" / f"albert_{size}_v2.json")
  assert parameter_counts(config)["encoder_total"] == V2_ENCODER_COUNTS[size]


@pytest.mark.parametrize("size", sorted(V2_ENCODER_COUNTS))
def test_google_zh_configs_are_v2_shapes_with_the_21128_vocab_and_relu(size):
  config = AlbertConfig.from_json_file(ROOT / "configs" / f"albert_{size}_zh.json")
  assert config.hidden_act == "relu" and config.vocab_size == 21128
  # Only the word embeddings differ from the English v2 model: (30000 - 21128) rows of E.
  assert parameter_counts(config)["encoder_total"] == (V2_ENCODER_COUNTS[size]
                                                       - (30000 - 21128) * 128)


def test_albert_tiny_google_zh_has_its_hand_counted_parameters():
  """brightmart's Google-layout tiny (their layout's counts: test_brightmart_zh.py)."""
  config = AlbertConfig.from_json_file(
      ROOT / "configs" / "brightmart" / "albert_config_tiny_google.json")
  embeddings = (21128 + 512 + 2) * 128 + 2 * 128 + 128 * 312 + 312
  block = 4 * (312 * 312 + 312) + (312 * 1248 + 1248) + (1248 * 312 + 312) + 2 * 2 * 312
  pooler = 312 * 312 + 312
  assert built_count(config) == embeddings + block + pooler == 4_080_520


def test_base_with_pretraining_heads_has_spec_count():
  config = AlbertConfig.from_json_file(ROOT / "configs" / "albert_base_v2.json")
  assert built_counts(config) == (V2_ENCODER_COUNTS["base"], 11_813_810)
  assert parameter_counts(config)["pretrainer_total"] == 11_813_810


BUILT_ABLATIONS = {(128, "none")}  # attention, ffn: built (tiny) in the summary test


@pytest.mark.parametrize("embedding_size, sharing, exact, paper_millions", ABLATIONS)
def test_base_ablations_match_paper_tables_3_and_4(embedding_size, sharing, exact,
                                                   paper_millions):
  base = AlbertConfig.from_json_file(ROOT / "configs" / "albert_base_v2.json")
  config = base.replace(embedding_size=embedding_size, sharing=sharing)
  count = parameter_counts(config)["encoder_total"]
  assert count == exact
  if (embedding_size, sharing) in BUILT_ABLATIONS:
    assert built_count(config) == exact
  paper_count = count - POOLER if (sharing == "none" and embedding_size == 768) else count
  assert abs(paper_count - paper_millions * 1e6) < 1e6


def test_sharing_means_one_object_so_variables_exist_once():
  base = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  encoder = AlbertEncoder(base.replace(num_hidden_layers=6, sharing="attention"))
  assert len(encoder.attention_sublayers) == 1 and len(encoder.ffn_sublayers) == 6
  assert len({id(b.attention_sublayer) for b in encoder.blocks}) == 1
  assert len(encoder.trainable_weights) == len({id(w) for w in encoder.trainable_weights})


@pytest.mark.parametrize("changes", [
    dict(), dict(num_hidden_groups=2, inner_group_num=3), dict(embedding_size=32),
    dict(sharing="ffn", num_hidden_groups=2), dict(sharing="none"), dict(ln_type="preln"),
])
def test_summary_counts_agree_with_built_models(changes):
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      num_hidden_layers=4, **changes)
  counts = parameter_counts(config)
  assert (counts["encoder_total"], counts["pretrainer_total"]) == built_counts(config)


def test_flops_grow_with_layers_not_with_distinct_parameters():
  base = AlbertConfig.from_json_file(ROOT / "configs" / "albert_base_v2.json")
  shared, _ = flops_per_token(base)
  unshared, _ = flops_per_token(base.replace(sharing="none"))
  assert shared == unshared  # sharing saves parameters, not compute
  deeper, training = flops_per_token(base.replace(num_hidden_layers=24))
  assert deeper > 1.9 * shared and training == 3 * deeper
  # ~2 FLOPs per parameter per token for the encoder matmuls, plus attention: base is
  # 12 * (2 * 7.08M + 4 * 512 * 768) = 189.0M forward FLOPs per token before the heads.
  assert 0.185e9 < shared < 0.195e9


def test_summary_cli_prints_parts_and_rejects_missing_file(capsys):
  assert main(["--albert_config_file", str(ROOT / "configs" / "albert_large_v2.json")]) == 0
  out = capsys.readouterr().out
  assert "17,683,968" in out and "pooler" in out and "training" in out
  assert main(["--albert_config_file", "no/such.json"]) == 2
  assert "no/such.json" in capsys.readouterr().err
  assert "encoder_total" in format_summary(AlbertConfig.from_dict({"vocab_size": 10,
                                                                   "hidden_size": 64,
                                                                   "num_attention_heads": 4,
                                                                   "intermediate_size": 8}))
