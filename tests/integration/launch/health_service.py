"""A minimal supervised service: a gRPC server with a health check, announcing its port.

Usage: python health_service.py --port N --port-file PATH
"""

import argparse
import threading
from pathlib import Path

from lecritique.rpc.server import start_server

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--port-file", type=Path, required=True)
args = parser.parse_args()
start_server(
    service="health",
    add_servicers=lambda server: None,
    service_names=[],
    port=args.port,
    host="127.0.0.1",
    port_file=args.port_file,
)
threading.Event().wait()
