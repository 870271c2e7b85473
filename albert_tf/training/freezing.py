"""`--freeze`: the parts of an ALBERT model left untrained, by the original's names."""

from albert_tf.interop.tf1_names import tf1_variable_map


def freeze_parts(model, parts):
  """The variables of the named parts: `embeddings` (word, position and token-type embeddings,
  their LayerNorm and the E -> H projection), `group_<g>` (one transformer group of the
  encoder), `pooler`. Unknown names are an error listing the model's parts."""
  parts = [p.strip() for p in (parts or ()) if p.strip()]
  if not parts:
    return set()
  found = {}
  for name, variable in tf1_variable_map(model).items():
    part = _part_of(name)
    if part:
      found.setdefault(part, []).append(variable)
  unknown = [p for p in parts if p not in found]
  if unknown:
    raise ValueError(f"--freeze={','.join(unknown)}: this model's parts are "
                     f"{', '.join(sorted(found))} (with full sharing every layer is group_0)")
  return {v.ref() for p in parts for v in found[p]}


def _part_of(tf1_name):
  if tf1_name.startswith("bert/embeddings/") or "embedding_hidden_mapping_in" in tf1_name:
    return "embeddings"
  if tf1_name.startswith("bert/encoder/transformer/"):
    return tf1_name.split("/")[3]
  if tf1_name.startswith("bert/pooler/"):
    return "pooler"
  return None
