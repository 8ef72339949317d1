"""The batch lane's spool: one JSON file per deferred judgement under ``<directory>/pending`` and
one per submitted batch under ``<directory>/batches``, each written to a temporary file, synced
and renamed (a ``kill -9`` leaves the old file or the new one, never half of one); bounded in
bytes; everything re-read at start; created readable by their owner only.

Any number of processes may add to one spool (the workers of a server, forked or each with its
own processor); one at a time submits and emits, the one that holds an exclusive ``flock`` on
``<directory>/lock`` (:meth:`Spool.lead`, never waiting for it): the kernel drops the lock when
that process ends, even by ``kill -9``, and another takes over at its next round. A ``flock`` is
one host's: a spool is not shared across machines.

Nothing in the spool is used unless this process's user wrote it: the directory and its two
folders must be owned by that user and writable by no one else (checked at start, where a spool
that is not is refused with :class:`SpoolRefused`, and again each time the lead is taken); an
entry is opened without following a link, and used only when it is a regular file of that user,
readable as a record of the lane's shape (its ``id`` its file's name, hex trace and span ids, a
request body). An entry that is not is set aside (``*.unreadable``: truncated, empty, not a
record; ``*.refused``: not this user's file) and counted in :attr:`Spool.set_aside`, so the lane
reports it. The ``lock`` is opened with ``O_NOFOLLOW``: a link planted there is refused, never
followed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from otel_scorers import safe_json

__all__ = ["Spool", "SpoolRefused"]

#: The most bytes of one entry read (an entry is a judge request and its run: well under it).
MAX_ENTRY_BYTES = 64 * 1024 * 1024


class SpoolRefused(Exception):
    """The spool's directory is not this user's alone (the message says what and the fix)."""


def _trusted(path: Path) -> None:
    """``path`` a directory owned by this process's user, writable by no one else."""
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise SpoolRefused(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise SpoolRefused(f"{path} is owned by uid {info.st_uid}, not by this process's "
                           f"user (uid {os.geteuid()}): anyone who owns it could plant "
                           "requests the lane would send under the application's key")
    if info.st_mode & 0o022:
        raise SpoolRefused(f"{path} is writable by its group or by others (mode "
                           f"{stat.S_IMODE(info.st_mode):o}): anyone who can write it could "
                           "plant requests; chmod 700 it")


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
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (self.pending_dir, self.batch_dir):
            folder.mkdir(mode=0o700, exist_ok=True)
        self.check()
        #: entries set aside since start, by why: ``unreadable``, ``refused``
        self.set_aside = {"unreadable": 0, "refused": 0}
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
        self.check()
        try:
            handle = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            if os.path.islink(self.root / "lock"):
                raise SpoolRefused(f"{self.root / 'lock'} is a link: refused, never "
                                   "followed; remove it") from None
            raise
        if os.fstat(handle).st_uid != os.geteuid():
            os.close(handle)
            raise SpoolRefused(f"{self.root / 'lock'} is not this process's user's file")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process leads
            os.close(handle)
            return False
        self._lock = (handle, os.getpid())
        self._sweep()
        return True

    def check(self) -> None:
        """The directory and its folders this user's alone (:class:`SpoolRefused` if not)."""
        for folder in (self.root, self.pending_dir, self.batch_dir):
            _trusted(folder)

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
            record = self._entry(self.pending_dir / name)
            if record is not None:
                yield record

    def get(self, ident: str) -> dict[str, Any] | None:
        """One deferred judgement (``None``: gone, emitted already, or unreadable)."""
        if not _SAFE_ID.fullmatch(ident):
            return None
        return self._entry(self.pending_dir / f"{ident}.json")

    def _entry(self, path: Path) -> dict[str, Any] | None:
        """The entry at ``path`` if it is this user's and of the lane's shape; else set aside
        and counted (``None``)."""
        try:
            record = _read(path)
        except FileNotFoundError:
            return None
        except _Refused:
            self._set_aside(path, "refused")
            return None
        except (OSError, ValueError):
            self._set_aside(path, "unreadable")
            return None
        if not _valid_entry(record, path.stem):
            self._set_aside(path, "unreadable")
            return None
        return record

    def _set_aside(self, path: Path, why: str) -> None:
        with contextlib.suppress(OSError):
            path.rename(path.with_suffix(f".{why}"))
        self.set_aside[why] += 1

    def remove(self, ident: str) -> None:
        path = self.pending_dir / f"{ident}.json"
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return
        self._bytes -= size

    def batches(self) -> dict[str, dict[str, Any]]:
        """Every submitted batch still open, and every batch about to be created (a record
        with an ``intent`` and no ``id`` yet), by the name of its record."""
        out: dict[str, dict[str, Any]] = {}
        for path in sorted(self.batch_dir.glob("*.json")):
            try:
                record = _read(path)
            except (OSError, ValueError, _Refused):
                continue
            if isinstance(record.get("id") or record.get("intent"), str) and \
                    isinstance(record.get("entries"), list):
                out[path.stem] = record
        return out

    def save_batch(self, record: Mapping[str, Any]) -> None:
        """A batch's record (named by its ``intent``, else its ``id``: the record written
        before the batch was created is the one its id is written into)."""
        _write_atomic(self.batch_dir / f"{_batch_name(record)}.json",
                      json.dumps(record).encode())

    def drop_batch(self, record: Mapping[str, Any]) -> None:
        (self.batch_dir / f"{_batch_name(record)}.json").unlink(missing_ok=True)


def _batch_name(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(str(record.get("intent") or record["id"]).encode()).hexdigest()[:32]


_SAFE_ID = re.compile(r"[0-9a-f]{1,64}")


_HEX = re.compile(r"[0-9a-f]+")


class _Refused(Exception):
    """An entry that is not this user's regular file."""


def _read(path: Path) -> dict[str, Any]:
    """The JSON object at ``path``, opened without following a link, when it is a regular
    file of this user (:class:`_Refused` if not; ``ValueError`` if it does not read)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if path.is_symlink():
            raise _Refused(str(path)) from None
        raise
    with os.fdopen(handle, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise _Refused(str(path))
        data = source.read(MAX_ENTRY_BYTES + 1)
    if len(data) > MAX_ENTRY_BYTES:
        raise ValueError("an entry over its bound")
    record = safe_json.loads(data)
    if not isinstance(record, dict):
        raise ValueError("not a record")
    return record


def _valid_entry(record: Mapping[str, Any], stem: str) -> bool:
    """Whether ``record`` has the shape the lane writes (its ``id`` its file's name)."""
    trace, span = record.get("trace_id"), record.get("span_id")
    attempts = record.get("attempts", 0)
    return (record.get("id") == stem and bool(_SAFE_ID.fullmatch(stem))
            and isinstance(record.get("scorer"), str) and isinstance(record.get("run"), dict)
            and isinstance(record.get("body"), dict)
            and isinstance(trace, str) and len(trace) == 32 and bool(_HEX.fullmatch(trace))
            and isinstance(span, str) and len(span) == 16 and bool(_HEX.fullmatch(span))
            and isinstance(attempts, int) and not isinstance(attempts, bool) and attempts >= 0)
