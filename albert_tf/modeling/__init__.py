"""Modeling ladder: layers (embedding, attention, transformer, heads) -> encoder (`encoder`) ->
pretrainer and task models; `summary` counts a config's parameters and FLOPs without building
it. Nothing is imported here, so `albert_tf.modeling.summary` does not load TensorFlow."""
