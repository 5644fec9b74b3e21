"""Durable progress of a curation run: an append-only log of the rows as
they finish, compacted into Parquet parts.

Both engines (:func:`agl_fast.pipeline.curate` and
:func:`agl_fast.ray.curate_ray`) write through :class:`ProgressLog`:

* the keys of every batch handed to a worker are appended (a ``started``
  record) before the batch leaves, and its rows (an Arrow IPC stream) the
  moment they come back, so a process killed at any moment (``kill -9``)
  loses only the batches in flight, and a resumed run knows which those
  were;
* the log is flushed to disk (``fsync``) once :data:`FLUSH_FILES` rows or
  :data:`FLUSH_SECONDS` seconds of work are waiting, whichever comes first,
  so the rows survive a machine crash on that schedule too;
* once ``part_rows`` rows or ``part_bytes`` bytes are logged, the log
  becomes ``parts/part-NNNNN.parquet`` (and its ``features`` column
  ``features/part-NNNNN.parquet``), written to a temporary name, flushed
  and renamed, and a new log starts. The work per file is the same
  whatever the size of the run: nothing already done is read again.

Layout::

    progress/part-NNNNN.log      the rows of the part being filled
    parts/part-NNNNN.parquet     every column but ``features``
    features/part-NNNNN.parquet  ``key`` and ``features``

A log record is ``b"AGLJ"``, a kind byte (``S`` keys started, ``R``
rows), the payload length (8 bytes, little-endian), its CRC-32 (4 bytes)
and the payload. A record cut short by a crash fails its length or CRC
check: it and anything after it are ignored (its files run again).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._internal.safe_files import atomic_file, open_append

__all__ = [
    "FLUSH_FILES",
    "FLUSH_SECONDS",
    "LogContents",
    "PartSink",
    "ProgressLog",
    "Recovered",
    "compact_log",
    "durable_write_parquet",
    "ipc_bytes",
    "progress_files",
    "read_ipc",
    "read_log",
    "read_parts",
    "recover",
]

_log = logging.getLogger("agl_fast.pipeline")

#: Finished rows are flushed to disk once this many are waiting ...
FLUSH_FILES = 256
#: ... or once the oldest has waited this many seconds, whichever is first.
FLUSH_SECONDS = 30.0

#: Folders of a run's output directory.
PROGRESS_DIR = "progress"
PARTS_DIR = "parts"
FEATURES_DIR = "features"
#: The column that goes to the feature shards instead of the parts.
FEATURES = "features"

_MAGIC = b"AGLJ"
_HEAD = struct.Struct("<4scQI")
_STARTED = b"S"
_ROWS = b"R"
#: Signals held back while a record is written, so that a Ctrl-C never
#: cuts one short.
_HELD = {signal.SIGINT, signal.SIGTERM}


def part_name(number: int) -> str:
    """The file name of part ``number`` (``part-00012.parquet``)."""
    return f"part-{number:05d}.parquet"


def log_path(out: Path, number: int) -> Path:
    """The log of part ``number`` in the run directory ``out``."""
    return out / PROGRESS_DIR / f"part-{number:05d}.log"


def part_number(path: Path) -> int:
    """The number in ``part-NNNNN.parquet`` or ``part-NNNNN.log``."""
    return int(path.name.split(".")[0].split("-")[1])


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block (main thread only); a
    signal that arrives meanwhile is delivered when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_write_parquet(table: pa.Table, path: Path, root: Path | None = None) -> None:
    """Write ``table`` to ``path`` through a new temporary name (never a
    symlink), flushed to disk before the rename, and flush the folder: after
    a crash ``path`` is either absent or whole. ``root``: the output folder
    the file must stay in (default its own folder)."""
    with atomic_file(path, root=root, fsync=True) as fh:
        pq.write_table(table, fh)


def ipc_bytes(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream (what a log record holds)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def read_ipc(data: bytes) -> pa.Table:
    """The table of an Arrow IPC stream (:func:`ipc_bytes`), without a copy
    of its buffers."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class ProgressLog:
    """The append-only log of one part (see the module notes).

    Parameters
    ----------
    path : Path
        The log file (created; appended to if it exists).
    flush_files, flush_seconds : int, float
        The flush schedule (the module's :data:`FLUSH_FILES` and
        :data:`FLUSH_SECONDS` unless a test asks otherwise).
    """

    def __init__(
        self, path: Path, flush_files: int = FLUSH_FILES, flush_seconds: float = FLUSH_SECONDS
    ) -> None:
        self.path = path
        self.flush_files, self.flush_seconds = flush_files, flush_seconds
        path.parent.mkdir(parents=True, exist_ok=True)
        # closed by close(); never through a symlink
        self._fh: BinaryIO = open_append(path, root=path.parent.parent)
        _fsync_dir(path.parent)
        #: Rows and bytes of rows (Arrow, in memory) logged so far.
        self.rows = 0
        self.nbytes = 0
        self._unsynced = 0
        self._oldest: float | None = None

    def _append(self, kind: bytes, payload: bytes) -> None:
        head = _HEAD.pack(_MAGIC, kind, len(payload), zlib.crc32(payload))
        with held_signals():
            # One unbuffered write per record: in the kernel once it returns.
            self._fh.write(head + payload)
            self._fh.flush()

    def started(self, keys: Iterable[str]) -> None:
        """Record that the files of ``keys`` were handed to a worker."""
        self._append(_STARTED, json.dumps(list(keys)).encode())

    def add(self, table: pa.Table) -> None:
        """Log finished rows; flush to disk when the schedule says so."""
        if table.num_rows == 0:
            return
        self._append(_ROWS, ipc_bytes(table))
        self.rows += table.num_rows
        self.nbytes += table.nbytes
        self._unsynced += table.num_rows
        if self._oldest is None:
            self._oldest = time.monotonic()
        if self._unsynced >= self.flush_files:
            self.sync()
        else:
            self.tick()

    def tick(self) -> None:
        """Flush if the oldest unflushed row has waited ``flush_seconds``
        (call it while waiting for rows)."""
        if self._oldest is not None and time.monotonic() - self._oldest >= self.flush_seconds:
            self.sync()

    def sync(self) -> None:
        """Flush every logged row to disk now."""
        if self._fh.closed:
            return
        with held_signals():
            self._fh.flush()
            os.fsync(self._fh.fileno())
        self._unsynced, self._oldest = 0, None

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if not self._fh.closed:
            self.sync()
            self._fh.close()


