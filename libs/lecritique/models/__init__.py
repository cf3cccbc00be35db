"""Models: policies (any HF causal LM), critics (backbone + scalar head), tiny CPU models."""
