"""Exceptions raised by agl-fast.

Every error the Rust core reports arrives as one of these classes, through a
single mapping in the binding. Each also derives from the matching builtin
(``ValueError``, ``OSError``) so existing ``except`` clauses keep working.
"""

from __future__ import annotations

import signal

__all__ = [
    "AglError",
    "AglIOError",
    "AudioDecodeError",
    "AudioFileNotFoundError",
    "CheckpointFormatError",
    "FingerprintFormatError",
    "InternalError",
    "InvalidCoordinatesError",
    "ModelStateError",
    "NonFiniteError",
    "NotAcceleratedError",
    "ParameterError",
    "ResourceLimitError",
    "RunInterrupted",
    "ShapeError",
    "UnsafePathError",
]


class AglError(Exception):
    """Base class of every agl-fast error."""


class ParameterError(AglError, ValueError):
    """A parameter or input is outside what the function accepts."""


class ShapeError(ParameterError):
    """An input array or batch has the wrong shape, length or channel count."""


class CheckpointFormatError(ParameterError):
    """A file given as a checkpoint is not one agl-fast reads: not a
    ``torch.save`` zip archive, a pickle that needs anything but tensors and
    plain containers (no code in it runs to find out), damaged, or without
    the entries its kind requires (see :mod:`agl_fast.torch.checkpoint`)."""


class FingerprintFormatError(ParameterError):
    """Bytes given as a fingerprint are not one: wrong magic or version, cut
    short, or values a fingerprint cannot hold."""


class InvalidCoordinatesError(ParameterError):
    """A latitude or longitude that is missing where required, not numeric,
    not finite or out of range (see :mod:`agl_fast.coords`)."""


class NonFiniteError(ParameterError):
    """An audio buffer holds NaN or infinite samples."""


class AudioDecodeError(AglError, OSError):
    """An audio file could not be decoded (the message names the path)."""


class AudioFileNotFoundError(AglError, FileNotFoundError):
    """An input audio file does not exist ("file not found: PATH"); a
    ``FileNotFoundError``, and not a decode error."""


class AglIOError(AglError, OSError):
    """A file or resource could not be read or written."""


class UnsafePathError(AglIOError):
    """A path that leaves its folder once symlinks are resolved: an input
    outside its root, or a symlink in an output folder that points outside
    it (see ``agl_fast._internal.safe_files``). Nothing was read or written."""


class ResourceLimitError(AglError, MemoryError):
    """An allocation was refused or would pass a resource limit (the message
    gives the size in bytes); the process itself keeps running."""


class NotAcceleratedError(AglError, AttributeError):
    """The drop-in compatibility layer does not provide this function."""


class ModelStateError(AglError, RuntimeError):
    """A model state (checkpoint) does not match the model it is loaded into
    (``RuntimeError``, as ``torch.nn.Module.load_state_dict`` raises)."""


class InternalError(AglError, RuntimeError):
    """A bug inside agl-fast (for example a panic in the Rust core); the
    same class whichever thread the failure happened on."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM after saving its finished work;
    ``signum`` says which (the command line exits ``128 + signum``). A
    ``KeyboardInterrupt``, so code that stops on Ctrl-C stops on it."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        try:
            name = signal.Signals(self.signum).name
        except ValueError:
            name = f"signal {self.signum}"
        super().__init__(f"interrupted by {name}")
