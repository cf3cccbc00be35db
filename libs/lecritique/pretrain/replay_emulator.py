"""The replay's rules on a fixed stream of rows, without Redis: what ``lecritique critic sweep`` feeds
each setting, so an offline setting sees its rows as a run's asynchronous critic would
(:mod:`lecritique.replay.buffer` holds the rules themselves, in Lua)."""

from __future__ import annotations

import numpy as np


class ReplayEmulator:
    """The replay's rules on a fixed stream of rows, as an asynchronous critic meets them.

    Rows enter ``fresh`` at a time (a policy step's batch), oldest first out past ``capacity``; an
    update samples ``batch`` distinct entries uniformly (not by remaining uses) and an entry leaves
    once sampled ``max_reuse`` times (:mod:`lecritique.replay.buffer`). Rows are pushed only when
    the buffer cannot feed an update: the critic is never starved and never lets fresh rows pass
    unused, the data-bound regime of a critic that keeps up with the policy. When the stream is used
    up a new pass starts over the same rows (``passes`` counts them): beyond the first pass, rows
    are reused more than ``max_reuse`` times."""

    def __init__(
        self,
        rows: int,
        fresh: int,
        capacity: int,
        max_reuse: int,
        batch: int,
        rng: np.random.Generator,
        updates_per_push: float | None = None,
    ) -> None:
        if batch > min(capacity, rows):
            raise ValueError(
                f"batch_size: {batch} distinct rows per update, but the replay holds at most "
                f"{min(capacity, rows)} (capacity {capacity}, {rows} training rows)"
            )
        self.rows, self.fresh, self.capacity, self.max_reuse, self.batch = (
            rows,
            fresh,
            capacity,
            max_reuse,
            batch,
        )
        self.rng = rng
        self.order = rng.permutation(rows)
        self.cursor = 0
        self.passes = 1
        self.buffer: list[int] = []
        self.uses: dict[int, int] = {}
        self.most_uses = 0
        self.updates_per_push = updates_per_push
        self.pushes = 0
        self.updates = 0

    def _push(self) -> None:
        if self.cursor >= self.rows:
            self.order, self.cursor, self.passes = self.rng.permutation(self.rows), 0, self.passes + 1
        chunk = [int(i) for i in self.order[self.cursor : self.cursor + self.fresh]]
        self.cursor += len(chunk)
        self.pushes += 1
        self.buffer.extend(chunk)
        for row in chunk:
            self.uses.setdefault(row, 0)
        if len(self.buffer) > self.capacity:
            self.buffer = self.buffer[len(self.buffer) - self.capacity :]

    def sample(self) -> list[int]:
        """The rows of the next update."""
        self.updates += 1
        while self.updates_per_push is not None and self.pushes < self.updates / self.updates_per_push:
            self._push()
        while len(set(self.buffer)) < self.batch:
            self._push()
        positions = self.rng.choice(len(self.buffer), size=self.batch, replace=False)
        taken = [self.buffer[p] for p in positions]
        if len(set(taken)) < self.batch:  # a row pushed again in a later pass may sit twice
            distinct = list(dict.fromkeys(self.buffer))
            taken = [distinct[p] for p in self.rng.choice(len(distinct), size=self.batch, replace=False)]
        spent = set()
        for row in taken:
            self.uses[row] += 1
            self.most_uses = max(self.most_uses, self.uses[row])
            if self.uses[row] % self.max_reuse == 0:
                spent.add(row)
        self.buffer = [row for row in self.buffer if row not in spent]
        return taken
