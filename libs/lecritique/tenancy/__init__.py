"""Tenants of the REST API: bearer-token hashes and the server-side policy of what each may launch."""
