"""What the hosts of ``hosts:N`` read from this machine must not live under their private ``/tmp``:
a path there (as written, or once its links are followed) is named, and a run from an interpreter
under ``/tmp`` stops at once with one usage error naming it, before any host exists."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.ray import host_paths
from pytest_rollout_chaos.ray.host_paths import NeededPath
from pytest_rollout_chaos.ray.mode import RayMode
from pytest_rollout_chaos.settings import ChaosSettings

SCENARIO = """\
name: first
description: Nothing but a baseline.
expect:
  invariants: [accounted]
  witness: {rows_answered: 1}
"""


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A folder of this test's own directly under ``/tmp``, whatever pytest's basetemp is."""
    path = Path(tempfile.mkdtemp(prefix="rc-host-paths-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_path_under_tmp_or_dev_shm_is_hidden_and_one_beside_them_is_not(under_tmp: Path) -> None:
    model = under_tmp / "model"
    model.mkdir()
    paths = [
        NeededPath("--rollout-chaos-model", model),
        NeededPath("the PYTHONPATH entry", Path("/dev/shm/site")),
        NeededPath("the PYTHONPATH entry", Path("/tmpfs-elsewhere/site")),  # a name that starts alike
        NeededPath("the interpreter", Path(sys.executable).resolve().parent.parent / "bin/env"),
    ]
    if any(mount in Path(sys.executable).resolve().parents for mount in (Path("/tmp"), Path("/dev/shm"))):
        paths.pop()  # this interpreter lives under them itself
    hidden = host_paths.hidden(paths)
    assert [(found.needed.path, found.mount) for found in hidden] == [
        (model, Path("/tmp")),
        (Path("/dev/shm/site"), Path("/dev/shm")),
    ]
    assert hidden[0].describe() == f"--rollout-chaos-model={model} is under /tmp"
    assert hidden[1].describe() == "the PYTHONPATH entry /dev/shm/site is under /dev/shm"


def test_a_link_into_a_private_folder_is_hidden_and_named_with_where_it_leads(tmp_path: Path) -> None:
    private, elsewhere = tmp_path / "private", tmp_path / "elsewhere"
    (private / "venv" / "bin").mkdir(parents=True)
    (private / "venv" / "bin" / "python").write_text("")
    elsewhere.mkdir()
    (elsewhere / "python").symlink_to(private / "venv" / "bin" / "python")
    (elsewhere / "plain").write_text("")
    paths = [
        NeededPath("the interpreter", elsewhere / "python"),
        NeededPath("--rollout-chaos-model", elsewhere / "plain"),
    ]
    hidden = host_paths.hidden(paths, mounts=(private,))
    assert [found.needed.path for found in hidden] == [elsewhere / "python"]
    assert hidden[0].describe() == (
        f"the interpreter {elsewhere / 'python'} is a link to {private / 'venv/bin/python'}, "
        f"which is under {private}"
    )


def test_the_hosts_need_the_interpreter_the_package_pythonpath_and_what_the_settings_send_them(
    monkeypatch: pytest.MonkeyPatch, under_tmp: Path
) -> None:
    monkeypatch.setenv("PYTHONPATH", f"{under_tmp / 'site'}:{bundled.import_root()}")
    settings = dataclasses.replace(
        ChaosSettings(),
        ray=RayMode("hosts", nodes=2),
        model=under_tmp / "model",
        gym="nemo-gym",
        gym_python=under_tmp / "gym/bin/python",
        upstream=under_tmp / "RL",
    )
    needed = {found.what: found.path for found in host_paths.needed(settings)}
    assert needed["the interpreter"] == Path(sys.executable)
    assert needed["the folder pytest_rollout_chaos is imported from"] == bundled.import_root()
    assert needed["--rollout-chaos-model"] == under_tmp / "model"
    assert needed["--rollout-chaos-gym-python"] == under_tmp / "gym/bin/python"
    assert needed["--rollout-chaos-upstream"] == under_tmp / "RL"
    hidden = [found.needed.path for found in host_paths.hidden(host_paths.needed(settings))]
    for path in (under_tmp / "site", under_tmp / "model", under_tmp / "gym/bin/python", under_tmp / "RL"):
        assert path in hidden
    served = dataclasses.replace(settings, policy_url="http://127.0.0.1:1")  # no model to load here
    assert "--rollout-chaos-model" not in {found.what for found in host_paths.needed(served)}


def test_a_run_from_an_interpreter_under_tmp_stops_with_one_usage_error_naming_it(
    under_tmp: Path, tmp_path: Path
) -> None:
    # A virtualenv under /tmp: this one's interpreter and packages, reached from there.
    venv = Path(sys.prefix)
    (under_tmp / "bin").mkdir()
    (under_tmp / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    (under_tmp / "lib").symlink_to(venv / "lib", target_is_directory=True)
    shutil.copy(venv / "pyvenv.cfg", under_tmp / "pyvenv.cfg")
    project = tmp_path / "project"
    project.mkdir()
    (project / "first.chaos.yaml").write_text(SCENARIO)
    done = subprocess.run(
        [
            str(under_tmp / "bin" / "python"),
            *("-m", "pytest", "-p", "no:cacheprovider", "--rollout-chaos", "--rollout-chaos-ray=hosts:2"),
            str(project),
        ],
        cwd=project,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(bundled.import_root())},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert (
        "--rollout-chaos-ray=hosts:2: each host gets a private /tmp and /dev/shm (empty tmpfs mounts)"
        in done.stderr
    ), output
    assert f"  the interpreter {under_tmp / 'bin/python'} is under /tmp" in done.stderr, output
    assert f"  its installation (sys.prefix) {under_tmp} is under /tmp" in done.stderr, output
    assert "move them out of /tmp and /dev/shm" in done.stderr, output
    assert "Traceback" not in output
    assert "first" not in done.stdout  # no scenario ran
