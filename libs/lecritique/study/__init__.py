"""``lecritique study``: variants x seeds of one experiment, compared, against the Monte-Carlo ceiling."""
