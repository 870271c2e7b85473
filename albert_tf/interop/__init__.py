"""Other ecosystems' weights in and out: the original's TF1 checkpoints (Google's and
brightmart's layouts) and our native ones (`checkpoints`), Hugging Face directories
(`huggingface`), and conversion between them (`convert`); SavedModels loaded without
leaving their graphs in TensorFlow's gradient registry (`saved_models.load_saved_model`)."""
