"""gRPC plumbing shared by every service: array/trajectory codecs, server scaffolding
(health, reflection, message limits, metrics), and a replica-aware client pool."""
