"""The child's process tree: launcher -> init -> worker, and the order of the layers.

1. The launcher (started by the host, with the host's uid) notes the host's namespaces and
   unshares new ones (``namespaces.enter``); ``auto`` goes on without them when the kernel
   refuses, ``require`` stops, ``off`` does not try.
2. It forks init, PID 1 of the new PID namespace: init builds the private root (mount
   namespace only, ``filesystem.build``), makes itself undumpable, forks the worker and waits.
   When init exits, the kernel kills every process left in the namespace; init does not run the
   code because the kernel does not deliver default-action signals such as SIGXCPU to an init.
3. The worker redirects its output to the host's output file, closes every other descriptor,
   sets the rlimits, drops to nobody (a root host) or drops its capabilities (a user
   namespace), sets ``no_new_privs``, verifies every required layer (``checks.verify``), loads
   the seccomp filter and verifies it, installs the audit hook, reports the verified layers in
   the ``ready`` frame, and only then compiles and calls the untrusted code.

Every process dies with its parent (``PR_SET_PDEATHSIG``), so the host's SIGKILL of the launcher
at the wall-clock limit takes the whole tree.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from . import checks, filesystem, identity, kernel, namespaces, protocol, seccomp, worker


class Context:
    """What the launcher learnt and decided, inherited by init and the worker through fork."""

    def __init__(self, job: dict[str, Any], host_root: bool, expect: checks.Expectations) -> None:
        self.job = job
        self.host_root = host_root
        """The launcher runs as root of the host's user namespace."""
        self.expect = expect
        self.notes: list[str] = []

    @property
    def required(self) -> list[str]:
        layers = list(protocol.BASE_LAYERS)
        if self.expect.namespaces:
            layers += protocol.NAMESPACE_LAYERS
        if "user" in self.expect.namespaces:
            layers.append(protocol.USER_NAMESPACE)
        return layers

    @property
    def channel(self) -> int:
        return int(self.job["result_fd"])


def _exit_code(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _guarded(context: Context, step: Callable[[Context], None]) -> NoReturn:
    """Run ``step`` in a forked process; set-up errors become frames; never return."""
    try:
        step(context)
        code = 0
    except identity.Refusal as refusal:
        refused = {"stage": protocol.REFUSED, "error": str(refusal), "notes": context.notes}
        worker.send(context.channel, refused)
        code = 3
    except BaseException as error:
        message = f"sandbox set-up failed: {type(error).__name__}: {error}"[:600]
        worker.send(context.channel, {"stage": protocol.FAILED, "error": message, "notes": context.notes})
        code = 3
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    os._exit(code)


def main(job: dict[str, Any], checkout: str) -> NoReturn:
    """The launcher: namespaces, then init."""
    os.umask(0o022)  # whatever the host's umask, directories made for the sandbox are traversable
    workdir = job["workdir"]
    expect = checks.Expectations(
        workdir=workdir,
        limits=job["limits"],
        host_namespaces=namespaces.current_ids(),
        checkout=checkout,
        disk_bytes=job["disk_bytes"],
    )
    context = Context(job, os.geteuid() == 0, expect)
    if job["namespaces"] != "off":
        expect.namespaces.extend(namespaces.enter(context.notes))
        if not expect.namespaces and job["namespaces"] == "require":
            error = f"namespaces required but unavailable: {'; '.join(context.notes)}"
            worker.send(context.channel, {"stage": protocol.FAILED, "error": error})
            os._exit(3)
    init = os.fork()
    if init == 0:
        _guarded(context, run_init)
    os._exit(_exit_code(os.waitpid(init, 0)[1]))


def run_init(context: Context) -> None:
    """PID 1 of the namespace: the private root, then the worker."""
    kernel.prctl(kernel.PR_SET_PDEATHSIG, signal.SIGKILL)
    job, workdir = context.job, context.expect.workdir
    owner = (protocol.NOBODY, protocol.NOBODY) if context.host_root else None
    if context.expect.namespaces:
        plan = filesystem.layout(list(job["packages"]), context.notes)
        filesystem.build(workdir, workdir, plan, context.expect.disk_bytes, owner)
        context.expect.top_level.update(plan.top_level(workdir))
    else:
        os.chdir(workdir)
        if owner is not None:
            os.chown(workdir, *owner)
        context.notes.append("no namespaces: the host's files stay readable where the uid may read")
    # Undumpable: a worker with the same uid (user namespace) cannot open /proc/1/mem.
    kernel.prctl(kernel.PR_SET_DUMPABLE, 0)
    code = os.fork()
    if code == 0:
        _guarded(context, run_worker)
    os._exit(_exit_code(os.waitpid(code, 0)[1]))


def _redirect(output: int, channel: int) -> None:
    """stdin from /dev/null, stdout/stderr to the host's output file, every other descriptor closed."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.closerange(3, channel)
    os.closerange(channel + 1, 1 << 16)


def run_worker(context: Context) -> None:
    """Limits, privileges, verification, seccomp, audit hook; then the untrusted call."""
    kernel.prctl(kernel.PR_SET_PDEATHSIG, signal.SIGKILL)
    job = context.job
    _redirect(int(job["output_fd"]), context.channel)
    identity.set_limits(job["limits"])
    identity.drop_privileges(context.host_root)
    required = context.required
    checks.verify([layer for layer in required if layer != "seccomp"], context.expect)
    seccomp.load(os.getpid())
    checks.verify(["seccomp"], context.expect)
    layers = required
    if job["audit_hook"]:
        worker.install_audit_hook(context.expect.workdir)
        layers = [*layers, protocol.AUDIT_HOOK]
    worker.send(context.channel, {"stage": protocol.READY, "layers": layers, "notes": context.notes})
    outcome = worker.run_call(job)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    worker.send(context.channel, {"stage": protocol.RESULT, **outcome})