@dataclass
class LogContents:
    """What a log holds: its row tables in order, the keys started, and
    whether a record was cut short."""

    tables: list[pa.Table] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    torn: bool = False


def read_log(path: Path) -> LogContents:
    """The records of a log up to the first one cut short or damaged."""
    data = path.read_bytes()
    got = LogContents()
    at = 0
    while at < len(data):
        if len(data) - at < _HEAD.size:
            got.torn = True
            break
        magic, kind, n, crc = _HEAD.unpack_from(data, at)
        body = data[at + _HEAD.size : at + _HEAD.size + n]
        if magic != _MAGIC or len(body) != n or zlib.crc32(body) != crc:
            got.torn = True
            break
        try:
            if kind == _STARTED:
                got.started.update(str(k) for k in json.loads(body))
            elif kind == _ROWS:
                got.tables.append(pa.ipc.open_stream(body).read_all())
            else:
                got.torn = True
                break
        except (ValueError, pa.ArrowException):
            got.torn = True
            break
        at += _HEAD.size + n
    return got


def last_per_key(table: pa.Table) -> pa.Table:
    """``table`` with only the last row of every key."""
    keys = table.column("key").to_numpy(zero_copy_only=False)[::-1]
    _, first = np.unique(keys, return_index=True)
    keep = np.sort(table.num_rows - 1 - first)
    return table.take(pa.array(keep)) if len(keep) < table.num_rows else table


def write_part(table: pa.Table, out: Path, number: int) -> None:
    """``table`` as part ``number`` of the run in ``out``: its features
    shard first, then the part (a finished part means finished rows)."""
    name = part_name(number)
    if FEATURES in table.column_names:
        feats = table.select(["key", FEATURES]).filter(pc.is_valid(table.column(FEATURES)))
        (out / FEATURES_DIR).mkdir(exist_ok=True)
        durable_write_parquet(feats, out / FEATURES_DIR / name, out)
        table = table.drop_columns([FEATURES])
    (out / PARTS_DIR).mkdir(exist_ok=True)
    durable_write_parquet(table, out / PARTS_DIR / name, out)


