"""The host's side of the sandbox's I/O: files and a pipe created before the child runs.

Nothing is ever read back by path from a directory the untrusted code can write to, so no
symlink, FIFO or replaced file planted there can redirect or block a read by the host:

- the job goes to the child's stdin as an anonymous memory file (``memfd``);
- the child's own diagnostics (``log``) and the code's output (``output``) go to two more
  memory files; the host reads only their tail, after an ``fstat`` (regular file, size) on its
  own descriptor; the file-size rlimit bounds what the code can write;
- the frames come back on a pipe whose read end only the host holds; every read waits at most
  until the call's deadline and stops past ``limit`` bytes.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import time
from dataclasses import dataclass, field


@dataclass
class ChildFiles:
    """Descriptors the child inherits (job, log, output, result pipe) and the host's read end."""

    job: int = field(default_factory=lambda: os.memfd_create("lecritique-sandbox-job", os.MFD_CLOEXEC))
    log: int = field(default_factory=lambda: os.memfd_create("lecritique-sandbox-log", os.MFD_CLOEXEC))
    output: int = field(default_factory=lambda: os.memfd_create("lecritique-sandbox-output", os.MFD_CLOEXEC))
    result_read: int = -1
    result_write: int = -1

    def __post_init__(self) -> None:
        self.result_read, self.result_write = os.pipe()

    def write_job(self, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            view = view[os.write(self.job, view) :]
        os.lseek(self.job, 0, os.SEEK_SET)

    def close_child_ends(self) -> None:
        """After the child started: the host keeps only what it reads (log, output, result)."""
        for name in ("job", "result_write"):
            self._close(name)

    def close(self) -> None:
        for name in ("job", "log", "output", "result_read", "result_write"):
            self._close(name)

    def _close(self, name: str) -> None:
        descriptor = getattr(self, name)
        if descriptor >= 0:
            os.close(descriptor)
            setattr(self, name, -1)


def tail(descriptor: int, chars: int) -> str:
    """The last ``chars`` characters of a memory file the host created (bounded read).

    Read through the host's own descriptor (no path), after checking that it is still a regular
    file owned by the host.
    """
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        return ""
    length = min(info.st_size, 4 * chars)
    data = os.pread(descriptor, length, info.st_size - length)
    return data.decode("utf-8", "replace")[-chars:]


@dataclass
class Received:
    """What came through the result pipe."""

    data: bytes = b""
    timed_out: bool = False
    """The deadline passed before the child exited."""
    too_large: bool = False
    """More than the limit arrived; the rest was not read."""


def _pidfd(pid: int) -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        return os.pidfd_open(pid)
    return None


def receive(descriptor: int, pid: int, deadline: float, limit: int) -> Received:
    """Read ``descriptor`` until EOF or the exit of process ``pid``, never past ``deadline``.

    A pidfd wakes the wait when the child exits even if a descendant kept the pipe open; the
    buffered rest is then drained without waiting.
    """
    os.set_blocking(descriptor, False)
    exited = _pidfd(pid)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Received(b"".join(chunks), timed_out=True)
            if exited is None:  # no pidfd (kernel < 5.3): poll
                readable = select.select([descriptor], [], [], min(remaining, 0.02))[0]
            else:
                readable = select.select([descriptor, exited], [], [], remaining)[0]
            try:
                chunk = os.read(descriptor, 1 << 16)
            except BlockingIOError:
                if (exited in readable) if exited is not None else _reaped(pid):
                    break
                continue
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                return Received(b"".join(chunks), too_large=True)
            chunks.append(chunk)
    finally:
        if exited is not None:
            os.close(exited)
    return Received(b"".join(chunks))


def _reaped(pid: int) -> bool:
    """Without a pidfd: whether ``pid`` has exited (it stays a zombie until the caller waits)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True
