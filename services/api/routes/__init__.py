"""The REST API's routers: ``/v1/experiments`` and the unauthenticated health endpoints."""
