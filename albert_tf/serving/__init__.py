"""Serving exported models as TF Serving does (serve.py): a core that owns models, versions
and their states, with each protocol (TF Serving's REST and gRPC APIs) a thin adapter over it,
and server-side batching between them. Config and batching parameters are TF Serving's protos."""
