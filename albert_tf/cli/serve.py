"""Serves exported models on TF Serving's REST and gRPC APIs, where TF Serving is not installed.

    python serve.py --model_name=sst2 --model_base_path=models/sst2 --rest_api_port=8501
    python serve.py --model_config_file=models.config --port=8500 --rest_api_port=8501
    curl -d '{"instances": ["a gripping film"]}' localhost:8501/v1/models/sst2:predict

A model's base path holds versions as TF Serving lays them out (`<base>/<version>/saved_model.pb`,
what `--export_version` writes); the highest is served, or what the model config file's
`model_version_policy` asks. TF Serving's own flags and semantics, so a command line and a
client carry over between the two:
- REST (--rest_api_port): model status (`GET /v1/models/NAME`, `.../versions/N`,
  `.../labels/L`), metadata (`.../metadata`: the signatures), predict (`POST
  /v1/models/NAME[/versions/N | /labels/L]:predict`, rows or columns, `signature_name`); errors
  as `{"error": ...}`: 400 with the signature's own words, 404 for an unknown model, version or
  signature, 413 for a body over --max_request_bytes, 503 while stopping. Format:
  export/rest_json.py.
- gRPC (--port, 8500; 0 turns it off): PredictionService (Predict, GetModelMetadata) and
  ModelService (GetModelStatus, HandleReloadConfigRequest), tensorflow-serving-api's clients.
- Live versions: every --file_system_poll_wait_seconds the base paths are read again; a new
  version is loaded, its warm-up requests (assets.extra/tf_serving_warmup_requests) replayed,
  then served, and versions the policy drops are unloaded once their requests finish.
  --model_config_file_poll_wait_seconds re-reads the config file.
- --enable_batching (--batching_parameters_file): concurrent requests to one signature share a
  call, each answer the one it would get alone. Ours, not TF Serving's:
  --group_batches_by_length (true by default) runs a batch of raw texts as calls of texts of
  like length when the signature's measured call times say that costs less (serving/grouping.py).

SIGTERM or Ctrl-C stops taking requests on both APIs, finishes those in flight (up to
--shutdown_grace_seconds) and exits 0. Built on kserve's HTTP server (serving/rest.py); the
core that owns models and versions is serving/core.py.
"""

import argparse
import dataclasses
import logging
import sys

from albert_tf.cli import quiet

logger = logging.getLogger("albert_tf.serve")

MAX_REQUEST_BYTES = 32 << 20


