"""A client's own record of the requests it sends on a link: what shows a fault no server saw.

The fault layer records every request that reaches it, but a link taken ``down`` refuses
connections before the layer, so only the client's own record shows the requests the fault
failed. The Gym client keeps one of each row's ``/run`` (``run`` events); a collector's own loop
standing in for part of the Gym stack keeps this one of each request it sends on a link
(``request`` events under the ``collector`` source: ``invoke``, then ``ok`` once answered, with
any status, or ``fail`` naming the error, paired by request id), as the ``skyrl`` adapter's
environment does on ``collector->resources``. ``faults.touch.client_failures`` counts both. No
invariant reads it: they judge by the servers' records.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Final

from pytest_rollout_chaos.history import History

SOURCE: Final = "collector"
OP: Final = "request"
VIA: Final = "via"  # the link a request went on (not ``link``: that names the fault layer's records)
_NUMBERS: Final = itertools.count()


@contextlib.contextmanager
def recorded(history: History | None, via: str, route: str, row: object) -> Iterator[None]:
    """One request on link ``via`` to ``route`` for ``row``: its ``invoke``, then ``ok`` when the
    block ends (the answer read), or ``fail`` naming what it raised, which goes on unchanged.
    Nothing is recorded without a History."""
    if history is None:
        yield
        return
    request = f"{via}#{next(_NUMBERS)}"
    data = {VIA: via, "route": route, "row": row}
    history.append(SOURCE, "invoke", OP, data, request_id=request)
    try:
        yield
    except BaseException as error:
        history.append(
            SOURCE, "fail", OP, {**data, "error": f"{type(error).__name__}: {error}"}, request_id=request
        )
        raise
    history.append(SOURCE, "ok", OP, data, request_id=request)
