"""The command-line layer: tools run as `python -m albert_tf.cli.<tool>`, and what every
entry point does before TensorFlow loads (`quiet`)."""
