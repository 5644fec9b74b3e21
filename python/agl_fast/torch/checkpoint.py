"""Checkpoint files that hold data, never code.

A run folder is copied between machines and shared on clusters: resuming
from it must not run anything it holds. Every checkpoint agl-fast writes
goes through :func:`write_checkpoint` and every one it reads through
:func:`read_checkpoint`:

* written: a ``torch.save`` zip archive of tensors and plain containers
  (``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool``,
  ``None``); anything else in the state is a bug (:class:`InternalError`),
  found before the file is written; the file appears whole (written beside
  it, then renamed);
* read: ``torch.load(..., weights_only=True)``, passed explicitly, so
  ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` does not change it (torch lets that
  variable decide only where the caller passed nothing). A file of the
  project's own format must also be a zip archive written by ``torch.save``
  (not a bare pickle, not a TorchScript archive) and hold a dict with the
  entries its kind requires. Anything else is a
  :class:`~agl_fast.exceptions.CheckpointFormatError`, raised before any
  object of the file is built beyond tensors and plain containers.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from ..exceptions import CheckpointFormatError, InternalError, ModelStateError

__all__ = ["read_checkpoint", "write_checkpoint"]

_PLAIN = (str, int, float, bool, type(None))
#: The longest error text of torch quoted in a message.
_SHOWN = 300


def _check_plain(value: Any, where: str) -> None:
    """Raise InternalError where ``value`` holds anything but tensors and
    plain containers."""
    if isinstance(value, _PLAIN) or isinstance(value, torch.Tensor):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, (str, int)):
                raise InternalError(f"checkpoint key {where}[{k!r}] is a {type(k).__name__}")
            _check_plain(v, f"{where}[{k!r}]")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_plain(v, f"{where}[{i}]")
        return
    raise InternalError(
        f"checkpoint entry {where} is a {type(value).__name__}: only tensors and plain "
        "containers are written"
    )


def write_checkpoint(state: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` as a ``torch.save`` zip archive.

    Parameters
    ----------
    state : mapping
        Tensors and plain containers only (checked first).
    path : str or Path
        The file; written as ``.NAME.tmp`` in the same folder, then renamed.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InternalError
        When ``state`` holds anything else (a numpy array, a module, a
        function): nothing is written.
    """
    path = Path(path)
    _check_plain(dict(state), "state")
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(dict(state), tmp)
    os.replace(tmp, path)
    return path


def _check_archive(path: Path) -> None:
    """A zip archive of ``torch.save`` (one folder holding ``data.pkl``),
    not a TorchScript one; CheckpointFormatError otherwise."""
    if not zipfile.is_zipfile(path):
        raise CheckpointFormatError(
            f"unreadable checkpoint {path}: not a torch.save zip archive (a bare pickle or "
            "another file); it is not unpickled"
        )
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CheckpointFormatError(f"unreadable checkpoint {path}: {exc}") from exc
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) != 1 or f"{next(iter(tops))}/data.pkl" not in names:
        raise CheckpointFormatError(
            f"unreadable checkpoint {path}: not a torch.save archive (no single folder "
            "holding data.pkl)"
        )
    if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        raise CheckpointFormatError(
            f"unreadable checkpoint {path}: a TorchScript archive (holds code); not loaded"
        )


def read_checkpoint(
    path: str | Path,
    *,
    required: Iterable[str] = (),
    own_format: bool = True,
    allow: Iterable[type] = (),
) -> dict[str, Any]:
    """A checkpoint's state: tensors and plain containers, no code run.

    Parameters
    ----------
    path : str or Path
        The file.
    required : iterable of str
        Entries the state must have.
    own_format : bool
        The file must be a zip archive of ``torch.save`` (what
        :func:`write_checkpoint` writes); False for released weights of
        other projects, which torch's legacy format may hold.
    allow : iterable of type
        Classes of plain data (no code) that a released file may hold
        besides, as ``argparse.Namespace`` in released AudioMAE files;
        passed to ``torch.serialization.safe_globals``.

    Returns
    -------
    dict
        The state, on the CPU.

    Raises
    ------
    CheckpointFormatError
        When the file is missing, is not a ``torch.save`` zip archive (with
        ``own_format``), needs anything but tensors, plain containers and
        ``allow`` to load, is damaged, is not a dict (with ``own_format``),
        or lacks a ``required`` entry.
    ModelStateError
        When released weights (``own_format=False``) load but are not a dict.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointFormatError(f"no checkpoint file at {path}")
    if own_format:
        _check_archive(path)
    try:
        with torch.serialization.safe_globals(list(allow)):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch's unpickler raises many types for a bad file
        why = " ".join(str(exc).split())[:_SHOWN]
        raise CheckpointFormatError(f"unreadable checkpoint {path}: {why}") from exc
    if not isinstance(state, dict):
        # Released weights that load but are no state dict do not fit a model.
        error = CheckpointFormatError if own_format else ModelStateError
        raise error(f"unreadable checkpoint {path}: expected a dict, got {type(state).__name__}")
    missing = [k for k in required if k not in state]
    if missing:
        raise CheckpointFormatError(
            f"unreadable checkpoint {path}: not this kind of checkpoint (no {missing})"
        )
    return state
