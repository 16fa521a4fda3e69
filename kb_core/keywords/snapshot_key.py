"""The key that signs this user's L0 snapshots.

The snapshot file lies in the application root, where others may be able to write (a shared /tmp, a cloned
repository, a document tree a `git pull` updates). Its tag is an HMAC under a key kept where only this user
writes: `KB_L0_SNAPSHOT_KEY_FILE`, default `$XDG_CONFIG_HOME/kb-console/l0-snapshot.key` (`~/.config/...`),
32 random bytes made on first use (mode 0600). A snapshot someone else wrote, or one written under another
user's key, does not verify: the open scans in full and writes its own. Processes of one user (the console,
MCP servers, agents) share the key, so they share the snapshot; service accounts that should share one point
`KB_L0_SNAPSHOT_KEY_FILE` at the same file.

When no key file can be read or made (a read-only home), a key for this process only is used, with a warning:
the snapshot then speeds up no other process.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import secrets
import tempfile
from pathlib import Path

from kb_core.documents.folder import read_regular

log = logging.getLogger(__name__)

KEY_BYTES = 32


def key_path() -> Path:
    configured = os.environ.get("KB_L0_SNAPSHOT_KEY_FILE", "").strip()
    if configured:
        return Path(configured).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME", "").strip() or str(Path.home() / ".config")
    return Path(config) / "kb-console" / "l0-snapshot.key"


@functools.cache
def snapshot_key() -> bytes:
    """This user's snapshot key (read once per process; made when there is none)."""
    path = key_path()
    for _attempt in range(3):
        try:
            key = read_regular(path, 4096)
            if len(key) >= KEY_BYTES:
                return key
            raise OSError(errno.EINVAL, f"{path} holds {len(key)} bytes, not a key of {KEY_BYTES}")
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot read the L0 snapshot key %s (%s): this process signs its snapshot with a key of "
                        "its own, so no other process can use it (set KB_L0_SNAPSHOT_KEY_FILE)", path, exc)
            return secrets.token_bytes(KEY_BYTES)
        key = secrets.token_bytes(KEY_BYTES)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _publish(path, key)
        except FileExistsError:
            continue  # another process made it meanwhile: read theirs
        except OSError as exc:
            log.warning("cannot make the L0 snapshot key %s (%s): this process signs its snapshot with a key of "
                        "its own, so no other process can use it (set KB_L0_SNAPSHOT_KEY_FILE)", path, exc)
            return key
        log.info("made the L0 snapshot key %s", path)
        return key
    return secrets.token_bytes(KEY_BYTES)  # pragma: no cover - the file kept vanishing and reappearing


def _publish(path: Path, key: bytes) -> None:
    """Write the key whole under a temp name (0600), then link it into place: a reader never sees half a key,
    and of two processes making one at once, one wins (the other gets `FileExistsError`)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(key)
            out.flush()
            os.fsync(out.fileno())
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
