"""Runs a few pretraining steps in its own process and saves the final weights (test support).

Used by test_pretraining.py for the strategies that need a fresh TensorFlow runtime: two
logical CPUs for MirroredStrategy, TF_CONFIG for MultiWorkerMirroredStrategy.

  python tests/support_pretrain.py STRATEGY CPUS CONFIG DATA INIT OUT_DIR STEPS BATCH ACCUM
"""

import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf.interop.tf1_names import tf1_variable_map  # noqa: E402
from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask  # noqa: E402
from albert_tf.training.distribute import create_strategy  # noqa: E402
from albert_tf.training.run import Run  # noqa: E402


def split_cpu(num_devices):
  """Splits the CPU into `num_devices` logical devices (for mirrored training on a CPU)."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])


def main(argv):
  strategy_name, cpus, config, data, init, out_dir, steps, batch, accum = argv
  logging.basicConfig(level=logging.INFO)
  if int(cpus) > 1:
    split_cpu(int(cpus))
  strategy = create_strategy(strategy_name)
  options = PretrainingOptions(
      albert_config_file=config, input_file=data, output_dir=out_dir, init_checkpoint=init,
      max_seq_length=32, max_predictions_per_seq=5, do_train=True,
      train_batch_size=int(batch), num_train_steps=int(steps), num_warmup_steps=0,
      learning_rate=0.01, save_checkpoints_steps=int(steps), iterations_per_loop=int(steps),
      gradient_accumulation_steps=int(accum), seed=7, log_every_seconds=0)
  tf.io.gfile.makedirs(out_dir)
  trainer = Run(PretrainingTask(options, strategy), strategy)
  trainer.loop.restore_or_initialize()
  trainer.train()
  weights = {name: v.numpy() for name, v in tf1_variable_map(trainer.loop.model).items()}
  np.savez(os.path.join(trainer.loop.write_dir, "final_weights.npz"), **weights)
  print(f"replicas={strategy.num_replicas_in_sync} step={trainer.loop.global_step}")


if __name__ == "__main__":
  main(sys.argv[1:])
