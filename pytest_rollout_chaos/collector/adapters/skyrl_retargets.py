"""The catalog's faults on the parts of the Gym stack SkyRL's loop replaces, for the ``skyrl``
adapter: each moved onto the request of SkyRL's loop doing that part's job (``RETARGETS``), or not
moved, and why (``UNMOVED``); and the requests a trigger on the model server counts there
(``RETRIGGERS``).

``engine.retarget`` applies them, each move recorded in the History. SkyRL's loop has no NeMo Gym
agent and no model server: it runs each trajectory itself. A catalog fault aimed at them acts on
the request of SkyRL's loop doing the same job, so it really meets SkyRL's code: the agents' model
link (``agent->model``) is its inference client's (``collector->policy``), and so is the model
server's to the policy (``model->policy``) for a slowed call, the two hops of a model call being
its one; and a trigger on the model server's nth request fires on the policy's nth, each model call
of its loop being one request there; an agent's link to the
resources server, and the collector's to the agents, are its environment's
(``collector->resources``); the one ``/run`` that starts a trajectory is its environment's ``init``
(``/seed_session``, inside ``agent_loop``), for a failing or hanging trajectory; the logprobs an
agent relays are those ``/inference/v1/generate`` answers; the policy's chat route is that generate
route; a model server's answer that no longer parses is that generate answer (only styles that
leave nothing to parse: one read into its fields has no counterpart). Not moved, and skipping by
reach, saying so: the agents' processes (SkyRL has none: killing, freezing or partitioning one has
no counterpart), the model server's other faults and its link's but a latency, ``prefix_drift``
(SkyRL keeps its token ids itself: no answer carries prompt ids to drift), the ``/run`` answer's
own fields (``malformed_json`` styles) and the Gym client; so do the stack settings SkyRL's loop
never meets (the model server's re-rendering, ``splice_prefix: false``; the verifier's rescoring
of an attempt thrown away, ``rescore_bonus``).
"""

from __future__ import annotations

from typing import Final

from pytest_rollout_chaos.collector.abilities import Retarget, Retrigger
from pytest_rollout_chaos.servers.faultlayer.rewrite import UNPARSABLE_STYLES
from pytest_rollout_chaos.servers.gym.tasks import AGENT_FOR_TASK

