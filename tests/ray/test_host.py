"""``host.with_host``: a program told its address on the command line is told its node's instead."""

from __future__ import annotations

from pytest_rollout_chaos.ray.host import with_host


def test_both_spellings_of_host_are_replaced_and_nothing_else() -> None:
    argv = ("vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8000", "--host=127.0.0.1")
    assert with_host(argv, "127.0.0.3") == (
        "vllm",
        "serve",
        "m",
        "--host",
        "127.0.0.3",
        "--port",
        "8000",
        "--host=127.0.0.3",
    )


def test_a_command_without_host_is_left_as_it_is() -> None:
    assert with_host(("prog", "--port", "1"), "127.0.0.3") == ("prog", "--port", "1")
