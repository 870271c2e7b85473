"""The tasks, one file each: pretraining, classification (GLUE, CLUE, CSV), SQuAD, RACE, NER,
and what fine-tuning tasks share (`finetuning.py`) and distillation. A task describes its job
(model, inputs, loss, metrics, starting weights, evaluation, prediction, what it exports) for
the training loop (`albert_tf/training/`), which knows no task; `albert_tf/cli/runs.py` puts
each script's task on a `Run` and exports."""
