"""A stand-in for a third-party SDK, for the interception tests.

It lives in a module of its own so that a session can name its methods the way
a user would name the real SDK's (``"fake_sdk.Completions.create"``): the test
directory is on ``sys.path`` (pytest's default ``prepend`` import mode, the
same reason ``from helpers import ...`` works).

Every ``create`` returns a ``Reply`` holding the very list it received, so a test
can tell a pass-through (the caller's own list) from a compacted call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, List, TypeVar

import anyio

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Reply:
    model: str
    messages: List[Any]


def traced(fn: F) -> F:
    """A decorator in the style of SDK telemetry: ``functools.wraps`` over a plain function.

    Applied to an ``async def``, the result is a plain function returning a
    coroutine, so ``inspect.iscoroutinefunction`` says False.
    """

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return inner  # type: ignore[return-value]


class Completions:
    def create(self, *, messages: List[Any], model: str) -> Reply:
        return Reply(model, messages)


class AsyncCompletions:
    @traced
    async def create(self, *, messages: List[Any], model: str) -> Reply:
        await anyio.sleep(0)  # a checkpoint, as a real request would have
        return Reply(model, messages)


class Chat:
    def __init__(self, completions: Any) -> None:
        self.completions = completions


class Client:
    def __init__(self) -> None:
        self.chat = Chat(Completions())


class AsyncClient:
    def __init__(self) -> None:
        self.chat = Chat(AsyncCompletions())


class Resource:
    """A base class whose method subclasses inherit, as SDK resources often do."""

    def create(self, *, messages: List[Any], model: str) -> Reply:
        return Reply(model, messages)


class Responses(Resource):
    pass


class NoMessages:
    def create(self, prompt: str) -> str:
        return prompt
