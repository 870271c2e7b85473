"""`saved_model_cli` with tensorflow-text's ops registered, for the raw-text SavedModels.

    python -m albert_tf.cli.saved_model_cli run --dir exported/base/fill_mask \
        --tag_set serve --signature_def serving_default --input_exprs 'text=["a [MASK] day"]'

TensorFlow's own `saved_model_cli` cannot run the preprocessing, fill-mask or classifier
serving models: their in-graph tokenizer uses tensorflow-text ops, which a process must import
before loading. This entry point imports them and hands over to TensorFlow's tool unchanged.
"""

import tensorflow_text  # noqa: F401  pylint: disable=unused-import
from tensorflow.python.tools import saved_model_cli

if __name__ == "__main__":
  saved_model_cli.main()
