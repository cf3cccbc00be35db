"""The sandbox's private root: a read-only tmpfs holding only what the interpreter needs.

Built in the child's own mount namespace, by the PID namespace's init (so that /proc shows that
namespace). The tree, all read-only except the work directory:

- the interpreter's standard library (the ``sys.path`` entries under ``sys.base_prefix``),
  bind-mounted at the paths ``sys.path`` names, from their real paths (a venv symlinked into a
  pyenv installation still finds its standard library);
- the allowed site-packages modules (``packages``) in ``/packages``, which replaces every
  site-packages entry of ``sys.path`` (a venv inside the project checkout stays invisible);
- the shared libraries (``/usr/lib``, ``/usr/lib64`` and the ``/lib``, ``/lib64`` links) and
  ``/etc/ld.so.cache``: native extension modules load their dependencies from there;
- ``/dev/null``, ``zero``, ``full``, ``random``, ``urandom``;
- ``/proc``: a new procfs of the sandbox's PID namespace (it shows the sandbox's processes only);
- the work directory, at the host's path, as a tmpfs of ``disk_bytes`` (the disk quota).

Nothing else: no ``/etc/passwd``, no project checkout, no host temporary directory, no shell.
``pivot_root`` then makes this tree ``/`` and detaches the host's tree from the namespace.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import NamedTuple

from . import kernel

SYSTEM_LIBRARIES = ("/usr/lib", "/usr/lib64", "/lib", "/lib64")
"""Where the dynamic loader finds the libraries of native extension modules."""
SYSTEM_FILES = ("/etc/ld.so.cache",)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
PACKAGES = "/packages"
"""Where the allowed site-packages modules appear inside."""
_ROOT_TMPFS = "mode=0755,size=1m,nr_inodes=4096"
_WORK_INODES = 4096


class Exposure(NamedTuple):
    """One host path made visible inside: ``target`` (the path inside) from ``source`` (real path)."""

    target: str
    source: str
    device: bool = False


class Layout(NamedTuple):
    """Everything the private root contains, computed on the host's tree before it is left."""

    exposures: tuple[Exposure, ...]
    links: tuple[tuple[str, str], ...]
    """(path inside, link target) for top-level symlinks such as /lib -> usr/lib."""

    def top_level(self, workdir: str) -> set[str]:
        """The names the root directory may hold."""
        paths = [e.target for e in self.exposures] + [link for link, _ in self.links] + [workdir, "/proc"]
        return {path.strip("/").split("/")[0] for path in paths}


def _exposure(path: str, device: bool = False, target: str = "") -> Exposure | None:
    if not os.path.exists(path):
        return None
    return Exposure(target or path, os.path.realpath(path), device)


def _standard_library() -> list[str]:
    """The ``sys.path`` entries inside the interpreter's own installation."""
    base = os.path.realpath(sys.base_prefix) + os.sep
    candidates = [entry for entry in sys.path if os.path.isabs(entry) and os.path.isdir(entry)]
    return [entry for entry in candidates if (os.path.realpath(entry) + os.sep).startswith(base)]


def _module_paths(name: str, notes: list[str]) -> list[str]:
    """The files/directories of an importable top-level module, plus its bundled ``.libs``."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as error:
        notes.append(f"package {name!r} not exposed: {error}")
        return []
    if spec is None:
        notes.append(f"package {name!r} not exposed: not installed")
        return []
    paths = list(spec.submodule_search_locations or [])
    if not paths and spec.origin and os.path.isfile(spec.origin):
        paths = [spec.origin]
    siblings = [os.path.join(os.path.dirname(path), f"{name}.libs") for path in paths]
    return paths + [path for path in siblings if os.path.isdir(path)]


def layout(packages: list[str], notes: list[str]) -> Layout:
    """What the interpreter, the allowed ``packages`` and native libraries need to be visible."""
    paths = _standard_library()
    modules = [path for name in packages for path in _module_paths(name, notes)]
    links = []
    for path in SYSTEM_LIBRARIES:
        if os.path.islink(path) and os.path.dirname(path) == "/":
            links.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            paths.append(path)
    exposures = [_exposure(path) for path in [*paths, *SYSTEM_FILES]]
    exposures += [_exposure(path, target=f"{PACKAGES}/{os.path.basename(path)}") for path in modules]
    exposures += [_exposure(path, device=True) for path in DEVICES]
    return Layout(_outermost([e for e in exposures if e is not None]), tuple(links))


def _outermost(exposures: list[Exposure]) -> tuple[Exposure, ...]:
    """Drop exposures inside another one (visible through it already); parents come first."""
    kept: list[Exposure] = []
    for exposure in sorted(set(exposures), key=lambda e: e.target):
        if not any((exposure.target + "/").startswith(k.target + "/") for k in kept):
            kept.append(exposure)
    return tuple(kept)


def _make_directories(root: str, path: str) -> str:
    """Create ``path`` under ``root`` with mode 0755 whatever the umask; the full path inside root."""
    current = root
    for part in path.strip("/").split("/"):
        current = os.path.join(current, part)
        if not os.path.isdir(current):
            os.mkdir(current)
            os.chmod(current, 0o755)
    return current


def _bind(root: str, exposure: Exposure, handle: int) -> None:
    place = os.path.join(root, exposure.target.lstrip("/"))
    if os.path.isdir(exposure.source):
        _make_directories(root, exposure.target)
    else:
        _make_directories(root, os.path.dirname(exposure.target))
        os.close(os.open(place, os.O_CREAT | os.O_WRONLY, 0o644))
    kernel.mount(f"/proc/self/fd/{handle}", place, None, kernel.MS_BIND | kernel.MS_REC)
    # Device nodes must stay usable (no nodev); everything else is nodev too.
    kernel.remount_read_only(place, 0 if exposure.device else kernel.MS_NODEV)


def build(
    mountpoint: str, workdir: str, plan: Layout, disk_bytes: int, owner: tuple[int, int] | None
) -> None:
    """Build the private root on a tmpfs at ``mountpoint``, enter it, and cd to ``workdir``.

    ``owner`` (uid, gid) receives the work directory (None: keep the caller's).
    """
    kernel.mount(None, "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
    # Open every source before the tmpfs may cover it (e.g. a venv under the host's temp dir).
    handles = [os.open(e.source, os.O_PATH | os.O_CLOEXEC) for e in plan.exposures]
    kernel.mount("tmpfs", mountpoint, "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV, _ROOT_TMPFS)
    os.chmod(mountpoint, 0o755)
    for exposure, handle in zip(plan.exposures, handles, strict=True):
        _bind(mountpoint, exposure, handle)
        os.close(handle)
    for link, target in plan.links:
        os.symlink(target, os.path.join(mountpoint, link.lstrip("/")))
    proc = _make_directories(mountpoint, "/proc")
    quiet = kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC
    kernel.mount("proc", proc, "proc", quiet | kernel.MS_RDONLY)
    work = _make_directories(mountpoint, workdir)
    kernel.mount("tmpfs", work, "tmpfs", quiet, f"mode=0700,size={disk_bytes},nr_inodes={_WORK_INODES}")
    if owner is not None:
        os.chown(work, *owner)
    os.chdir(mountpoint)
    kernel.pivot_root(".", ".")
    kernel.umount(".", kernel.MNT_DETACH)
    os.chdir("/")
    kernel.remount_read_only("/", kernel.MS_NODEV)
    os.chdir(workdir)
    sys.path[:] = [*_standard_library(), PACKAGES]
    importlib.invalidate_caches()
