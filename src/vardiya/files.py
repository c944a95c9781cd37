"""Files published whole: the atomic write every output of vardiya goes through.

Slot job sinks, pipeline task outputs and charts all publish with ``atomic_write``, so it lives below
all of them (``slots.sinks`` re-exports it, where users of slot jobs look for it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(
    path: str | os.PathLike[str], data: bytes | str, *, skip_existing: bool = False, durable: bool = True
) -> bool:
    """Publish ``data`` at ``path`` atomically; returns False when ``skip_existing`` found it already there.

    The rename alone already guarantees that no reader and no killed process ever leaves or sees a
    partial file. ``durable`` (the default) adds the fsyncs of the file and its directory, so the new
    file also survives a power loss; without it a write costs about a third.
    """
    # Plain os.path on purpose: an output per record makes pathlib's parsing a visible cost.
    target = os.fspath(path)
    if skip_existing and os.path.exists(target):
        return False
    parent, name = os.path.split(target)
    parent = parent or "."
    os.makedirs(parent, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor, temporary = tempfile.mkstemp(dir=parent, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # mkstemp makes 0600; an output is meant to be read by others
            handle.write(payload)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if not durable:
        return True
    directory = os.open(parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return True
