"""Modeling ladder: layers (embedding, attention, transformer, heads) -> encoder -> pretrainer."""

from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer
