"""Serves exported models on TF Serving's REST API, where TF Serving itself is not installed.

    python serve.py --model_name=sst2 --model_base_path=models/sst2 --rest_api_port=8501
    python serve.py --model_config_file=models.config --rest_api_port=8501
    curl -d '{"instances": ["a gripping film"]}' localhost:8501/v1/models/sst2:predict

A model's base path holds versions as TF Serving lays them out (`<base>/<version>/saved_model.pb`,
what `--export_version` writes); the highest is served, or what the model config file's
`model_version_policy` asks. TF Serving's own flags and REST semantics, so a command line and a
client carry over between the two: model status (`GET /v1/models/NAME`, `.../versions/N`),
metadata (`.../metadata`: the signatures), predict (`POST /v1/models/NAME[/versions/N |
/labels/L]:predict`, rows or columns, `signature_name`), answers as `predictions` / `outputs`
and errors as `{"error": ...}`: 400 with the signature's own words for a bad request, 404 for
an unknown model, version or signature, 413 for a body over --max_request_bytes. The format
is export/rest_json.py's.

Built on kserve's model server (uvicorn + FastAPI): its model registry, data plane, metrics
(`/metrics`) and its V2 (Open Inference Protocol) REST endpoints come with it. The TensorFlow
calls run in a thread pool (--rest_api_num_threads), so concurrent requests overlap. SIGTERM or
Ctrl-C stops taking connections, finishes the requests in flight (up to
--shutdown_grace_seconds) and exits 0.
"""

import argparse
import logging
import sys

from albert_tf.cli import quiet

logger = logging.getLogger("albert_tf.serve")

MAX_REQUEST_BYTES = 32 << 20


def _parse(argv):
  p = argparse.ArgumentParser(
      prog="serve.py", description=__doc__.splitlines()[0], allow_abbrev=False,
      epilog="TF Serving's gRPC API (--port) is not served: use the REST API.")
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
  p.add_argument("--port", type=int, default=None,
                 help="TF Serving's gRPC port: accepted so a command line carries over; no "
                      "gRPC API is served")
  args = p.parse_args(argv)
  if bool(args.model_base_path) == bool(args.model_config_file):
    p.error("give --model_base_path (one model, named by --model_name) or --model_config_file")
  if not 0 <= args.rest_api_port < 65536:
    p.error(f"--rest_api_port={args.rest_api_port} is not a port")
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
  if args.port is not None:
    logger.warning("--port=%d: TF Serving's gRPC API is not served here; clients use the REST "
                   "API on --rest_api_port=%d", args.port, args.rest_api_port)
  from albert_tf.cli.model_server import ModelServer, load_models  # pylint: disable=g-import-not-at-top
  try:
    models = load_models(model_specs(args))
  except (OSError, ValueError) as e:
    logger.error("%s", e)
    return 1
  server = ModelServer(models, port=args.rest_api_port, threads=args.rest_api_num_threads,
                       max_request_bytes=args.max_request_bytes,
                       grace_seconds=args.shutdown_grace_seconds)
  return server.run()


if __name__ == "__main__":
  sys.exit(main())
