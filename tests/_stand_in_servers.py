"""A child test that "starts" two servers through the session's harness, for the tests of what is
printed as servers start (the terminal, the gate's progress)."""

from __future__ import annotations

# Two servers "started" through the session's harness, as the stack builder starts them: a
# stand-in process that is ready at once (the real ones take seconds).
STARTS_SERVERS = """

def test_starts_two_servers(request):
    harness = request.config.pluginmanager.get_plugin("rollout-chaos-harness")

    class Ready:
        def __init__(self, name):
            self.name, self.log_path = name, f"{name}.log"

        def start(self):
            pass

        def stop(self):
            pass

    for name in ("policy", "gym_model"):
        harness.adopt(Ready(name))
"""
