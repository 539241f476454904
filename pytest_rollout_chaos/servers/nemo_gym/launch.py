"""Child side: run one real NeMo Gym server (``app.py`` from the installed wheel) in this process.

Runs under the NeMo Gym interpreter (its own virtual environment with ``nemo_gym``), as a script
by path, so it imports nothing from this package and runs on any Python NeMo Gym runs on. The
resolved global config comes in ``NEMO_GYM_CONFIG_DICT`` and the instance name in
``NEMO_GYM_CONFIG_PATH``, as ``gym env start`` passes them. Two changes to how ``gym env start``
runs a server, both about the process and not the protocol:

* ``initialize_ray`` is replaced by a no-op: none of the servers this backend starts uses Ray,
  and a Ray cluster per server would cost seconds and hundreds of MB each (0.4 calls it for
  every server; later versions only for servers that do not declare ``ray_enabled = False``);
* the process exits when its parent dies (it polls its parent pid), so nothing outlives pytest.

Usage: ``python launch.py SERVER_DIR`` where SERVER_DIR is relative to site-packages, such as
``responses_api_models/vllm_model`` or ``environment_servers/legacy_agent``.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
import threading
import time
from typing import Any

_PARENT_POLL_S = 0.5


def _exit_with_parent(parent_pid: int) -> None:
    while True:
        time.sleep(_PARENT_POLL_S)
        if os.getppid() != parent_pid:
            os._exit(1)


def _server_dir(relative: str) -> str:
    top, _, rest = relative.partition("/")
    package = importlib.import_module(top)
    for root in list(package.__path__):
        candidate = os.path.join(root, rest)
        if os.path.isfile(os.path.join(candidate, "app.py")):
            return candidate
    raise SystemExit(
        f"no {relative}/app.py in {list(package.__path__)}: this nemo-gym wheel does not ship that server"
    )


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} SERVER_DIR (e.g. responses_api_models/vllm_model)")
    for name in ("NEMO_GYM_CONFIG_DICT", "NEMO_GYM_CONFIG_PATH"):
        if not os.environ.get(name):
            raise SystemExit(f"{name} is not set; the supervisor passes the resolved config in it")
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    server_dir = _server_dir(sys.argv[1])
    server_utils: Any = importlib.import_module("nemo_gym.server_utils")
    server_utils.initialize_ray = lambda: None
    os.chdir(server_dir)
    sys.path.insert(0, server_dir)
    sys.argv = [os.path.join(server_dir, "app.py")]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
