"""``python -m services.api [--host H] [--port P] [--log-level L]``: serve the API configured by ``LECRITIQUE_API_*``."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m services.api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="Interface to bind.")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port.")
    parser.add_argument("--log-level", default="info", help="uvicorn log level.")
    args = parser.parse_args(argv)
    uvicorn.run(
        "services.api.app:create_app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
    )


if __name__ == "__main__":
    main()