MODEL_CALLS: Final = (
    "SkyRL's agent_loop asks the policy itself, token in, token out, through its RemoteInferenceClient "
    "over the collector->policy link"
)
_ON_REQUESTS: Final = ("latency", "timeout", "reset_peer", "bandwidth", "slow_close", "limit_data", "slicer")
"""The link faults that act on requests the fault layer then records. Not ``down``: it refuses
connections before the layer, and only a client's own record shows what it failed: SkyRL's
inference client keeps none, the adapter's environment does (``skyrl_env``), so a ``down`` moves
onto the environment's link only."""
RETARGETS: Final = (
    Retarget(
        "agent->model",
        "collector->policy",
        f"the trajectory's model calls: a NeMo Gym agent makes them through the model server; {MODEL_CALLS}",
        kinds=_ON_REQUESTS,
    ),
    Retarget(
        "model->policy",
        "collector->policy",
        "a slowed model call: NeMo Gym's model server makes it to the policy for an agent; "
        f"{MODEL_CALLS}, so its one link is both hops (a latency on each adds up there)",
        kinds=("latency",),
    ),
    Retarget(
        "agent->resources",
        "collector->resources",
        "the trajectory's calls to the resources server: a NeMo Gym agent makes them; here SkyRL's "
        "environment (skyrl_env, stepped by agent_loop in SkyRL's environment threads) makes them",
        kinds=(*_ON_REQUESTS, "down"),
    ),
    Retarget(
        "collector->agent",
        "collector->resources",
        "the collector's own requests that run a trajectory outside the model: NeMo Gym's /run; here "
        "SkyRL's environment's /seed_session, tool calls and /verify",
        kinds=_ON_REQUESTS,
    ),
    Retarget(
        "agent",
        "resources",
        "one request per trajectory, at its start, that fails or stalls that trajectory alone: NeMo "
        "Gym's /run; here the environment's init in SkyRL's agent_loop (skyrl_env's /seed_session)",
        kinds=("trajectory_exception", "hang", "http_error"),
        route="/run",
        to_route="/seed_session",
    ),
    Retarget(
        "agent",
        "policy",
        f"the model's answers and their logprobs: a NeMo Gym agent relays them in /run; {MODEL_CALLS} "
        "(/inference/v1/generate)",
        kinds=("nan_logprobs", "logprob_drift"),
        to_route="/inference/v1/generate",
    ),
    Retarget(
        "model",
        "policy",
        "a model call's answer that does not parse: NeMo Gym's model server hands the agent the "
        f"policy's answer as a Responses answer; {MODEL_CALLS}, and reads the policy's "
        "/inference/v1/generate answer itself (RemoteInferenceClient._post parses it with orjson)",
        kinds=("malformed_json",),
        route="/v1/responses",
        to_route="/inference/v1/generate",
        styles=UNPARSABLE_STYLES,
    ),
    Retarget(
        "policy",
        "policy",
        "a model call: the chat route's, as NeMo Gym's model server or a native collector asks; "
        f"{MODEL_CALLS} (/inference/v1/generate)",
        kinds=("nan_logprobs", "logprob_drift", "http_error"),
        route="/v1/chat/completions",
        to_route="/inference/v1/generate",
    ),
)
"""The catalog's faults on the Gym stack's parts SkyRL's loop replaces, moved onto the request of
its loop that does that part's job (``engine.retarget``); the rest (the agents' processes, the
model server but for an answer that does not parse or a slowed call, the Gym client, the /run
answer's own fields) are not moved, and skip by reach."""
RETRIGGERS: Final = (
    Retrigger(
        "model",
        "policy",
        "the model calls counted: a NeMo Gym agent sends each to the model server (/v1/responses); "
        f"{MODEL_CALLS}, one /inference/v1/generate each (a re-sent one counts again, as an agent's "
        "re-sent model call does on the model server; its /finish_session at a trajectory's end is "
        "no model call)",
        route="/inference/v1/generate",
    ),
)
"""Which requests a trigger on the model server counts on SkyRL (``engine.retarget``): the policy's."""
_NO_AGENT: Final = (
    "it acts on a NeMo Gym agent's server; SkyRL runs each trajectory as an agent_loop task in the "
    "trainer's own process, so nothing of SkyRL's stands where the agent's process does to be killed, "
    "frozen, cut off or moved"
)
_NO_MODEL_SERVER: Final = (
    "it acts on NeMo Gym's model server or its link to the policy; SkyRL's client asks the policy "
    "itself (collector->policy), with no model server between to meet it: to retry a cut call, or "
    "answer the agent for it (only a slowed call is the same on SkyRL's one link, and moves there)"
)
UNMOVED: Final = {
    "prefix_drift": "it drifts the prompt ids an answer reports; SkyRL keeps each trajectory's token ids "
    "itself (token in, token out): no answer it gets reports prompt ids",
    "malformed_json": "it breaks a NeMo Gym answer's own fields or body (a /run result, a model server's "
    "Responses answer read into its fields); SkyRL's loop gets no such answer (only a model answer that "
    f"no longer parses, style {' or '.join(UNPARSABLE_STYLES)}, is moved: onto its generate answer)",
    "short_results": "it shortens what NeMo Gym's client hands back; SkyRL's loop uses no Gym client",
    "down": "it refuses connections before the fault layer records them, and only a client's "
    "own record shows the requests it failed: SkyRL's inference client keeps none, so nothing would "
    "show it acted (a down on an agent's link to the resources server moves onto the environment's, "
    "whose requests skyrl_env records)",
    **dict.fromkeys(("agent", *AGENT_FOR_TASK.values()), _NO_AGENT),
    "model": _NO_MODEL_SERVER,
    "model->policy": _NO_MODEL_SERVER,
    "stack.policy.splice_prefix": "it makes NeMo Gym's model server re-render every earlier turn through "
    "the chat template, so that prompt ids drift; SkyRL's agent_loop keeps each trajectory's token ids "
    "itself and asks the policy token in, token out, with no model server between, so no prompt of its "
    "is re-rendered (its own re-tokenizing paths, a custom generator.chat_template or "
    "step_wise_trajectories, are off by default)",
    "stack.rescore_bonus": "it makes the verifier score a row higher each time it scores it again, to "
    "tell a kept attempt's reward from a thrown-away one's; SkyRL's environment verifies each trajectory "
    "once, at its end, and its RemoteInferenceClient re-sends a generate whose answer it cannot parse "
    "(a NaN logprob) before the environment sees it, so no attempt of a row is scored and thrown away",
}
"""Why the catalog's other faults are not moved (``abilities.unmoved``): their skips say so."""
