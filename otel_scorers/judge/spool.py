"""The batch lane's spool: one JSON file per deferred judgement under ``<directory>/pending`` and
one per submitted batch under ``<directory>/batches``, each written to a temporary file, synced
and renamed (a ``kill -9`` leaves the old file or the new one, never half of one); bounded in
bytes; everything re-read at start; created readable by their owner only.

Any number of processes may add to one spool (the workers of a server, forked or each with its
own processor); one at a time submits and emits, the one that holds an exclusive ``flock`` on
``<directory>/lock`` (:meth:`Spool.lead`, never waiting for it): the kernel drops the lock when
that process ends, even by ``kill -9``, and another takes over at its next round. A ``flock`` is
one host's: a spool is not shared across machines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from otel_scorers import safe_json

__all__ = ["Spool"]


def _write_atomic(path: Path, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all (temporary file, fsync, rename, dir fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class Spool:
    """Deferred judgements and submitted batches on disk (see the module docstring)."""

    def __init__(self, directory: str | Path, max_bytes: int) -> None:
        self.root = Path(directory)
        self.max_bytes = max_bytes
        self.pending_dir, self.batch_dir = self.root / "pending", self.root / "batches"
        for folder in (self.pending_dir, self.batch_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self._bytes = 0
        self.recount()
        #: the lock's file descriptor while this process leads, and the process it was taken in
        self._lock: tuple[int, int] | None = None

    def recount(self) -> int:
        """The bytes on disk again (other processes add and remove); the count of entries."""
        sizes = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.pending_dir) as found:
            for item in found:
                if item.name.endswith(".json"):
                    with contextlib.suppress(FileNotFoundError):
                        sizes.append(item.stat().st_size)
        self._bytes = sum(sizes)
        return len(sizes)

    def lead(self) -> bool:
        """Whether this process submits and emits for the spool: it holds, or now takes, the
        exclusive lock on ``<directory>/lock`` (never waiting for it). Without ``fcntl`` (not
        POSIX) the process always leads: one process per directory there."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - POSIX only
            return True
        if self._lock is not None and self._lock[1] == os.getpid():
            return True
        self.after_fork()
        handle = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process leads
            os.close(handle)
            return False
        self._lock = (handle, os.getpid())
        self._sweep()
        return True

    def scratch(self) -> Path:
        """A new private file in the spool for a batch's input (the caller removes it)."""
        handle, name = tempfile.mkstemp(dir=self.root, prefix=".upload-", suffix=".jsonl")
        os.close(handle)
        return Path(name)

    def _sweep(self) -> None:
        """On taking the lead: what an ended leader left half done (a batch input being
        uploaded, a file being written) removed once it is an hour old."""
        old = time.time() - 3600
        for pattern in (".upload-*", "*/.tmp-*", ".tmp-*"):
            for path in self.root.glob(pattern):
                with contextlib.suppress(OSError):
                    if path.stat().st_mtime < old:
                        path.unlink()

    @property
    def leading(self) -> bool:
        return self._lock is not None and self._lock[1] == os.getpid()

    def release(self) -> None:
        """Stop leading (another process's next round takes over)."""
        if self.leading:
            assert self._lock is not None
            os.close(self._lock[0])  # the last descriptor of the lock: the kernel drops it
        self._lock = None

    def after_fork(self) -> None:
        """In a forked child: the parent's lock descriptor closed, never unlocked (the lock
        stays the parent's while the parent lives)."""
        if self._lock is not None and self._lock[1] != os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._lock[0])
            self._lock = None

    @property
    def used_bytes(self) -> int:
        return self._bytes

    def add(self, entry: Mapping[str, Any]) -> bool:
        """Keep ``entry`` (its ``id`` names it); ``False`` when the spool is full."""
        data = json.dumps(entry, separators=(",", ":")).encode()
        if self._bytes + len(data) > self.max_bytes:
            return False
        _write_atomic(self.pending_dir / f"{entry['id']}.json", data)
        self._bytes += len(data)
        return True

    def update(self, entry: Mapping[str, Any]) -> None:
        path = self.pending_dir / f"{entry['id']}.json"
        before = path.stat().st_size if path.exists() else 0
        data = json.dumps(entry, separators=(",", ":")).encode()
        _write_atomic(path, data)
        self._bytes += len(data) - before

    def each(self) -> Iterator[dict[str, Any]]:
        """The deferred judgements one at a time, in no set order (a file that does not read
        is set aside as ``*.unreadable``)."""
        with contextlib.suppress(FileNotFoundError), os.scandir(self.pending_dir) as found:
            names = [item.name for item in found if item.name.endswith(".json")]
        for name in names:
            record = _read(self.pending_dir / name, set_aside=True)
            if record is not None:
                yield record

    def get(self, ident: str) -> dict[str, Any] | None:
        """One deferred judgement (``None``: gone, emitted already, or unreadable)."""
        if not _SAFE_ID.fullmatch(ident):
            return None
        return _read(self.pending_dir / f"{ident}.json", set_aside=True)

    def remove(self, ident: str) -> None:
        path = self.pending_dir / f"{ident}.json"
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return
        self._bytes -= size

    def batches(self) -> dict[str, dict[str, Any]]:
        """Every submitted batch still open, by id."""
        return _records(self.batch_dir, set_aside=False)

    def save_batch(self, record: Mapping[str, Any]) -> None:
        name = hashlib.sha256(str(record["id"]).encode()).hexdigest()[:32]
        _write_atomic(self.batch_dir / f"{name}.json", json.dumps(record).encode())

    def drop_batch(self, ident: str) -> None:
        name = hashlib.sha256(ident.encode()).hexdigest()[:32]
        (self.batch_dir / f"{name}.json").unlink(missing_ok=True)


_SAFE_ID = re.compile(r"[0-9a-f]{1,64}")


def _read(path: Path, *, set_aside: bool) -> dict[str, Any] | None:
    """The JSON record at ``path`` (``None``: missing, or not a record with an ``id``; one that
    does not read is, with ``set_aside``, renamed ``*.unreadable``)."""
    try:
        record = safe_json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        if set_aside:
            with contextlib.suppress(OSError):
                path.rename(path.with_suffix(".unreadable"))
        return None
    if isinstance(record, dict) and isinstance(record.get("id"), str):
        return record
    return None


def _records(folder: Path, *, set_aside: bool) -> dict[str, dict[str, Any]]:
    """The JSON records of ``folder`` by their ``id``."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        record = _read(path, set_aside=set_aside)
        if record is not None:
            out[record["id"]] = record
    return out
