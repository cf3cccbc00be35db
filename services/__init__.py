"""lecritique's services: thin gRPC/HTTP adapters around the ``lecritique`` library.

One sub-package per service (server, entry point, Dockerfile). No service imports another.
"""
