"""The Ray Serve application's arguments: checked before anything is deployed (no cluster)."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.serve")

from yomiage.engine_spec import EngineSpec
from yomiage.limits import Limits
from yomiage.ray import AppArgs, app


def test_command_line_strings_become_the_engine_and_the_server_config() -> None:
    args = AppArgs.model_validate(
        {"model": "a=./voices/a, b=hf://owner/repo/b", "voice": "jvnv-F1-jp", "threads": "2",
         "voice_alias": "alloy=a,echo=b", "allowed_host": "*", "max_audio_seconds": "120"}
    )  # fmt: skip
    assert args.engine_spec() == EngineSpec(
        voices=(("jvnv-F1-jp", None), ("a", "./voices/a"), ("b", "hf://owner/repo/b")),
        threads=2,
        limits=Limits(max_request_seconds=120.0),
    )
    config = args.server_config()
    assert dict(config.voice_aliases) == {"alloy": "a", "echo": "b"}
    assert config.allowed_hosts == ("*",)
    assert config.warmup is False, "the replica warms up before Serve routes to it"


def test_replicas_ask_for_their_threads_and_autoscale_on_ongoing_requests() -> None:
    options = AppArgs(model=["./v"], threads=3, max_concurrency=2).deployment_options()
    assert options["ray_actor_options"] == {"num_cpus": 3}
    assert options["max_ongoing_requests"] == 4
    assert options["autoscaling_config"] == {
        "min_replicas": 1, "initial_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 2,
    }  # fmt: skip
    fixed = AppArgs(model=["./v"], replicas=2).deployment_options()
    assert fixed["num_replicas"] == 2 and "autoscaling_config" not in fixed


def test_the_api_key_comes_from_the_replicas_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YOMIAGE_API_KEY", "secret")
    assert AppArgs(model=["./v"]).server_config().api_key == "secret"
    assert AppArgs(model=["./v"], api_key="other").server_config().api_key == "other"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "name a voice"),
        ({"model": "./a,x/a"}, "two voices are called 'a'"),
        ({"model": "./v", "threads": 0}, "threads"),
        ({"model": "./v", "colour": "blue"}, "colour"),
        ({"model": "./v", "min_replicas": 5}, "min_replicas (5) exceeds max_replicas (4)"),
        ({"model": "./v", "dict_api": "write"}, "dict_api"),
        ({"model": "./v", "voice_alias": "alloy=w"}, "alloy names voice 'w'"),
        ({"model": "./v", "default_voice": "w"}, "default_voice names voice 'w'"),
        ({"model": "./v", "api": "openai,soap"}, "unknown API 'soap'"),
        ({"model": "./v", "voice_alias": "alloy"}, "ALIAS=NAME"),
    ],
)
def test_bad_arguments_are_refused_before_deploying(args: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        app(args)


def test_the_budgets_earlier_name_is_taken_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    args = AppArgs(model=["/voices/a"], memory_budget="900")  # type: ignore[call-arg]
    assert args.memory_budget_mb == 900 and args.engine_spec().memory_budget_mb == 900
    assert "memory_budget is now called memory_budget_mb" in caplog.text
    with pytest.raises(ValueError, match="memory_budget_mb"):
        AppArgs(model=["/voices/a"], memory_budget_mb=50)