def compact_log(out: Path, number: int) -> LogContents:
    """Turn the log of part ``number`` into the part (when it holds rows)
    and remove it; return what it held."""
    path = log_path(out, number)
    got = read_log(path)
    if got.torn:
        _log.info("%s ends in a record cut short: its files run again", path)
    if got.tables:
        table = pa.concat_tables(got.tables, promote_options="permissive")
        write_part(last_per_key(table), out, number)
    path.unlink()
    _fsync_dir(path.parent)
    return got


class PartSink:
    """Where a run's finished rows go: the log of the part being filled,
    turned into the part once ``part_rows`` rows or ``part_bytes`` bytes are
    logged (see the module notes).

    Parameters
    ----------
    out : Path
        The run directory.
    first : int
        Number of the first part this run writes.
    part_rows, part_bytes : int
        Size of a part.
    """

    def __init__(self, out: Path, first: int, part_rows: int, part_bytes: int) -> None:
        self.out, self.number = out, first
        self.part_rows, self.part_bytes = part_rows, part_bytes
        self.log = ProgressLog(log_path(out, first))
        #: Keys handed to a worker whose rows have not come back.
        self.in_flight: set[str] = set()

    def started(self, table: pa.Table) -> None:
        """Record the keys of a batch about to be handed to a worker."""
        keys = [str(k) for k in table.column("key").to_pylist()]
        self.log.started(keys)
        self.in_flight.update(keys)

    def add(self, table: pa.Table) -> None:
        """Log the rows of a finished batch."""
        self.log.add(table)
        self.in_flight.difference_update(str(k) for k in table.column("key").to_pylist())
        if self.log.rows >= self.part_rows or self.log.nbytes >= self.part_bytes:
            self.log.close()
            compact_log(self.out, self.number)
            self.number += 1
            self.log = ProgressLog(log_path(self.out, self.number))
            if self.in_flight:  # still running: the new log must know them
                self.log.started(sorted(self.in_flight))

    def tick(self) -> None:
        """Flush the log if its oldest row has waited long enough."""
        self.log.tick()

    def finish(self) -> None:
        """Turn the last log into a part (the run is complete)."""
        self.log.close()
        compact_log(self.out, self.number)

    def abort(self) -> None:
        """Flush the log to disk and leave it for ``resume``."""
        self.log.close()


@dataclass
class Recovered:
    """What an interrupted run left: the keys whose files had been handed
    to a worker, and the number of the next part."""

    started: set[str]
    next_part: int


def progress_files(out: Path) -> int:
    """How many finished parts and progress logs ``out`` holds."""
    parts = list((out / PARTS_DIR).glob("part-*.parquet"))
    logs = list((out / PROGRESS_DIR).glob("part-*.log"))
    return len(parts) + len(logs)


def recover(out: Path) -> Recovered:
    """Bring a run directory to a consistent state: remove temporary files
    and feature shards whose part never landed, and turn every progress log
    into its part (a log whose part exists was compacted already)."""
    for tmp in list(out.glob("**/.*.tmp")):
        tmp.unlink()
    parts = {part_number(p) for p in (out / PARTS_DIR).glob("part-*.parquet")}
    for shard in (out / FEATURES_DIR).glob("part-*.parquet"):
        if part_number(shard) not in parts:
            shard.unlink()  # its part never landed; its rows come from the log or run again
    started: set[str] = set()
    numbers = set(parts)
    for path in sorted((out / PROGRESS_DIR).glob("part-*.log")):
        n = part_number(path)
        numbers.add(n)
        if n in parts:
            started |= read_log(path).started
            path.unlink()
        else:
            started |= compact_log(out, n).started
    return Recovered(started, max(numbers, default=-1) + 1)


def read_parts(out: Path, columns: list[str] | None = None) -> pa.Table | None:
    """Every row of the finished parts of ``out``, the newest row per key
    (parts are numbered in the order they were written); None without
    parts."""
    tables = [
        pq.read_table(p, columns=columns) for p in sorted((out / PARTS_DIR).glob("part-*.parquet"))
    ]
    if not tables:
        return None
    return last_per_key(pa.concat_tables(tables, promote_options="permissive"))
