"""The client's settings as values: one ``Timeouts``, the targets it accepts, the channel options they become.

Pure: nothing here connects (a gRPC channel opens lazily, on the first call).
"""

from __future__ import annotations

import dataclasses

import pytest

from tritonkit.client import AsyncClient, Client, Timeouts
from tritonkit.client._settings import channel_args, parse_target
from tritonkit.errors import ConfigError


def test_timeouts_is_one_frozen_value_with_documented_defaults() -> None:
    timeouts = Timeouts()
    assert (timeouts.call_s, timeouts.connect_s, timeouts.stream_idle_s) == (60.0, 5.0, 60.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        timeouts.call_s = 1.0  # type: ignore[misc]
    assert timeouts.with_call_s(2.0) == Timeouts(call_s=2.0)
    assert timeouts.with_call_s(2.0) is not timeouts


def test_a_number_or_none_is_the_call_deadline_as_in_httpx() -> None:
    assert Timeouts.of(5) == Timeouts(call_s=5)
    assert Timeouts.of(None).call_s is None
    assert Client("127.0.0.1:1", timeouts=2.5).timeouts == Timeouts(call_s=2.5)
    assert AsyncClient("127.0.0.1:1", timeouts=Timeouts(connect_s=1.0)).timeouts.connect_s == 1.0
    with pytest.raises(ConfigError, match="timeouts must be a Timeouts"):
        Client("127.0.0.1:1", timeouts="5")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("call_s", 0),
        ("connect_s", -1.0),
        ("connect_s", None),
        ("stream_idle_s", float("nan")),
        ("keepalive_time_s", True),
    ],
)
def test_timeouts_refuse_nonsense_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^Timeouts\.{field} .*: (too small|not a (finite )?number)"):
        Timeouts(**{field: value})  # type: ignore[arg-type]


def test_timeouts_become_the_channel_options() -> None:
    options = dict(
        channel_args(
            Timeouts(connect_s=2.5, reconnect_backoff_max_s=0.2), balanced=False, max_message_bytes=1024
        )
    )
    assert options["grpc.min_reconnect_backoff_ms"] == 2500
    assert options["grpc.max_reconnect_backoff_ms"] == 200
    assert options["grpc.max_send_message_length"] == options["grpc.max_receive_message_length"] == 1024
    assert "grpc.lb_policy_name" not in options


@pytest.mark.parametrize(
    ("url", "target", "balanced"),
    [
        ("127.0.0.1:9001", "127.0.0.1:9001", False),
        ("grpc://triton", "triton:8001", False),
        ("::1", "[::1]:8001", False),
        ("dns:///triton.ns.svc.cluster.local:8001", "dns:///triton.ns.svc.cluster.local:8001", True),
        ("dns:///triton", "dns:///triton:8001", True),
        ("dns://10.0.0.10:53/triton:8001", "dns://10.0.0.10:53/triton:8001", True),
        ("ipv4:127.0.0.1:9001, 127.0.0.2:9002", "ipv4:127.0.0.1:9001,127.0.0.2:9002", True),
        ("ipv6:[::1]:9001,[::1]:9002", "ipv6:[::1]:9001,[::1]:9002", True),
    ],
)
def test_targets_for_one_server_and_for_balancing(url: str, target: str, balanced: bool) -> None:
    parsed = parse_target(url)
    assert (parsed.target, parsed.balanced) == (target, balanced)
    client = Client(url)
    assert client.url == target
    assert (dict(client._tc_kwargs["channel_args"]).get("grpc.lb_policy_name") == "round_robin") is balanced


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("127.0.0.1:99999", "port '99999' is not a number"),
        ("127.0.0.1:http", "port 'http' is not a number"),
        ("http://127.0.0.1:8000", "not a gRPC address"),
        ("ipv4:127.0.0.1", "needs its port"),
        ("", "empty"),
    ],
)
def test_bad_targets_are_refused_when_the_client_is_made(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Client(url)


def test_balanced_targets_never_use_shared_memory() -> None:
    """A region registered on one server is unknown to the next one round-robin picks."""
    assert Client("ipv4:127.0.0.1:9001,127.0.0.1:9002")._threshold(None) is None
    assert Client("127.0.0.1:9001")._threshold(None) is not None
    with pytest.raises(ConfigError, match="shared_memory='always' cannot work with the balanced target"):
        Client("dns:///localhost:9001", shared_memory="always")


def test_max_message_bytes_is_checked() -> None:
    with pytest.raises(ConfigError, match="max_message_bytes must be from 1 to 2147483647"):
        Client("127.0.0.1:1", max_message_bytes=2**31)
