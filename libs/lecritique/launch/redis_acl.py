"""Redis ACL users that keep the API's records away from experiment processes.

Experiment processes (replay, weight announcements, metrics) only ever touch keys named
``lecritique:<experiment id>:...``, and the API issues ids that start with ``exp-``; the API keeps
its records under ``lecritique:api:``. So experiments connect as :data:`EXPERIMENTS_USER`, which
sees ``lecritique:exp-*`` only, and the API as :data:`API_USER`, which sees everything. The
default (unauthenticated) user may only PING, which is what health probes need.

The Helm chart writes the same rules into the release's Redis (``helm/lecritique/templates/redis``);
``lecritique api serve --dev`` starts its embedded Redis with them in its configuration
(:func:`dev_acl`), and :func:`create_users` sets them on a running server. The embedded Redis of
``lecritique run`` has one user, ``default`` with a password (:func:`run_acl`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

API_USER = "api"
EXPERIMENTS_USER = "experiments"
EXPERIMENT_KEYS = "lecritique:exp-*"
"""Key pattern of experiment data (ids are ``exp-`` and 10 hex digits)."""
COMMANDS = ["+@all", "-@dangerous"]
"""Commands of both users: everything but administration (CONFIG, ACL, KEYS, FLUSHALL, DEBUG, ...)."""


@dataclass(frozen=True)
class RedisUser:
    """An ACL user of an embedded server, in its configuration from the start."""

    name: str
    """The user name (``default``: who a connection is before it authenticates)."""
    password: str | None
    """None: no password (``nopass``); the configuration holds only its SHA-256."""
    rules: tuple[str, ...]
    """ACL rules after the password: key patterns, channels, commands."""

    def directive(self) -> str:
        """The ``user`` line of redis.conf."""
        secret = (
            "nopass" if self.password is None else "#" + hashlib.sha256(self.password.encode()).hexdigest()
        )
        return " ".join(["user", self.name, "reset", "on", secret, *self.rules])


def user_url(url: str, user: str, password: str) -> str:
    """``redis://host:port/db`` as ``user`` with ``password`` (URL-safe, as :func:`secrets.token_hex` makes)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{user}:{password}@{rest.rpartition('@')[2]}"


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


def dev_acl(api_password: str, experiments_password: str) -> list[str]:
    """Both users and the PING-only default user, as an embedded server's configuration lines."""
    users = (
        RedisUser(API_USER, api_password, tuple(rules(API_USER))),
        RedisUser(EXPERIMENTS_USER, experiments_password, tuple(rules(EXPERIMENTS_USER))),
        RedisUser("default", None, tuple(rule for rule in rules("default") if rule != "nopass")),
    )
    return [user.directive() for user in users]


def run_acl(password: str) -> list[str]:
    """One experiment's own embedded server (``lecritique run``): the default user, with a password."""
    return [RedisUser("default", password, ("~*", "&*", "+@all")).directive()]
