"""Parameter counts by part and training FLOPs per token of a config, for choosing one.

    print(format_summary(AlbertConfig.from_json_file("configs/albert_base_v2.json")))

Counts are computed from the config (no model is built, so xxlarge is instant) and agree
exactly with the built model's (tests check both). On the command line:
`python -m albert_tf.cli.summary` (albert_tf/cli/summary.py).
"""


def _dense(n_in, n_out):
  return n_in * n_out + n_out


def parameter_counts(config):
  """Trainable parameters by part: embeddings, projection, encoder, pooler, heads."""
  c = config
  E, H, I, V = c.embedding_size, c.hidden_size, c.intermediate_size, c.vocab_size
  K, L = c.inner_group_num, c.num_hidden_layers
  groups_used = len({c.layer_group(i) for i in range(L)})
  attention = 4 * _dense(H, H) + 2 * H  # q, k, v, output dense + LayerNorm
  ffn = _dense(H, I) + _dense(I, H) + 2 * H  # intermediate, output + LayerNorm_1
  attention_copies = (groups_used if c.shares_attention else L) * K
  ffn_copies = (groups_used if c.shares_ffn else L) * K
  counts = {
      "embeddings": (V + c.max_position_embeddings + c.type_vocab_size) * E + 2 * E,
      "embedding_projection": _dense(E, H) if E != H else 0,
      "encoder_attention": attention * attention_copies,
      "encoder_ffn": ffn * ffn_copies,
      "pooler": _dense(H, H),
      "mlm_head": _dense(H, E) + 2 * E + V,  # decoder tied to word_embeddings
      "sop_head": 2 * H + 2,
  }
  if c.is_brightmart:
    # word_embeddings [V, E] and word_embeddings_2 [E, H] (no bias); position/type tables and
    # both LayerNorms H wide; the MLM transform is H -> H, its decoder tied to both factors.
    counts.update(
        embeddings=V * E + (c.max_position_embeddings + c.type_vocab_size) * H + 2 * H,
        embedding_projection=E * H,
        mlm_head=_dense(H, H) + 2 * H + V)
  counts["encoder_total"] = sum(counts[k] for k in ("embeddings", "embedding_projection",
                                                    "encoder_attention", "encoder_ffn",
                                                    "pooler"))
  counts["pretrainer_total"] = counts["encoder_total"] + counts["mlm_head"] + counts["sop_head"]
  return counts


def flops_per_token(config, seq_length=512, max_predictions_per_seq=20):
  """Approximate FLOPs per input token: (forward, training = forward + 2x for backward).

  Counts multiply-adds as 2 FLOPs in every matmul: the E->H projection, L * K block
  applications (sharing saves parameters, not compute), attention scores and mixing over
  `seq_length` keys, and the MLM head at `max_predictions_per_seq` positions per sequence.
  """
  c = config
  E, H, I, V = c.embedding_size, c.hidden_size, c.intermediate_size, c.vocab_size
  applications = c.num_hidden_layers * c.inner_group_num
  block = 2 * (4 * H * H + 2 * H * I) + 2 * 2 * seq_length * H
  forward = applications * block
  if E != H or c.is_brightmart:
    forward += 2 * E * H
  mlm_per_prediction = 2 * (H * E + E * V)
  if c.is_brightmart:
    mlm_per_prediction += 2 * H * H
  forward += mlm_per_prediction * max_predictions_per_seq / seq_length
  forward += 2 * (H * H + 2 * H) / seq_length  # pooler and SOP, once per sequence
  return forward, 3 * forward


def format_summary(config, seq_length=512, max_predictions_per_seq=20):
  """The parameter counts and FLOPs per token as a table to print."""
  counts = parameter_counts(config)
  forward, training = flops_per_token(config, seq_length, max_predictions_per_seq)
  c = config
  lines = [
      f"ALBERT config: L={c.num_hidden_layers} H={c.hidden_size} E={c.embedding_size} "
      f"I={c.intermediate_size} heads={c.num_attention_heads} groups={c.num_hidden_groups} "
      f"inner={c.inner_group_num} sharing={c.sharing} ln={c.ln_type} V={c.vocab_size} "
      f"layout={c.layout}",
      "",
      f"{'part':<24}{'parameters':>16}",
  ]
  for key in ("embeddings", "embedding_projection", "encoder_attention", "encoder_ffn",
              "pooler", "encoder_total", "mlm_head", "sop_head", "pretrainer_total"):
    if key in ("encoder_total", "pretrainer_total"):
      lines.append("-" * 40)
    lines.append(f"{key:<24}{counts[key]:>16,}")
  lines += [
      "",
      f"FLOPs per token at seq {seq_length}, {max_predictions_per_seq} predictions/seq:",
      f"  forward   {forward / 1e9:10.3f} GFLOPs",
      f"  training  {training / 1e9:10.3f} GFLOPs (forward + backward)",
  ]
  return "\n".join(lines)

