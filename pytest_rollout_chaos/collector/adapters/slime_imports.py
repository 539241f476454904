"""The slime modules the ``slime`` adapter imports, and the stubs that let them import here.

slime imports ``ray``, ``sglang_router`` and ``transformers`` at module level in paths the adapter
does not use; exactly those three are stubbed, each only when it cannot be imported, as slime's
own CPU tests do (``tests/plugin_contracts/_shared.py::install_stubs``). ``slime.ray.rollout`` also
imports three names from SGLang (memory-type tags, ``ServerArgs``, ``kill_process_tree``);
where SGLang is not installed those are stubbed too, the two callables refusing to run, and nothing
else. ``RolloutManager`` is a Ray actor class, so Ray itself must be installed; the class is read
from under the actor class ``@ray.remote`` made.
With the stub, ``AutoTokenizer.from_pretrained`` returns a bare object, so response text is
decoded with the context's tokenizer, never slime's. The checkpoint slime loads is the bundled
tiny model's directory; nothing reads its tokenizer on this path.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Final

ROLLOUT_MODULE: Final = "slime.rollout.sglang_rollout"
TRAJECTORY_MODULE: Final = "slime.agent.trajectory"
MANAGER_MODULE: Final = "slime.ray.rollout"
TYPES_MODULE: Final = "slime.rollout.base_types"
STUBBED: Final = ("ray", "sglang_router", "transformers", "sglang")
SGLANG_MODULES: Final = (
    "sglang",
    "sglang.srt",
    "sglang.srt.constants",
    "sglang.srt.server_args",
    "sglang.srt.utils",
)
SGLANG_ROUTER_VERSION: Final = "0.2.3"  # what slime's own stub says


def install_stubs() -> list[str]:
    """Stub ``ray``, ``sglang_router`` and ``transformers`` where they cannot be imported, exactly as
    slime's ``tests/plugin_contracts/_shared.py::install_stubs`` builds them, and ``sglang``'s three
    names ``slime.ray.rollout`` imports (``_stub_sglang``); return the modules stubbed."""
    stubbed = []
    for name in STUBBED:
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        module = types.ModuleType(name)
        if name == "ray":
            module._private = types.SimpleNamespace(  # type: ignore[attr-defined]
                services=types.SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1")
            )
        elif name == "sglang_router":
            module.__version__ = SGLANG_ROUTER_VERSION  # type: ignore[attr-defined]
        elif name == "sglang":
            stubbed += _stub_sglang()
            continue
        else:
            module.AutoTokenizer = type(  # type: ignore[attr-defined]
                "AutoTokenizer", (), {"from_pretrained": staticmethod(lambda *a, **k: object())}
            )
            module.AutoProcessor = type(  # type: ignore[attr-defined]
                "AutoProcessor", (), {"from_pretrained": staticmethod(_no_processor)}
            )
            module.PreTrainedTokenizerBase = type("PreTrainedTokenizerBase", (), {})  # type: ignore[attr-defined]
            module.ProcessorMixin = type("ProcessorMixin", (), {})  # type: ignore[attr-defined]
        sys.modules[name] = module
        stubbed.append(name)
    return stubbed


def _no_processor(*args: object, **kwargs: object) -> object:
    raise OSError("transformers is stubbed: no processor")


def _stub_sglang() -> list[str]:
    """The three names ``slime.ray.rollout`` and the SGLang engine module import from SGLang at
    module level (memory-type tags, ``ServerArgs``, ``kill_process_tree``); the train-data path
    uses none of them, and the stub's ``ServerArgs`` and ``kill_process_tree`` refuse to run."""
    modules = {name: types.ModuleType(name) for name in SGLANG_MODULES}
    modules["sglang"].srt = modules["sglang.srt"]  # type: ignore[attr-defined]
    constants = modules["sglang.srt.constants"]
    constants.GPU_MEMORY_TYPE_WEIGHTS = "weights"  # type: ignore[attr-defined]
    constants.GPU_MEMORY_TYPE_KV_CACHE = "kv_cache"  # type: ignore[attr-defined]
    constants.GPU_MEMORY_TYPE_CUDA_GRAPH = "cuda_graph"  # type: ignore[attr-defined]
    modules["sglang.srt.server_args"].ServerArgs = type(  # type: ignore[attr-defined]
        "ServerArgs", (), {"__init__": _no_sglang}
    )
    modules["sglang.srt.utils"].kill_process_tree = _no_sglang  # type: ignore[attr-defined]
    for name, module in modules.items():
        sys.modules[name] = module
    return list(modules)


def _no_sglang(*args: object, **kwargs: object) -> None:
    raise RuntimeError("sglang is stubbed: no SGLang server is started or stopped here")
