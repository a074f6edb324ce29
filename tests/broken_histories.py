"""Broken histories of any length, one shape per way a repair could cost more than linear work.

Each shape is a function of ``n``, the number of messages (about), and ``ident``, what a call id
is made with (``str``, or a ``str`` subclass that counts its comparisons): it returns the history
and whether the unanswered calls are answered (``answer_unanswered``). The shapes put many calls,
results, turns or reasoning items where one repair step meets all the others: results after every
call, outputs before their calls, parallel calls answered in reverse or out of place, runs that one
repair step at a time would take a pass each (reasoning items left without their follower, Gemini
exchanges opening the contents, Bedrock assistant messages opening the conversation).

Used by tests/test_repair_growth.py (work counted at two sizes) and
benchmarks/bench_repair_growth.py.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

Message = Dict[str, Any]
Ident = Callable[[str], Any]
Shape = Callable[[int, Ident], Tuple[List[Message], bool]]

SHAPES: Dict[str, Shape] = {}


def _shape(answer: bool = False) -> Callable[[Callable[[int, Ident], List[Message]]], Any]:
    def register(build: Callable[[int, Ident], List[Message]]) -> Any:
        def shape(n: int, ident: Ident = str) -> Tuple[List[Message], bool]:
            return build(n, ident), answer

        SHAPES[build.__name__] = shape
        return build

    return register


def _user(text: str = "q") -> Message:
    return {"role": "user", "content": text}


# --- Chat Completions and Ollama -------------------------------------------------------------


def _call(ident: Ident, i: int) -> Message:
    function = {"name": "f", "arguments": "{}"}
    return {"id": ident(f"c{i}"), "type": "function", "function": function}


def _calling(calls: List[Message]) -> Message:
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _tool(ident: Ident, i: int) -> Message:
    return {"role": "tool", "tool_call_id": ident(f"c{i}"), "content": "{}"}


@_shape()
def chat_results_after_every_call(n: int, ident: Ident) -> List[Message]:
    """Calls each followed by a user message, every result at the end."""
    k = n // 3
    history = [_user()]
    for i in range(k):
        history += [_calling([_call(ident, i)]), _user()]
    return history + [_tool(ident, i) for i in range(k)]


@_shape()
def chat_parallel_calls_answered_in_reverse(n: int, ident: Ident) -> List[Message]:
    answers = [_tool(ident, i) for i in reversed(range(n))]
    return [_user(), _calling([_call(ident, i) for i in range(n)]), *answers, _tool(ident, n)]


@_shape()
def chat_parallel_calls_answered_after_a_user_message(n: int, ident: Ident) -> List[Message]:
    k = n // 2
    history = [_user(), _calling([_call(ident, i) for i in range(k)]), _tool(ident, 0), _user()]
    return history + [_tool(ident, i) for i in range(1, k)]


@_shape(answer=True)
def chat_parallel_calls_unanswered(n: int, ident: Ident) -> List[Message]:
    return [_user(), _calling([_call(ident, i) for i in range(n)])]


@_shape()
def chat_function_results_after_every_call(n: int, ident: Ident) -> List[Message]:
    k = n // 3
    history = [_user()]
    for _ in range(k):
        call = {"name": ident("f"), "arguments": "{}"}
        history += [{"role": "assistant", "content": None, "function_call": call}, _user()]
    return history + [{"role": "function", "name": ident("f"), "content": "1"} for _ in range(k)]


def _idless(i: int) -> Message:
    return {"function": {"name": f"t{i}", "arguments": {}}}


def _named_tool(i: int) -> Message:
    return {"role": "tool", "content": "ok", "tool_name": f"t{i}"}


@_shape()
def ollama_calls_answered_in_reverse(n: int, ident: Ident) -> List[Message]:
    calls = [_idless(i) for i in range(n)]
    answers = [_named_tool(i) for i in reversed(range(n))]
    return [_user(), _calling(calls), *answers, _named_tool(n)]


@_shape(answer=True)
def ollama_calls_answered_after_a_user_message(n: int, ident: Ident) -> List[Message]:
    calls = [_idless(i) for i in range(n)]
    return [_user(), _calling(calls), _user()] + [_named_tool(i) for i in range(n)]


# --- OpenAI Responses ------------------------------------------------------------------------


def _fc(ident: Ident, i: int) -> Message:
    return {"type": "function_call", "call_id": ident(f"c{i}"), "name": "f", "arguments": "{}"}


def _out(ident: Ident, i: int) -> Message:
    return {"type": "function_call_output", "call_id": ident(f"c{i}"), "output": "ok"}


def _reasoning(i: int) -> Message:
    return {"type": "reasoning", "id": f"rs{i}", "summary": []}


@_shape()
def responses_outputs_before_their_calls(n: int, ident: Ident) -> List[Message]:
    k = n // 2
    return [_user()] + [_out(ident, i) for i in range(k)] + [_fc(ident, i) for i in range(k)]


@_shape(answer=True)
def responses_calls_unanswered(n: int, ident: Ident) -> List[Message]:
    return [_user()] + [_fc(ident, i) for i in range(n)]


@_shape()
def responses_outputs_in_reverse(n: int, ident: Ident) -> List[Message]:
    k = n // 2
    outputs = [_out(ident, i) for i in reversed(range(k + 1))]  # the first answers nothing
    return [_user()] + [_fc(ident, i) for i in range(k)] + outputs


@_shape()
def responses_reasoning_items_at_the_end(n: int, ident: Ident) -> List[Message]:
    return [_user()] + [_reasoning(i) for i in range(n)]


@_shape()
def responses_reasoning_items_before_a_user_message(n: int, ident: Ident) -> List[Message]:
    return [_user()] + [_reasoning(i) for i in range(n)] + [_user()]


# --- Anthropic Messages ----------------------------------------------------------------------


def _use(ident: Ident, i: int) -> Message:
    return {"type": "tool_use", "id": ident(f"c{i}"), "name": "f", "input": {}}


def _result(ident: Ident, i: int) -> Message:
    return {"type": "tool_result", "tool_use_id": ident(f"c{i}"), "content": "ok"}


def _claude(role: str, blocks: List[Message]) -> Message:
    return {"role": role, "content": blocks}


@_shape()
def anthropic_results_in_reverse(n: int, ident: Ident) -> List[Message]:
    uses = [_use(ident, i) for i in range(n)]
    results = [_result(ident, i) for i in reversed(range(n + 1))]  # the first answers nothing
    return [_user(), _claude("assistant", uses), _claude("user", results)]


@_shape()
def anthropic_results_after_text(n: int, ident: Ident) -> List[Message]:
    uses = [_use(ident, i) for i in range(n)]
    results = [{"type": "text", "text": "x"}] + [_result(ident, i) for i in range(n)]
    return [_user(), _claude("assistant", uses), _claude("user", results)]


@_shape(answer=True)
def anthropic_calls_unanswered_before_text(n: int, ident: Ident) -> List[Message]:
    blocks = [_use(ident, i) for i in range(n)] + [{"type": "text", "text": "x"}]
    return [_user(), _claude("assistant", blocks)]


@_shape()
def anthropic_results_answering_nothing(n: int, ident: Ident) -> List[Message]:
    uses = [_use(ident, i) for i in range(n)]
    results = [_result(ident, n + i) for i in range(n)]
    return [_user(), _claude("assistant", uses), _claude("user", results)]


@_shape()
def anthropic_results_after_every_call(n: int, ident: Ident) -> List[Message]:
    k = n // 3
    history = [_user()]
    for i in range(k):
        history += [_claude("assistant", [_use(ident, i)]), _user()]
    return history + [_claude("user", [_result(ident, i)]) for i in range(k)]


# --- Gemini ----------------------------------------------------------------------------------


def _g_call(ident: Ident, i: int, with_id: bool = True) -> Message:
    call: Message = {"name": f"t{i}", "args": {}}
    if with_id:
        call["id"] = ident(f"c{i}")
    return {"function_call": call}


def _g_response(ident: Ident, i: int, with_id: bool = True) -> Message:
    response: Message = {"name": f"t{i}", "response": {"r": 1}}
    if with_id:
        response["id"] = ident(f"c{i}")
    return {"function_response": response}


def _turn(role: str, found: List[Message]) -> Message:
    return {"role": role, "parts": found}


_ASK = {"role": "user", "parts": [{"text": "q"}]}


@_shape()
def gemini_one_response_missing(n: int, ident: Ident) -> List[Message]:
    calls = [_g_call(ident, i) for i in range(n)]
    answers = [_g_response(ident, i) for i in reversed(range(1, n))]
    return [_ASK, _turn("model", calls), _turn("user", answers)]


@_shape(answer=True)
def gemini_one_response_missing_without_ids(n: int, ident: Ident) -> List[Message]:
    calls = [_g_call(ident, i, False) for i in range(n)]
    answers = [_g_response(ident, i, False) for i in reversed(range(1, n))]
    return [_ASK, _turn("model", calls), _turn("user", answers)]


@_shape()
def gemini_responses_answering_nothing(n: int, ident: Ident) -> List[Message]:
    calls = [_g_call(ident, i) for i in range(n)]
    answers = [_g_response(ident, n + i) for i in range(n + 1)]
    return [_ASK, _turn("model", calls), _turn("user", answers)]


@_shape()
def gemini_call_turns_after_a_model_turn(n: int, ident: Ident) -> List[Message]:
    calls = [_turn("model", [_g_call(ident, i)]) for i in range(n)]
    return [_ASK, _turn("model", [{"text": "a"}]), *calls]


@_shape()
def gemini_response_turns_answering_nothing(n: int, ident: Ident) -> List[Message]:
    return [_ASK] + [_turn("user", [_g_response(ident, i)]) for i in range(n)]


@_shape()
def gemini_exchanges_opening_the_contents(n: int, ident: Ident) -> List[Message]:
    history = []
    for i in range(n // 2):
        history += [_turn("model", [_g_call(ident, i)]), _turn("user", [_g_response(ident, i)])]
    return history


@_shape()
def gemini_exchanges_with_text_opening_the_contents(n: int, ident: Ident) -> List[Message]:
    history = []
    for i in range(n // 2):
        calls = [{"text": "a"}, _g_call(ident, i)]
        history += [_turn("model", calls), _turn("user", [_g_response(ident, i)])]
    return history


# --- Bedrock Converse ------------------------------------------------------------------------


def _b_use(ident: Ident, i: int) -> Message:
    return {"toolUse": {"toolUseId": ident(f"c{i}"), "name": "f", "input": {}}}


def _b_result(ident: Ident, i: int) -> Message:
    return {"toolResult": {"toolUseId": ident(f"c{i}"), "content": [{"text": "ok"}]}}


def _converse(role: str, blocks: List[Message]) -> Message:
    return {"role": role, "content": blocks}


_B_ASK = {"role": "user", "content": [{"text": "q"}]}


@_shape()
def bedrock_results_in_reverse(n: int, ident: Ident) -> List[Message]:
    uses = [_b_use(ident, i) for i in range(n)]
    results = [_b_result(ident, i) for i in reversed(range(n + 1))]  # the first answers nothing
    return [_B_ASK, _converse("assistant", uses), _converse("user", results)]


@_shape(answer=True)
def bedrock_one_result_missing(n: int, ident: Ident) -> List[Message]:
    uses = [_b_use(ident, i) for i in range(n)]
    results = [_b_result(ident, i) for i in reversed(range(1, n))]
    return [_B_ASK, _converse("assistant", uses), _converse("user", results)]


@_shape()
def bedrock_results_answering_nothing(n: int, ident: Ident) -> List[Message]:
    uses = [_b_use(ident, i) for i in range(n)]
    results = [_b_result(ident, n + i) for i in range(n)]
    return [_B_ASK, _converse("assistant", uses), _converse("user", results)]


@_shape()
def bedrock_user_messages_in_a_row(n: int, ident: Ident) -> List[Message]:
    return [_converse("user", [{"text": f"q{i}"}]) for i in range(n)]


@_shape()
def bedrock_assistant_messages_opening(n: int, ident: Ident) -> List[Message]:
    return [_converse("assistant", [{"text": "a"}]) for _ in range(n)] + [_B_ASK]


@_shape(answer=True)
def bedrock_results_before_their_calls(n: int, ident: Ident) -> List[Message]:
    history = []
    for i in range(n // 4):
        history += [
            _B_ASK,
            _converse("user", [_b_result(ident, i)]),
            _converse("assistant", [_b_use(ident, i)]),
            {"role": "assistant", "content": []},
        ]
    return history
