"""Where the hooks leave a run's objects for the fixtures: pytest stash keys, one module for both.

``plugin`` fills the config's keys at configure time, ``fixtures`` and ``harness`` read them, and
neither imports the other for it. Two keys live with their readers: a scenario's result under
``report.reports.RESULT_KEY``, a test's fault injector under ``harness.INJECTOR_KEY``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from pytest_rollout_chaos.default_run import DefaultRun
    from pytest_rollout_chaos.harness import ChaosHarness
    from pytest_rollout_chaos.servers.policy.spec import PolicyServer
    from pytest_rollout_chaos.settings import ChaosSettings

SETTINGS_KEY: Final[pytest.StashKey[ChaosSettings]] = pytest.StashKey()
HARNESS_KEY: Final[pytest.StashKey[ChaosHarness]] = pytest.StashKey()
# The external policy (--rollout-chaos-policy-url) as found ready at session start.
EXTERNAL_POLICY_KEY: Final[pytest.StashKey[PolicyServer]] = pytest.StashKey()
# Set when ``pytest --rollout-chaos`` was given no paths: only scenario files are collected.
DEFAULT_RUN_KEY: Final[pytest.StashKey[DefaultRun]] = pytest.StashKey()

# Why a chaos fixture skips when the plugin is off.
NOT_ENABLED: Final = (
    "rollout-chaos is off: pass --rollout-chaos (or set rollout_chaos = true) to start servers"
)
