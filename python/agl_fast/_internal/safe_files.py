"""Files that stay inside their folder, judged once symlinks are resolved.

* Inputs: :func:`resolve_inside` joins a relative name to its root and
  refuses the result unless, symlinks resolved, it lies inside the root
  (``allow_outside=True`` is the explicit way to follow links out);
  :func:`is_inside` is the test itself.
* Output folders: :func:`check_tree` refuses a folder holding symlinks
  that point outside it (a dangling one included: its target is where a
  write through it would land), naming them.
* Output files: :func:`create_new` creates a file with ``O_CREAT | O_EXCL |
  O_NOFOLLOW`` after removing whatever held the name (a planted symlink is
  removed, never followed). :func:`atomic_file` and :func:`write_atomic`
  write through such a temporary in the target's folder, renamed over the
  target, which replaces a symlink instead of writing through it; a target
  that is a symlink pointing outside the root, or a folder that resolves
  outside it, is refused (:func:`check_target`). :func:`open_no_follow`
  opens without following a symlink at the last component, and
  :func:`open_append` appends that way; :func:`sync_dir` makes a rename
  durable.

Every refusal is an :class:`~agl_fast.exceptions.UnsafePathError` (an
:class:`~agl_fast.exceptions.AglIOError`) raised before anything is read or
written.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..exceptions import AglIOError, UnsafePathError

__all__ = [
    "atomic_file",
    "check_target",
    "check_tree",
    "create_new",
    "is_inside",
    "open_append",
    "open_no_follow",
    "resolve_inside",
    "sync_dir",
    "write_atomic",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
#: Symlinks named in a :func:`check_tree` refusal at most (all are counted).
_LINKS_NAMED = 5

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
    is outside ``root`` (a dangling one included) is refused. A link that
    stays inside is fine; a missing ``root`` passes (nothing to check).

    Raises
    ------
    UnsafePathError
        Naming the links (at most five, sorted) and where they lead; nothing
        was written.
    AglIOError
        A folder of the tree cannot be listed (so it cannot be checked).
    """
    base = _real(root)
    bad: list[str] = []
    stack = [str(root)]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise AglIOError(f"cannot check {top}: {exc.strerror or exc}") from None
        for e in entries:
            if e.is_symlink():
                if not _real(e.path).is_relative_to(base):
                    bad.append(f"{e.path} -> {os.readlink(e.path)}")
            elif e.is_dir(follow_symlinks=False):
                stack.append(e.path)
    if bad:
        n = len(bad)
        more = f" and {n - _LINKS_NAMED} more" if n > _LINKS_NAMED else ""
        raise UnsafePathError(
            f"{root} holds {n} symlink(s) leading outside it "
            f"({'; '.join(sorted(bad)[:_LINKS_NAMED])}{more}); nothing is written through "
            "them: remove them or choose another output folder"
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


def create_new(path: PathLike, mode: int = 0o644) -> int:
    """A new file at ``path``, open for writing (a file descriptor).

    Whatever holds the name (a stale file, a planted symlink, dangling or
    not) is removed first (a link itself, never its target); the file is
    then created with ``O_EXCL`` and ``O_NOFOLLOW``, so the bytes written
    land in ``path`` and nowhere else.

    Raises
    ------
    AglIOError
        The name is a directory, or cannot be created.
    """
    for _ in range(2):
        try:
            return os.open(path, _NEW, mode)
        except FileExistsError:
            try:
                os.unlink(path)
            except IsADirectoryError:
                break
            except FileNotFoundError:
                pass
        except OSError as exc:
            raise AglIOError(f"cannot create {path}: {exc.strerror}") from None
    raise AglIOError(f"cannot create {path}: the name is taken by a directory")


def open_no_follow(path: PathLike, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symlink at ``path`` (its last component).

    Raises
    ------
    UnsafePathError
        ``path`` is a symlink (nothing was opened through it).
    """
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError:
        if os.path.islink(path):
            raise UnsafePathError(
                f"{path} is a symlink (to {os.readlink(path)}); refusing to open through it"
            ) from None
        raise


def sync_dir(path: PathLike) -> None:
    """Make a rename in the folder ``path`` durable, where the platform allows
    (a folder that cannot be opened or synced is left as it is)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(
    path: PathLike,
    mode: str = "wb",
    *,
    root: PathLike | None = None,
    fsync: bool = False,
    encoding: str = "utf-8",
    newline: str | None = None,
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
    encoding, newline : str
        Of a text file (as :func:`open` takes them).

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
    fd = create_new(tmp, 0o666)
    try:
        text = mode == "w"
        with os.fdopen(
            fd, mode, encoding=encoding if text else None, newline=newline if text else None
        ) as fh:
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
        sync_dir(p.parent)


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
    return os.fdopen(open_no_follow(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666), "ab")
