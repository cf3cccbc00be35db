"""What every service process is told at start-up (command-line options of ``lecritique serve``).

The same options are set by ``lecritique run`` for local processes and by the Kubernetes
launcher's container args, so service code never knows which mode it runs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lecritique.rpc.server import DEFAULT_MAX_MESSAGE_BYTES


@dataclass(frozen=True)
class ServiceRuntime:
    port: int
    """gRPC port to listen on (0: any free port)."""
    spec_path: Path
    """The experiment spec (YAML or JSON) this service serves."""
    experiment_id: str
    """Experiment id: the namespace of Redis keys and metrics labels."""
    weights_dir: Path
    """Root of the weight store (a local folder or a ReadWriteMany volume)."""
    redis_url: str | None = None
    """Redis URL for replay, versions and records (None: REDIS_URL or embedded)."""
    metrics_port: int | None = None
    """Prometheus /metrics port (None: no metrics endpoint)."""
    host: str = "0.0.0.0"
    """Interface to bind."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """gRPC message size limit, both directions."""
    state_dir: Path | None = None
    """Service-local state (checkpoints, records); None: under weights_dir."""
    port_file: Path | None = None
    """Where to announce the bound ports as JSON once serving (local launcher)."""

    def server_options(self) -> dict[str, object]:
        """Keyword arguments of :func:`lecritique.rpc.server.start_server` from these options."""
        return {
            "port": self.port,
            "host": self.host,
            "metrics_port": self.metrics_port,
            "max_message_bytes": self.max_message_bytes,
            "port_file": self.port_file,
            "experiment": self.experiment_id,
        }
