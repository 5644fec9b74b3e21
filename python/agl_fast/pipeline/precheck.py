"""The metadata pass of a run: inputs that cannot be read are found before
any decoding, at file-system speed.

One ``stat`` per input path (no open, no read): a missing file, a path
that is not a regular file (a directory, FIFO, socket or device) and a file
this process may not read become error rows at once (and so does an empty
file: 0 bytes hold no audio, whatever the extension), so a manifest of a
million missing files is reported in seconds instead of being handed to
the decoders one batch at a time. A manifest row whose file was refused
(:data:`REFUSED_PATH`) has an empty path and its reason recorded with the
inputs; the run gives it its error row in the same pass. Other empty paths
(a manifest row without audio) are left to the batch function, which names
them.
"""

from __future__ import annotations

import os
import stat

__all__ = [
    "EMPTY_FILE",
    "FILE_NOT_FOUND",
    "FILE_UNREADABLE",
    "NOT_A_REGULAR_FILE",
    "REFUSED_PATH",
    "check_paths",
]

#: ``error_type`` of a row whose path does not exist.
FILE_NOT_FOUND = "FileNotFound"
#: ``error_type`` of a row whose path is a directory, FIFO, socket or device.
NOT_A_REGULAR_FILE = "NotARegularFile"
#: ``error_type`` of a row whose file this process may not read.
FILE_UNREADABLE = "FileUnreadable"
#: ``error_type`` of a manifest row whose file was refused before any
#: ``stat``: it leads outside the audio directory once symbolic links are
#: resolved, or its fetch folder's ``fetch.jsonl`` does not vouch for it
#: (:func:`agl_fast.manifest.resolve_audio`).
REFUSED_PATH = "RefusedPath"
#: ``error_type`` of a row whose file is a regular file of 0 bytes: the
#: type of the error :func:`agl_fast.load` raises for it, so that both entry
#: points agree.
EMPTY_FILE = "AudioDecodeError"

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _problem(path: str) -> tuple[str, str] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return FILE_NOT_FOUND, f"file not found: {path}"
    except NotADirectoryError:
        return FILE_NOT_FOUND, f"file not found (a parent is not a directory): {path}"
    except PermissionError:
        return FILE_UNREADABLE, f"permission denied: {path}"
    except OSError as exc:
        return FILE_UNREADABLE, f"cannot stat {path}: {exc.strerror or exc}"
    if stat.S_ISREG(st.st_mode):
        if not os.access(path, os.R_OK):
            return FILE_UNREADABLE, f"permission denied: {path}"
        if st.st_size == 0:
            return EMPTY_FILE, f"cannot decode {path}: empty file (0 bytes)"
        return None
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    return NOT_A_REGULAR_FILE, f"not a regular file ({kind}): {path}"


def check_paths(paths: list[str]) -> list[tuple[int, str, str]]:
    """Inputs that cannot be read, by position.

    Parameters
    ----------
    paths : list of str [length n]
        File paths (symbolic links are followed; ``""`` is skipped).

    Returns
    -------
    list of (int, str, str)
        ``(position, error_type, message)`` for each unreadable path, in
        input order: :data:`FILE_NOT_FOUND`, :data:`NOT_A_REGULAR_FILE`,
        :data:`FILE_UNREADABLE` or :data:`EMPTY_FILE`.
    """
    out = []
    for i, p in enumerate(paths):
        if p:
            bad = _problem(p)
            if bad is not None:
                out.append((i, *bad))
    return out
