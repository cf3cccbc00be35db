"""Kubernetes: render one experiment into objects (pure) and create, watch and delete them."""
