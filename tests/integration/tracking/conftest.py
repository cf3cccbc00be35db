"""trackio reads TRACKIO_DIR once, when first imported: point it at a temporary store first."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

TRACKIO_DIR = tempfile.mkdtemp(prefix="lecritique-test-trackio-")
atexit.register(shutil.rmtree, TRACKIO_DIR, ignore_errors=True)
os.environ["TRACKIO_DIR"] = TRACKIO_DIR
