"""``with obj:`` for the objects that are opened by one method and released by another."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing.Self is new in 3.11; annotations are not evaluated at run time
    from typing_extensions import Self

__all__ = ["ContextManaged"]


class ContextManaged:
    """``with obj:`` runs :meth:`_enter` before the block and :meth:`_exit` after it, however the
    block ends (an exception passes on unchanged); ``__enter__`` returns ``obj`` itself.

    A subclass says what entering does (start a process, refuse an object already closed) and
    what leaving does (stop, close); the protocol itself is written once, here.
    """

    def _enter(self) -> None:
        """Before the block (default: nothing)."""

    def _exit(self) -> None:
        """After the block: stop, close or release."""
        raise NotImplementedError(f"{type(self).__name__} must say how it is released")

    def __enter__(self) -> Self:
        self._enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit()
