"""Choosing the NeMo Gym interpreter and building its config: no NeMo Gym needed for these."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_rollout_chaos.servers.nemo_gym import config
from pytest_rollout_chaos.servers.nemo_gym.locate import (
    GYM_PYTHON_ENV,
    TESTED_VERSIONS,
    GymPython,
    NemoGymMissingError,
    locate,
    probe,
)


def test_a_missing_configured_interpreter_says_what_to_install(tmp_path: Path) -> None:
    missing = tmp_path / "bin" / "python"
    with pytest.raises(NemoGymMissingError, match=r"no such file.*pip install nemo-gym==0\.4\.0"):
        locate(missing)


def test_an_interpreter_without_nemo_gym_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    if probe(Path(sys.executable))[0] is not None:
        pytest.skip("this interpreter has nemo_gym")
    monkeypatch.setenv(GYM_PYTHON_ENV, sys.executable)
    with pytest.raises(NemoGymMissingError, match=rf"{GYM_PYTHON_ENV}.*'import nemo_gym' failed"):
        locate(None)
    monkeypatch.delenv(GYM_PYTHON_ENV)
    with pytest.raises(NemoGymMissingError, match="none was configured"):
        locate(None)


def test_each_process_sees_itself_at_its_port_and_peers_through_their_links() -> None:
    model = config.model_instance("gym_model", policy_base_url="http://127.0.0.1:9000/v1", model="tiny")
    agent = config.agent_instance("echo_agent", resources="gym_resources", model="gym_model", max_steps=4)
    resources = config.resources_instance("gym_resources")
    addresses = {
        "gym_model": "http://127.0.0.1:7001",
        "gym_resources": "http://127.0.0.1:7002",
        "echo_agent": "http://127.0.0.1:7003",
    }
    view = config.global_config([model, resources, agent], addresses, head_url="http://127.0.0.1:7000")
    assert view["head_server"] == {"host": "127.0.0.1", "port": 7000}
    assert view["dry_run"] is False
    vllm = view["gym_model"]["responses_api_models"]["vllm_model"]
    assert vllm["port"] == 7001
    assert vllm["base_url"] == "http://127.0.0.1:9000/v1"
    assert vllm["return_token_id_information"] is True
    simple = view["echo_agent"]["responses_api_agents"]["simple_agent"]
    assert simple["resources_server"] == {"type": "resources_servers", "name": "gym_resources"}
    assert view["gym_resources"]["resources_servers"]["equivalence_rule"]["grading_rule"] == "exact"


def test_policy_replicas_are_vllm_models_list_of_base_urls() -> None:
    urls = ["http://127.0.0.1:9000/v1", "http://127.0.0.1:9001/v1/"]
    model = config.model_instance("gym_model", policy_base_url=urls, model="tiny")
    assert model.settings["base_url"] == ["http://127.0.0.1:9000/v1", "http://127.0.0.1:9001/v1"]
    with pytest.raises(ValueError, match="must end in /v1"):
        config.model_instance("m", policy_base_url=[urls[0], "http://127.0.0.1:9001"], model="tiny")


def test_config_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="must end in /v1"):
        config.model_instance("m", policy_base_url="http://127.0.0.1:9000", model="tiny")
    resources = config.resources_instance("r")
    with pytest.raises(ValueError, match=r"no address for instance\(s\) \['r'\]"):
        config.global_config([resources], {}, head_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="must have a host and a port"):
        config.global_config([resources], {"r": "http://localhost"}, head_url="http://127.0.0.1:1")


def test_a_relay_fronts_its_agent_under_nemo_gyms_own_name() -> None:
    relay = config.relay_instance("echo_agent")
    assert relay.name == "echo_agent_environment_server"
    entries = config.instance_entries([relay], {relay.name: "http://127.0.0.1:7004"})
    legacy = entries[relay.name]["environment_servers"]["legacy_agent"]
    assert legacy == {
        "entrypoint": "app.py",
        "host": "127.0.0.1",
        "port": 7004,
        "agent_server": {"type": "responses_api_agents", "name": "echo_agent"},
    }


def test_the_summary_line_names_the_version_and_whether_ci_tests_it(tmp_path: Path) -> None:
    tested = GymPython(tmp_path / "python", "0.7.0", "3.13.0", environment_relay=True)
    assert tested.tested
    assert tested.describe() == (
        f"nemo_gym 0.7.0 on Python 3.13.0 ({tmp_path / 'python'}, "
        "agents behind legacy_agent environment servers)"
    )
    other = GymPython(tmp_path / "python", "0.6.1", "3.13.0")
    assert not other.tested
    assert other.describe().endswith(f"untested, CI runs {', '.join(TESTED_VERSIONS)})")
