"""The tf.distribute strategy from the original's flags (`--use_tpu`, `--tpu_name`, ...)."""

import dataclasses
import logging

import tensorflow as tf

from albert_tf.jobs.option_fields import option

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
logger = logging.getLogger(__name__)


@dataclasses.dataclass
class StrategyOptions:
  """The training scripts' flags of where a job runs."""
  distribution_strategy: str = option("one_device", "tf.distribute.", choices=STRATEGIES)
  use_tpu: bool = option(False, "Train on a TPU (same as --distribution_strategy=tpu).")
  tpu_name: str = option(None, "Cloud TPU name or grpc:// address.")
  tpu_zone: str = option(None, "GCE zone of the TPU.")
  gcp_project: str = option(None, "GCP project of the TPU.")
  master: str = option(None, "TensorFlow master (TPU address when no --tpu_name).")
  num_tpu_cores: int = option(8, "TPU cores (informational: the TPU system decides).")

  def create_strategy(self):
    """The strategy these flags name (--use_tpu is --distribution_strategy=tpu)."""
    return create_strategy("tpu" if self.use_tpu else self.distribution_strategy,
                           self.tpu_name, self.tpu_zone, self.gcp_project, self.master)


def create_strategy(name="one_device", tpu_name=None, tpu_zone=None, gcp_project=None,
                    master=None):
  """A strategy by name; `tpu` resolves the TPU from tpu_name/master, zone and project."""
  if name not in STRATEGIES:
    raise ValueError(f"--distribution_strategy must be one of {list(STRATEGIES)}, got {name!r}")
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu_name or master, zone=tpu_zone, project=gcp_project)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
  devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
  return tf.distribute.MirroredStrategy(devices)

