"""Redis ACL users that keep the API's records, and each experiment's keys, away from other experiments.

Experiment processes (replay, weight announcements, metrics) only ever touch keys named
``lecritique:<experiment id>:...``, and the API issues ids that start with ``exp-``; the API keeps
its records under ``lecritique:api:``. The API connects as :data:`API_USER`, which sees everything
and may create and delete users. Each experiment the API launches connects as a user of its own,
named after the experiment (:class:`ExperimentUsers`, :func:`experiment_rules`): it reads and
writes ``lecritique:<its id>:*`` only, and it may not list keys (``SCAN``, ``KEYS``,
``RANDOMKEY``, ``DBSIZE``: Redis applies key patterns to the keys a command names, not to the keys
a listing returns), read through ``SORT``'s patterns, grow a value by an offset (``SETRANGE``,
``SETBIT``, ``BITFIELD``, ``APPEND``), flush the script cache, use pub/sub, or administer the
server. Its password is an HMAC of its id under a key kept in the API's own records, so the API
re-creates the user after a Redis restart without storing any password. :data:`EXPERIMENTS_USER`,
which sees every ``lecritique:exp-*`` key, is what runs get where the API cannot create users. The
default (unauthenticated) user may only PING, which is what health probes need.

The server keeps the API's records from eviction: ``maxmemory`` with ``noeviction``
(:func:`memory_limits`); a full server refuses writes (the API answers 503), it never drops a record.

The Helm chart writes the same rules into the release's Redis (``helm/lecritique/templates/redis``);
``lecritique api serve --dev`` starts its embedded Redis with them in its configuration
(:func:`dev_acl`), and :func:`create_users` sets them on a running server. The embedded Redis of
``lecritique run`` has one user, ``default`` with a password (:func:`run_acl`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import Any

import redis

from lecritique.launch.base import Submission

logger = logging.getLogger(__name__)

API_USER = "api"
EXPERIMENTS_USER = "experiments"
EXPERIMENT_KEYS = "lecritique:exp-*"
"""Key pattern of experiment data (ids are ``exp-`` and 10 hex digits)."""
COMMANDS = ["+@all", "-@dangerous"]
"""Commands of both users: everything but administration (CONFIG, ACL, KEYS, FLUSHALL, DEBUG, ...)."""
API_USER_ADMINISTERS = ["+acl|setuser", "+acl|deluser"]
"""What the API's user may administer: the experiments' own users (:class:`ExperimentUsers`)."""
EXPERIMENT_COMMANDS = [
    "+@all",
    "-@dangerous",
    "-@admin",
    "-@pubsub",
    "-scan",
    "-randomkey",
    "-dbsize",
    "-sort",
    "-setrange",
    "-setbit",
    "-bitfield",
    "-append",
    "-move",
    "-script",
    "+script|load",
    "+script|exists",
]
"""Commands of an experiment's own user (see the module docstring); valid rules on Redis 6.2 and 7."""
USERS_KEY = "lecritique:api:experiment-users-key"
"""The HMAC key of the experiments' passwords, in the API's records (no experiment can read it)."""
DEV_MAXMEMORY = "8gb"
"""``maxmemory`` of ``lecritique api serve --dev``'s embedded Redis (the chart's is ``redis.maxmemory``)."""
MAXMEMORY_POLICY = "noeviction"
"""The only policy that never evicts a record: a full server refuses writes instead."""
PROTO_MAX_BULK_LEN = "64mb"
"""Largest single argument a client may send (Redis's default is 512 MiB); a replay payload is at
most 16 MiB (``ReplayConfig.max_payload_bytes``)."""


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
        return ["~*", "resetchannels", *COMMANDS, *API_USER_ADMINISTERS]
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


