"""A separate OS process that pushes to or samples from one replay buffer (concurrency tests).

Usage: ``python replay_worker.py CONFIG_JSON``. Waits on ``ready``/``go`` Redis lists so that all
workers start together, then writes what it saw to ``output`` as JSON.
"""

from __future__ import annotations

import json
import sys

from lecritique.redis_connection import redis_client
from lecritique.replay import ReplayBuffer


def main(config: dict) -> None:
    client = redis_client(config["url"])
    buffer = ReplayBuffer(
        client, config["experiment"], capacity=config["capacity"], max_reuse=config["max_reuse"]
    )
    client.rpush(config["ready_key"], config["name"])
    client.blpop([config["go_key"]], timeout=60)
    if config["role"] == "pusher":
        ids: list[str] = []
        for batch in range(config["batches"]):
            payloads = [f"{config['name']}-{batch}-{index}".encode() for index in range(config["batch_size"])]
            ids.extend(buffer.push(payloads, policy_version=batch))
        result: dict = {"pushed": ids}
    else:
        samples: list[tuple[str, int]] = []
        calls = 0
        while True:
            # Read the flag before sampling: an empty sample after the pushers finished means drained.
            pushers_done = not config["done_key"] or client.exists(config["done_key"])
            batch = buffer.sample(config["sample_size"])
            calls += 1
            samples.extend((entry.id, entry.times_used) for entry in batch)
            if not batch and pushers_done:
                break
        result = {"samples": samples, "calls": calls}
    with open(config["output"], "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
