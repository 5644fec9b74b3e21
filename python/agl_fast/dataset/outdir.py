"""The temporary names a fetch owns in its folder.

Every file :func:`~agl_fast.dataset.fetch.fetch` writes is created by
:func:`agl_fast._internal.safe_files.create_new` (``O_CREAT | O_EXCL |
O_NOFOLLOW``; a name already taken, by a file or a symbolic link, is removed
first, never followed) and renamed into place within the folder: a rename
replaces a link, it does not write through it. Before a fetch starts, the
temporary names it owns (``.*.part``, ``.*.tmp``: :data:`TEMP_SUFFIXES`) are
removed whatever they are (:func:`remove_temporaries`), then the folder's
tree is checked (:func:`agl_fast._internal.safe_files.check_tree`): a
symbolic link whose target resolves outside the folder stops the fetch with
:class:`~agl_fast.exceptions.UnsafePathError`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["TEMP_SUFFIXES", "remove_temporaries"]

log = logging.getLogger("agl_fast.dataset")

#: Suffixes of the temporary files a fetch writes (hidden names: ``.{name}{suffix}``).
TEMP_SUFFIXES = (".part", ".tmp")


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
