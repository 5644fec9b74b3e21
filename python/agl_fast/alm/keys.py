"""API keys: from environment variables or a private config file, never from
arguments, and scrubbed from every message that leaves the harness
(:mod:`agl_fast.remote.redact`).

The config file (``$AGL_FAST_KEYS`` or ``~/.config/agl-fast/keys.ini``) is an
INI file with one section per provider::

    [openai]
    api_key = sk-...

It must not be readable by group or others (mode 600), like ``~/.netrc``.
"""

from __future__ import annotations

import configparser
import os
import stat
from pathlib import Path

from ..exceptions import ParameterError

ENV_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "dashscope": ("DASHSCOPE_API_KEY",),
    "vllm": ("VLLM_API_KEY",),
}


def config_path() -> Path:
    env = os.environ.get("AGL_FAST_KEYS")
    return Path(env) if env else Path.home() / ".config" / "agl-fast" / "keys.ini"


def resolve_key(provider: str, required: bool = True) -> str | None:
    """The key of ``provider``: its environment variables first, then the config file.

    Raises :class:`ParameterError` (naming the variables, never a value) when
    a required key is missing or the config file is readable by others.
    """
    names = ENV_VARS.get(provider, (f"{provider.upper()}_API_KEY",))
    for name in names:
        v = os.environ.get(name, "").strip()
        if v:
            return v
    path = config_path()
    if path.is_file():
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ParameterError(
                f"key file {path} is readable by group or others; run: chmod 600 {path}"
            )
        cp = configparser.ConfigParser()
        cp.read(path, encoding="utf-8")
        if cp.has_option(provider, "api_key"):
            v = cp.get(provider, "api_key").strip()
            if v:
                return v
    if required:
        raise ParameterError(
            f"no API key for provider {provider!r}: set {' or '.join(names)} "
            f"or add [{provider}] api_key to {path}"
        )
    return None
