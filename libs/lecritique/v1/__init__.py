"""Generated gRPC/protobuf stubs for ``protos/lecritique/v1`` (``make proto``; do not edit)."""
