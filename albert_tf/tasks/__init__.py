"""The jobs on the training core, one file each: pretraining, classification, SQuAD, RACE, and
what fine-tuning jobs share (finetuning.py) and distillation. A job knows its data, head and
metric; the core knows no task; the scripts at the top level parse flags and call one `run_*`."""
