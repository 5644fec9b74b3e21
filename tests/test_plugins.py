"""Plugin discovery: the installed distributions' entry points are scanned
once per process, the environment variable on every lookup, and
``refresh_plugins`` scans again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def _dist(root: Path, name: str, module: str) -> None:
    """A minimal installed distribution on ``root`` whose ``agl_fast.plugins``
    entry point is ``module``, which records its import in a file."""
    (root / f"{module}.py").write_text(
        f"import os\nopen(os.environ['PLUGIN_LOG'], 'a').write('{module}\\n')\n"
    )
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[agl_fast.plugins]\n{name} = {module}\n")


SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from agl_fast import plugins
    from agl_fast.presets import recipe_names

    root = Path(sys.argv[1])
    log = Path(os.environ["PLUGIN_LOG"])
    recipe_names()
    print("first", log.read_text().split())
    # a distribution installed after the first scan: lookups do not rescan
    exec(sys.argv[2])
    _dist(root, "late_dist", "late_plugin")
    for _ in range(3):
        recipe_names()
    print("cached", log.read_text().split())
    print("refresh", plugins.refresh_plugins())
    print("after", log.read_text().split())
    # the environment variable is read on every lookup
    os.environ[plugins.ENV_VAR] = "env_plugin"
    recipe_names()
    print("env", log.read_text().split())
    """
)


def test_entry_points_are_scanned_once_and_on_refresh(tmp_path: Path) -> None:
    import inspect

    _dist(tmp_path, "early_dist", "early_plugin")
    (tmp_path / "env_plugin.py").write_text(
        "import os\nopen(os.environ['PLUGIN_LOG'], 'a').write('env_plugin\\n')\n"
    )
    log = tmp_path / "log.txt"
    log.write_text("")
    env = dict(os.environ, PLUGIN_LOG=str(log))
    env.pop("AGL_FAST_PLUGINS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), inspect.getsource(_dist)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert lines == [
        "first ['early_plugin']",
        "cached ['early_plugin']",
        "refresh ['late_plugin']",
        "after ['early_plugin', 'late_plugin']",
        "env ['early_plugin', 'late_plugin', 'env_plugin']",
    ]
