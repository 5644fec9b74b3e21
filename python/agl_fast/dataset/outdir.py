"""Files of a fetch folder that never lead out of it.

Every file :func:`~agl_fast.dataset.fetch.fetch` writes is created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` (a name already taken, by a file or a
symbolic link, is removed first, never followed) and renamed into place
within the folder: a rename replaces a link, it does not write through it.
Before a fetch starts, the folder's tree is checked: a symbolic link whose
target resolves outside the folder stops the fetch with
:class:`~agl_fast.exceptions.AglIOError`, and the temporary names a fetch
owns (``.*.part``, ``.*.tmp``) are removed whatever they are.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..exceptions import AglIOError

__all__ = [
    "TEMP_SUFFIXES",
    "check_tree",
    "create_new",
    "inside",
    "open_no_follow",
    "remove_temporaries",
    "sync_dir",
]

log = logging.getLogger("agl_fast.dataset")

#: Suffixes of the temporary files a fetch writes (hidden names: ``.{name}{suffix}``).
TEMP_SUFFIXES = (".part", ".tmp")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether ``path``, every symbolic link resolved, lies in ``root`` (also resolved)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def create_new(path: Path) -> int:
    """A new file at ``path``, open for writing (a file descriptor).

    Whatever holds the name (a stale file, a planted symbolic link, dangling
    or not) is removed first; the file is then created with ``O_EXCL`` and
    ``O_NOFOLLOW``, so the bytes written land in ``path`` and nowhere else.

    Raises
    ------
    AglIOError
        The name is a directory, or cannot be created.
    """
    for _ in range(2):
        try:
            return os.open(path, _CREATE | _CLOEXEC, 0o644)
        except FileExistsError:
            try:
                os.unlink(path)  # removes a link itself, never its target
            except IsADirectoryError:
                break
            except FileNotFoundError:
                pass
        except OSError as exc:
            raise AglIOError(f"cannot create {path}: {exc.strerror}") from None
    raise AglIOError(f"cannot create {path}: the name is taken by a directory")


def open_no_follow(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` (its last component).

    Raises
    ------
    AglIOError
        ``path`` is a symbolic link.
    """
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC, mode)
    except OSError:
        if os.path.islink(path):
            raise AglIOError(
                f"{path} is a symbolic link (to {os.readlink(path)}); refusing to follow it"
            ) from None
        raise


def sync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (where the platform allows)."""
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


def remove_temporaries(root: Path) -> int:
    """Delete the temporary files (``.*.part``, ``.*.tmp``) in ``root``,
    symbolic links included (the link goes, its target is not touched);
    returns how many were removed."""
    n = links = 0
    with os.scandir(root) as it:
        entries = [e for e in it if e.name.startswith(".") and e.name.endswith(TEMP_SUFFIXES)]
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            continue
        links += e.is_symlink()
        try:
            os.unlink(e.path)
        except FileNotFoundError:
            continue
        n += 1
    if links:
        log.warning("%s: removed %d symbolic link(s) at temporary file names", root, links)
    if n:
        log.info("%s: removed %d temporary file(s) of an interrupted run", root, n)
    return n


def check_tree(root: Path) -> None:
    """Refuse a folder that holds a symbolic link leading outside it.

    Raises
    ------
    AglIOError
        Naming the links (at most five) and where they lead.
    """
    bad: list[str] = []
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_symlink():
                    if not inside(e.path, root):
                        bad.append(f"{e.path} -> {os.readlink(e.path)}")
                elif e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise AglIOError(
            f"{root} holds {len(bad)} symbolic link(s) leading outside it "
            f"({'; '.join(sorted(bad)[:5])}{more}); a fetch writes only inside its folder: "
            "remove them or choose another --out"
        )
