"""Sentence(-pair) classification data: GLUE/CLUE/CSV rows -> examples -> features -> TFRecords.

  processor = registry.get_processor("sst-2")
  examples = processor.get_train_examples("glue/SST-2")   # or the GLUE root that holds SST-2/
  tok = FullTokenizer(spm_model_file="spiece.model")
  feats = features.convert_examples_to_features(examples, processor.get_labels(), 128, tok)
  features.write_features_tfrecord(feats, "train.tf_record")
  dataset = features.classification_dataset("train.tf_record", 128, 32, is_training=True,
                                            regression=processor.is_regression)

One idea a module:
  processor.py    InputExample, Split and DataProcessor, which reads a GLUE task's TSV files
  glue.py         the GLUE processors (the original's files, columns, labels and guids)
  chinese.py      the CLUE tasks, LCQMC and ChnSentiCorp
  csv_task.py     the `csv` task: users' own CSV/TSV files, columns by header name
  registry.py     PROCESSORS and get_processor: task names -> processors
  features.py     examples -> features -> TFRecords -> tf.data batches
  submissions.py  the --do_predict files: GLUE's <TASK>.tsv, CLUE's <task>_predict.json
The files are read by data/reading.py (shared with NER), whose `DataError` names the file and
line of bad content. See SPEC.md, "Fine-tuning (original defaults)".
"""
