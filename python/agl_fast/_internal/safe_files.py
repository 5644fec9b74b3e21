"""Files that stay inside their folder, judged once symlinks are resolved.

* Inputs: :func:`resolve_inside` joins a relative name to its root and
  refuses the result unless, symlinks resolved, it lies inside the root
  (``allow_outside=True`` is the explicit way to follow links out).
* Output folders: :func:`check_tree` refuses a folder holding a symlink
  that points outside it (a dangling one included: its target is where a
  write through it would land).
* Output files: :func:`atomic_file` and :func:`write_atomic` write through a
  temporary created in the target's folder with ``O_CREAT | O_EXCL |
  O_NOFOLLOW`` (a name planted there in advance, symlink or not, is never
  opened) and renamed over the target, which replaces a symlink instead of
  writing through it; a target that is a symlink pointing outside the root,
  or a folder that resolves outside it, is refused. :func:`open_append`
  appends with ``O_NOFOLLOW``.

Every refusal is an :class:`~agl_fast.exceptions.UnsafePathError` raised
before anything is read or written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..exceptions import UnsafePathError

__all__ = [
    "atomic_file",
    "check_target",
    "check_tree",
    "is_inside",
    "open_append",
    "resolve_inside",
    "write_atomic",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC

PathLike = str | os.PathLike[str]


def _real(path: PathLike) -> Path:
    return Path(os.path.realpath(path))


def is_inside(path: PathLike, root: PathLike) -> bool:
    """Whether ``path``, symlinks resolved, is ``root`` (resolved) or below it."""
    return _real(path).is_relative_to(_real(root))


def resolve_inside(
    root: PathLike, name: PathLike, *, what: str = "file", allow_outside: bool = False
) -> Path:
    """``root / name``, refused unless it stays inside ``root`` once symlinks
    (and ``..``) are resolved.

    Parameters
    ----------
    root : path
        The folder the input must come from.
    name : path
        A path relative to ``root``.
    what : str
        What the file is, for the message (``"RIR"``, ``"source"``).
    allow_outside : bool
        Follow links out of ``root`` (the explicit opt-out): no check.

    Returns
    -------
    Path
        ``root / name`` (not resolved).

    Raises
    ------
    UnsafePathError
        The path resolves outside ``root``.
    """
    path = Path(root) / name
    if not allow_outside:
        real, base = _real(path), _real(root)
        if not real.is_relative_to(base):
            raise UnsafePathError(
                f"{what} {path} resolves to {real}, outside its root {base} (a symlink or '..' "
                "leaving the root; allow it explicitly to follow such links)"
            )
    return path


def check_tree(root: PathLike) -> None:
    """Refuse an output folder holding a symlink that points outside it.

    Walks ``root`` (symlinks are not followed); a link whose target, resolved,
    is outside ``root`` raises. A missing ``root`` passes (nothing to check).

    Raises
    ------
    UnsafePathError
        Naming the first such link and its target.
    """
    base = _real(root)
    for top, dirs, files in os.walk(base):
        for name in (*dirs, *files):
            p = os.path.join(top, name)
            if os.path.islink(p) and not _real(p).is_relative_to(base):
                raise UnsafePathError(
                    f"{p} is a symlink to {os.readlink(p)}, outside the output folder {base}; "
                    "remove it (nothing was written)"
                )


def check_target(path: PathLike, root: PathLike | None = None) -> None:
    """Refuse to write ``path`` when its folder resolves outside ``root``
    (default: its own folder) or when it is a symlink pointing outside it."""
    p = Path(path)
    base = _real(p.parent if root is None else root)
    if not _real(p.parent).is_relative_to(base):
        raise UnsafePathError(f"{p.parent} resolves to {_real(p.parent)}, outside {base}")
    if os.path.islink(p) and not _real(p).is_relative_to(base):
        raise UnsafePathError(
            f"{p} is a symlink to {os.readlink(p)}, outside {base}; remove it (nothing was written)"
        )


@contextlib.contextmanager
def atomic_file(
    path: PathLike,
    mode: str = "wb",
    *,
    root: PathLike | None = None,
    fsync: bool = False,
    encoding: str = "utf-8",
) -> Iterator[IO[Any]]:
    """A new file that becomes ``path`` when the block ends without error.

    Parameters
    ----------
    path : path
        The file to write.
    mode : str
        ``"wb"`` or ``"w"`` (text, ``encoding``).
    root : path, optional
        The output folder ``path`` must stay in (default: its own folder).
    fsync : bool
        Flush the file and its folder to disk before and after the rename.

    Raises
    ------
    UnsafePathError
        ``path`` is a symlink pointing outside ``root``, or its folder
        resolves outside it; nothing is written.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    p = Path(path)
    check_target(p, root)
    tmp = p.with_name(f".{p.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, _NEW, 0o666)
    try:
        with os.fdopen(fd, mode, encoding=None if mode == "wb" else encoding) as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        check_target(p, root)  # again: a link planted while the file was written
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        dfd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def write_atomic(
    path: PathLike, data: bytes | str, *, root: PathLike | None = None, fsync: bool = False
) -> None:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` through :func:`atomic_file`."""
    with atomic_file(path, "wb", root=root, fsync=fsync) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def open_append(path: PathLike, *, root: PathLike | None = None) -> BinaryIO:
    """``path`` opened to append (created if missing), never through a symlink.

    Raises
    ------
    UnsafePathError
        ``path`` is a symlink (or its folder resolves outside ``root``).
    """
    p = Path(path)
    check_target(p, root)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{p} is a symlink; refusing to append through it") from exc
        raise
    return os.fdopen(fd, "ab")
