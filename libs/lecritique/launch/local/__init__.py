"""Local processes: one experiment's services on loopback, started, supervised and stopped."""
