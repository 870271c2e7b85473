"""Data, from files to tf.data: the fine-tuning readers (`classification/`, `squad` and its
`squad_predictions`, `race`, `ner`), what they share (`reading`: rows, JSON lines, DataError;
`tfrecords`: records written whole; `feature_cache`), and the pretraining data (`pretraining/`)."""
