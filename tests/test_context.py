"""The one ``with`` protocol the client and the server launcher share (tritonkit._context)."""

from __future__ import annotations

import pytest

from tritonkit._context import ContextManaged
from tritonkit.client import Client
from tritonkit.errors import ClientClosedError


class _Recorded(ContextManaged):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def _enter(self) -> None:
        self.calls.append("enter")

    def _exit(self) -> None:
        self.calls.append("exit")


def test_with_enters_before_the_block_and_exits_after_it_returning_the_object() -> None:
    managed = _Recorded()
    with managed as entered:
        assert entered is managed and managed.calls == ["enter"]
    assert managed.calls == ["enter", "exit"]


def test_an_error_in_the_block_still_exits_and_passes_on_unchanged() -> None:
    managed = _Recorded()
    with pytest.raises(KeyError, match="boom"), managed:
        raise KeyError("boom")
    assert managed.calls == ["enter", "exit"]


def test_a_subclass_that_does_not_say_how_it_is_released_is_an_error_naming_it() -> None:
    class Unreleased(ContextManaged):
        pass

    with pytest.raises(NotImplementedError, match="Unreleased"), Unreleased():
        pass


def test_a_client_closes_on_leaving_and_refuses_a_second_with() -> None:
    """No server is needed: the channel connects on the first call, and a closed client refuses before any."""
    client = Client("127.0.0.1:1")
    with client as entered:
        assert entered is client
    with pytest.raises(ClientClosedError, match="closed"), client:
        pass
