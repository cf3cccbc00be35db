"""Redis ACL users that keep the API's records away from experiment processes.

Experiment processes (replay, weight announcements, metrics) only ever touch keys named
``lecritique:<experiment id>:...``, and the API issues ids that start with ``exp-``; the API keeps
its records under ``lecritique:api:``. So experiments connect as :data:`EXPERIMENTS_USER`, which
sees ``lecritique:exp-*`` only, and the API as :data:`API_USER`, which sees everything. The
default (unauthenticated) user may only PING, which is what health probes need.

The Helm chart writes the same rules into the release's Redis (``helm/lecritique/templates/redis``);
for a local API, :func:`create_users` sets them on a running server.
"""

from __future__ import annotations

from typing import Any

API_USER = "api"
EXPERIMENTS_USER = "experiments"
EXPERIMENT_KEYS = "lecritique:exp-*"
"""Key pattern of experiment data (ids are ``exp-`` and 10 hex digits)."""
COMMANDS = ["+@all", "-@dangerous"]
"""Commands of both users: everything but administration (CONFIG, ACL, KEYS, FLUSHALL, DEBUG, ...)."""


def rules(user: str) -> list[str]:
    """ACL rules of ``user`` after its password (``on >PASSWORD`` comes first)."""
    if user == API_USER:
        return ["~*", "resetchannels", *COMMANDS]
    if user == EXPERIMENTS_USER:
        return [f"~{EXPERIMENT_KEYS}", "resetchannels", *COMMANDS]
    if user == "default":
        return ["nopass", "resetkeys", "resetchannels", "-@all", "+ping"]
    raise ValueError(f"no ACL rules for Redis user {user!r}")


def create_users(client: Any, api_password: str, experiments_password: str) -> None:
    """Create both users on a server ``client`` administers, then restrict the default user to PING."""
    client.execute_command("ACL", "SETUSER", API_USER, "reset", "on", f">{api_password}", *rules(API_USER))
    client.execute_command(
        "ACL",
        "SETUSER",
        EXPERIMENTS_USER,
        "reset",
        "on",
        f">{experiments_password}",
        *rules(EXPERIMENTS_USER),
    )
    client.execute_command("ACL", "SETUSER", "default", "on", *rules("default"))
