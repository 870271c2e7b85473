"""The command-line layer: each tool is `python -m albert_tf.cli.<tool>` (quickstart, convert,
inspect, summary, train_spm, saved_model_cli), an argparse `main(argv=None)` that returns the
exit status, calls `quiet.install(argv)` before anything loads TensorFlow, and hands the work
to one function of the library. `runs` holds what each top-level training script does."""
