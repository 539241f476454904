"""The HTML page and its SVG timeline: self-contained, escaped, and naming what happened."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.report.html import render_report, write_report
from pytest_rollout_chaos.report.svg import render_timeline
from pytest_rollout_chaos.report.timeline import Outcome, build_timeline
from tests.report._builders import T0, completed, event, record, result, rows, story_events, verdict

HOSTILE = "<script>alert('x')</script> & \"quotes\""


def _svg(page: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", page, flags=re.DOTALL)


def test_the_page_names_each_scenario_its_verdicts_and_draws_its_timeline() -> None:
    good = result("slow-link", rollouts=completed(3), verdicts=[verdict("accounted", Status.PASS)])
    bad = result(
        "loses-a-row",
        rollouts=completed(2),
        verdicts=[verdict("accounted", Status.FAIL, "row 2 has no rollout", ["t=0.1s collector ok run"])],
    )
    page = render_report(
        [
            record(good, events=story_events()),
            record(bad, item_outcome="failed", name="loses-a-row", events=story_events(lose_row=2)),
        ]
    )
    assert page.startswith("<!DOCTYPE html>")
    for text in ("slow-link", "loses-a-row", "row 2 has no rollout", "t=0.1s collector ok run"):
        assert text in page
    assert '<span class="badge passed">PASS</span>' in page
    assert '<span class="badge failed">FAIL</span>' in page
    assert '<span class="status fail">FAIL</span>' in page
    assert "latency on agent-&gt;model (latency_ms=200)" in page
    assert "the collector returned 2 rollouts for 3 rows (2 completed)" in page
    assert 'href="https://github.com/NVIDIA-NeMo/Gym/issues/1787"' in page
    svgs = _svg(page)
    assert len(svgs) == 2
    for svg in svgs:
        ElementTree.fromstring(svg)  # well-formed


def test_the_page_is_self_contained() -> None:
    page = render_report([record(result(rollouts=completed(3)), events=story_events())])
    assert "<script" not in page
    assert "<link" not in page
    assert not re.search(r"\ssrc=", page)
    assert "@import" not in page
    assert "url(" not in page


def test_every_text_from_the_run_is_escaped() -> None:
    hostile = result(
        "hostile",
        raised=RuntimeError(HOSTILE),
        verdicts=[verdict("accounted", Status.FAIL, HOSTILE, [HOSTILE])],
        description="Escaping: " + HOSTILE.replace('"', ""),
    )
    events = [
        event(0.0, "collector", "invoke", "run", row=0),
        event(0.1, "collector", "fail", "run", row=0, error=HOSTILE),
        event(0.2, "fault", "info", "inject", fault="http_error", target=HOSTILE),
        event(0.3, "process", "info", "exit", server=HOSTILE, code=1, signal=None),
    ]
    page = render_report(
        [record(hostile, item_outcome="failed", name="hostile", events=events, message=HOSTILE)]
    )
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    ElementTree.fromstring(_svg(page)[0])


def test_a_scenario_without_a_result_shows_what_pytest_said() -> None:
    page = render_report(
        [record(None, item_outcome="error", name="no-servers", message="ServerStartError: boom")]
    )
    assert "no-servers" in page
    assert "ServerStartError: boom" in page
    assert '<span class="badge error">ERROR</span>' in page
    assert not _svg(page)


def test_write_report_creates_the_folder(tmp_path: Path) -> None:
    path = write_report(tmp_path / "out" / "report.html", [record(result(rollouts=completed(3)))])
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_picture_has_a_lane_per_row_a_band_per_fault_and_exit_markers() -> None:
    events = [
        *story_events(lose_row=2),
        event(0.4, "process", "info", "exit", server="calculator_agent", code=137, signal=9),
    ]
    outcomes: dict[int, Outcome] = {0: "completed", 1: "aborted", 2: "missing"}
    timeline = build_timeline(
        sorted(events, key=lambda e: e.t),
        t0=T0,
        rows=rows(3),
        outcomes=outcomes,
        elapsed_s=0.55,
    )
    svg = ElementTree.fromstring(render_timeline(timeline))
    texts = [element.text for element in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert {"row 0 · calculator", "row 1 · calculator", "row 2 · calculator"} <= set(texts)
    assert {"completed", "aborted", "missing"} <= set(texts)
    assert "latency on agent->model (latency_ms=200)" in texts
    assert "calculator_agent signal 9" in texts
    classes = [element.get("class", "") for element in svg.iter("{http://www.w3.org/2000/svg}g")]
    assert "band network" in classes
    assert "marker exit" in classes
    assert "span completed ok" in classes
    assert "span missing open" in classes


def test_a_label_that_would_leave_the_picture_is_drawn_to_the_left() -> None:
    events = [
        event(0.0, "collector", "invoke", "collect"),
        event(0.99, "process", "info", "exit", server="a_server_with_a_long_name", code=137, signal=9),
        event(1.0, "collector", "ok", "collect"),
    ]
    timeline = build_timeline(events, t0=T0, rows=rows(1), outcomes={0: "completed"}, elapsed_s=1.0)
    svg = ElementTree.fromstring(render_timeline(timeline))
    (label,) = [
        e
        for e in svg.iter("{http://www.w3.org/2000/svg}text")
        if e.text == "a_server_with_a_long_name signal 9"
    ]
    assert label.get("text-anchor") == "end"


def test_a_long_outcome_is_folded_but_kept_whole() -> None:
    long_error = "HTTP 500: " + "inner server said no; " * 40
    page = render_report([record(result(raised=RuntimeError(long_error)), item_outcome="passed")])
    assert "the whole outcome" in page
    assert f"the collector raised RuntimeError: {long_error}" in page


def test_totals_tell_skips_and_harness_fault_errors_apart_from_failures() -> None:
    spoiled = result("oom-agent", rollouts=completed(3), verdicts=[verdict("accounted", Status.PASS)])
    spoiled.fault_errors = [FaultError("injecting oom() on calculator_agent failed: no cgroup")]
    page = render_report(
        [
            record(spoiled, item_outcome="failed", name="oom-agent", events=story_events()),
            record(None, item_outcome="skipped", name="native-only", headline="native-style scenario"),
        ]
    )
    assert '<div class="num">1</div><div class="what">failed</div>' in page
    assert '<div class="num">1</div><div class="what">skipped</div>' in page
    assert '<div class="num">1</div><div class="what">fault errors</div>' in page
    # the index says why a scenario with all-green verdicts failed
    assert '<div class="why">fault error: injecting oom() on calculator_agent failed: no cgroup</div>' in page
    assert "show only failing scenarios (1)" in page
    assert '<tr class="skipped">' in page
    assert '<section class="scenario skipped"' in page


def test_not_judged_verdicts_witnesses_and_what_made_a_run_vacuous_are_shown() -> None:
    vacuous = result(
        "no-drift",
        rollouts=completed(3),
        verdicts=[verdict("prefix_consistent", Status.NOT_JUDGED, "no multi-turn rollout")],
    )
    vacuous.vacuous = ["prefix_consistent: NOT_JUDGED: no multi-turn rollout"]
    facts = record(vacuous, item_outcome="failed", name="no-drift")
    assert facts.result is not None
    facts = replace(facts, result=replace(facts.result, witnesses=("prompt_ids_drifted: NOT_SEEN: 0 rows",)))
    page = render_report([facts])
    assert '<span class="status not_judged">NOT_JUDGED</span>' in page
    assert '<span class="chip not_judged" title="no multi-turn rollout">prefix_consistent</span>' in page
    # a gap in the test, not a failure of the collector: not the red box of one
    assert '<div class="problems untested"><b>not judged (the scenario tested nothing there):</b>' in page
    assert "<li>prefix_consistent: NOT_JUDGED: no multi-turn rollout</li>" in page
    assert "<code>prompt_ids_drifted: NOT_SEEN: 0 rows</code>" in page
    assert '<div class="num">1</div><div class="what">invariants not judged</div>' in page


def test_the_settings_an_adapter_gave_its_trainer_are_shown_escaped() -> None:
    from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings

    outcome = result("adapter-run", rollouts=completed(3))
    taken = TrainerSettings("slime", {}, [])
    taken.default("rollout_stop", "<eos>", "slime/utils/arguments.py")
    taken.record(outcome.history, mode="train")
    page = render_report([record(outcome, name="adapter-run")])
    assert "<summary>settings given to slime</summary>" in page
    assert (
        "slime: rollout_stop = &#x27;&lt;eos&gt;&#x27; (upstream default: slime/utils/arguments.py)" in page
    )


def test_what_an_adapter_ran_upstream_is_shown_escaped_and_each_stand_in_once() -> None:
    from pytest_rollout_chaos.collector.adapters import slime

    outcome = result("adapter-run", rollouts=completed(3))
    history = outcome.history
    history.append("collector", "info", "gym_client", {"client": "NeMo Gym's own", "nemo_gym": "0.5.0"})
    for _ in range(2):  # two collections: the same calls, each once with a count
        with slime.upstream_call(history, {"call": "generate_and_rm_group"}, ["the <hook>", "the loop"]):
            pass
    with (
        pytest.raises(ValueError, match="no <tokens>"),
        slime.upstream_call(history, {"call": "RolloutManager.generate"}, ["the <hook>"], read_out="a&b"),
    ):
        raise ValueError("no <tokens>")
    page = render_report([record(outcome, name="adapter-run")])
    assert "<b>Upstream</b>" in page
    assert "<p>read out at: <code>a&amp;b</code></p>" in page
    assert '<li><span class="status pass">ok</span> <code>generate_and_rm_group</code> (2 times)</li>' in page
    assert (
        '<li><span class="status fail">fail</span> <code>RolloutManager.generate</code> '
        '<span class="muted">ValueError: no &lt;tokens&gt;</span></li>'
    ) in page
    assert "<p>Gym client: NeMo Gym&#x27;s own (nemo_gym 0.5.0)</p>" in page
    assert "<summary>stood in for (2)</summary><ul>\n<li>the &lt;hook&gt;</li>\n<li>the loop</li>" in page


def test_a_collector_that_is_no_adapter_gets_no_upstream_section() -> None:
    outcome = result("reference-run", rollouts=completed(3))
    outcome.history.append("collector", "invoke", "collect", {"rows": 3, "style": "gym"})
    assert "<b>Upstream</b>" not in render_report([record(outcome, name="reference-run")])
