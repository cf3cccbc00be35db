"""What the host and the sandbox's child agree on: the frames on the result pipe, the layer names.

The child writes newline-delimited JSON frames to a pipe the host created before the child ran
(never a file the untrusted code could replace). The host trusts the frames in order: notes and
a ``failed`` or ``refused`` frame from the set-up, then one ``ready`` frame with the verified
layers (written before the untrusted code starts, so the code cannot rewrite it), then the first
``result`` frame; anything after that is ignored.
"""

from __future__ import annotations

FAILED = "failed"
"""The set-up failed before the code ran (error)."""
REFUSED = "refused"
"""A required isolation layer is missing after the set-up (error names the layer)."""
READY = "ready"
"""Every required layer is verified; the code runs next (layers, notes)."""
RESULT = "result"
"""The call's outcome (ok, value or error); written from inside the untrusted process."""

BASE_LAYERS = ("rlimits", "unprivileged-uid", "no-capabilities", "no-new-privileges", "seccomp")
"""Required in every mode: the code never runs as root, with capabilities, or without seccomp."""
NAMESPACE_LAYERS = (
    "mount-namespace",
    "pid-namespace",
    "network-namespace",
    "ipc-namespace",
    "uts-namespace",
    "private-root",
    "private-proc",
    "read-only-filesystem",
    "disk-quota",
)
"""Required once the kernel let the child create namespaces (``auto``) or always (``require``)."""
USER_NAMESPACE = "user-namespace"
"""Required with the namespaces when the host is not root (it maps the host uid to root inside)."""
AUDIT_HOOK = "audit-hook"
"""The Python-level second layer (optional)."""

NOBODY = 65534
"""The uid/gid a root host drops the code to."""