def _parse(argv):
  p = argparse.ArgumentParser(
      prog="serve.py", description=__doc__.splitlines()[0], allow_abbrev=False)
  p.add_argument("--model_name", default="default",
                 help="Name of the model (with --model_base_path), as TF Serving's")
  p.add_argument("--model_base_path", help="Folder of the model's versions (<version>/...)")
  p.add_argument("--model_config_file",
                 help="TF Serving's ModelServerConfig (text format) listing several models")
  p.add_argument("--rest_api_port", type=int, default=8501, help="HTTP port (TF Serving's)")
  p.add_argument("--rest_api_num_threads", type=int, default=None,
                 help="Threads running TensorFlow calls (default: CPUs + 4, at most 32)")
  p.add_argument("--max_request_bytes", type=int, default=MAX_REQUEST_BYTES,
                 help="Larger request bodies are refused with 413")
  p.add_argument("--shutdown_grace_seconds", type=int, default=30,
                 help="On SIGTERM, how long requests in flight may take to finish")
  p.add_argument("--port", type=int, default=8500,
                 help="gRPC port (TF Serving's); 0: no gRPC API")
  p.add_argument("--file_system_poll_wait_seconds", type=int, default=1,
                 help="How often the base paths are read for new versions; 0: only at start")
  p.add_argument("--model_config_file_poll_wait_seconds", type=int, default=0,
                 help="How often --model_config_file is read again; 0: never")
  p.add_argument("--enable_batching", action="store_true",
                 help="Merge concurrent requests to one signature into one call")
  p.add_argument("--batching_parameters_file",
                 help="TF Serving's BatchingParameters (text format) for --enable_batching")
  p.add_argument("--group_batches_by_length", choices=("true", "false"), default=None,
                 help="Ours, not TF Serving's (default true): with --enable_batching, run a "
                 "batch of raw texts as calls grouped by length when that costs less")
  args = p.parse_args(argv)
  if bool(args.model_base_path) == bool(args.model_config_file):
    p.error("give --model_base_path (one model, named by --model_name) or --model_config_file")
  for flag in ("rest_api_port", "port"):
    if not 0 <= getattr(args, flag) < 65536:
      p.error(f"--{flag}={getattr(args, flag)} is not a port")
  if args.port and args.port == args.rest_api_port:
    p.error(f"--port and --rest_api_port are both {args.port}: give each API its own port")
  if args.max_request_bytes < 1:
    p.error(f"--max_request_bytes={args.max_request_bytes}: must be at least 1 (the largest "
            "request body taken, in bytes)")
  if args.rest_api_num_threads is not None and args.rest_api_num_threads < 1:
    p.error(f"--rest_api_num_threads={args.rest_api_num_threads}: must be at least 1 (or left "
            "out: CPUs + 4, at most 32)")
  if args.shutdown_grace_seconds < 0:
    p.error(f"--shutdown_grace_seconds={args.shutdown_grace_seconds} is negative")
  if args.model_base_path:
    from albert_tf.export import layout  # pylint: disable=g-import-not-at-top
    problem = layout.model_name_problem(args.model_name)
    if problem:
      p.error(f"--model_name={args.model_name!r}: {problem}")
  for flag in ("file_system_poll_wait_seconds", "model_config_file_poll_wait_seconds"):
    if getattr(args, flag) < 0:
      p.error(f"--{flag}={getattr(args, flag)} is negative; 0 turns it off")
  if args.model_config_file_poll_wait_seconds and not args.model_config_file:
    p.error("--model_config_file_poll_wait_seconds needs --model_config_file")
  if args.batching_parameters_file and not args.enable_batching:
    p.error("--batching_parameters_file needs --enable_batching")
  if args.group_batches_by_length and not args.enable_batching:
    p.error("--group_batches_by_length needs --enable_batching")
  return args


def model_specs(args):
  """The ModelSpecs the flags ask for."""
  from albert_tf.export import layout  # pylint: disable=g-import-not-at-top
  if args.model_config_file:
    return layout.read_model_config(args.model_config_file)
  return [layout.ModelSpec(args.model_name, args.model_base_path)]


def main(argv=None):
  """Command-line entry; returns the exit status."""
  argv = sys.argv[1:] if argv is None else list(argv)
  quiet.install(argv)
  args = _parse(argv)
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  logger.setLevel(logging.INFO)
  from albert_tf.serving import core, rest  # pylint: disable=g-import-not-at-top
  try:
    batching = None
    if args.enable_batching:
      from albert_tf.serving import batching as batching_lib  # pylint: disable=g-import-not-at-top
      batching = (batching_lib.read_batching_parameters(args.batching_parameters_file)
                  if args.batching_parameters_file else batching_lib.BatchingParameters())
      batching = dataclasses.replace(
          batching, group_by_length=args.group_batches_by_length != "false")
    server_core = core.ServerCore(
        model_specs(args), poll_wait_seconds=args.file_system_poll_wait_seconds,
        batching=batching, config_file=args.model_config_file,
        config_poll_wait_seconds=args.model_config_file_poll_wait_seconds)
    server_core.start()
  except (OSError, ValueError) as e:
    logger.error("%s", e)
    return 1
  server = rest.ModelServer(server_core, rest_port=args.rest_api_port, grpc_port=args.port,
                            threads=args.rest_api_num_threads,
                            max_request_bytes=args.max_request_bytes,
                            grace_seconds=args.shutdown_grace_seconds)
  try:
    return server.run()
  except OSError as e:  # a port in use: named with its flag
    logger.error("%s", e)
    server_core.stop()
    return 1


if __name__ == "__main__":
  sys.exit(main())
