"""lecritique's services: thin gRPC/HTTP adapters around the ``lecritique`` library.

One sub-package per service (server, entry point). No service imports another. `Dockerfile` here
builds the one image of the five gRPC services and the orchestrator; `api/Dockerfile` the API's.
"""