def experiment_rules(experiment_id: str) -> list[str]:
    """ACL rules of an experiment's own user after its password: its keys, no channels, its commands."""
    if not experiment_id.startswith("exp-") or not experiment_id.replace("-", "").isalnum():
        raise ValueError(f"not an experiment id the API issues: {experiment_id!r}")
    return ["resetkeys", f"~lecritique:{experiment_id}:*", "resetchannels", "-@all", *EXPERIMENT_COMMANDS]


def memory_limits(maxmemory: str) -> list[str]:
    """Configuration lines bounding the server's memory (``maxmemory`` as redis.conf writes it:
    ``2gb``) without evicting anything, and the size of one argument."""
    return [
        f"maxmemory {maxmemory}",
        f"maxmemory-policy {MAXMEMORY_POLICY}",
        f"proto-max-bulk-len {PROTO_MAX_BULK_LEN}",
    ]


class ExperimentUsers:
    """Creates, re-creates and deletes each experiment's own Redis user through the API's connection.

    ``admin``: a client whose user may ``ACL SETUSER`` / ``ACL DELUSER`` and read ``lecritique:api:*``
    (the API's); ``runs_url``: the Redis URL experiments connect to (host, port, database; any user
    in it is replaced by the experiment's own).
    """

    def __init__(self, admin: Any, runs_url: str) -> None:
        self.admin = admin
        self.runs_url = runs_url
        self._key: bytes | None = None
        self._warned = False

    def _hmac_key(self) -> bytes:
        if self._key is None:
            self.admin.set(USERS_KEY, secrets.token_hex(32), nx=True)
            stored = self.admin.get(USERS_KEY)
            if stored is None:
                raise RuntimeError(f"{USERS_KEY} could not be read back")
            self._key = stored if isinstance(stored, bytes) else str(stored).encode()
        return self._key

    def password(self, experiment_id: str) -> str:
        """The experiment user's password (the same after an API or Redis restart)."""
        return hmac.new(self._hmac_key(), experiment_id.encode(), hashlib.sha256).hexdigest()

    def url(self, experiment_id: str) -> str:
        """The Redis URL an experiment's processes connect with."""
        return user_url(self.runs_url, experiment_id, self.password(experiment_id))

    def ensure(self, experiment_id: str) -> str:
        """Create (or reset to its rules) the experiment's user; returns its URL."""
        self.admin.execute_command(
            "ACL",
            "SETUSER",
            experiment_id,
            "reset",
            "on",
            f">{self.password(experiment_id)}",
            *experiment_rules(experiment_id),
        )
        return self.url(experiment_id)

    def remove(self, experiment_id: str) -> None:
        """Delete the experiment's user (its open connections are closed by Redis)."""
        experiment_rules(experiment_id)  # refuses anything but an experiment id
        self.admin.execute_command("ACL", "DELUSER", experiment_id)

    def grant(self, submission: Submission) -> Submission:
        """The submission with the URL of its experiment's own user, created now; unchanged where the
        admin connection may not create users (the launcher's shared URL; a warning, once)."""
        try:
            url = self.ensure(submission.experiment_id)
        except redis.ResponseError as error:  # NOPERM, or a server without ACLs
            if not self._warned:
                logger.warning(
                    "the API's Redis user cannot create experiment users (%s): runs share the launcher's "
                    "Redis user and can reach each other's keys",
                    error,
                )
                self._warned = True
            return submission
        return dataclasses.replace(submission, redis_url=url)

    def revoke(self, experiment_id: str) -> None:
        """Delete the experiment's user, logging (not raising) a Redis error: the run has ended anyway."""
        try:
            self.remove(experiment_id)
        except redis.RedisError as error:
            logger.warning("cannot delete the Redis user of experiment %s: %s", experiment_id, error)

    def available(self) -> bool:
        """Whether the admin connection may create users (a test user, created and deleted)."""
        probe = f"exp-probe{secrets.token_hex(4)}"
        try:
            self.ensure(probe)
            self.remove(probe)
        except Exception:  # NOPERM, or a server without ACLs: runs get the shared URL instead
            return False
        return True
