"""How a framework's message object is seen: the wire-shaped view the core groups and counts.

Their dumps carry neither a ``role`` nor a wire ``type``, so each framework's object is
seen as the wire message the framework sends for it (docs/formats/message-objects.md):
LangChain, Mistral, LlamaIndex and smolagents messages in Chat Completions form,
pydantic-ai and AutoGen messages in Anthropic Messages form (one of their requests answers
several calls), openai-agents run items as the Responses item they wrap. No framework is
imported: an object is recognised by the module and name of a class in its MRO.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._shapes import View
from .chat import calls_tools

Json = Dict[str, Any]

# LangChain message classes and the Chat Completions role each is sent with.
_LANGCHAIN_ROLES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": None,  # carries its own role
}
_AGENTS_ITEMS = (
    "MessageOutputItem",
    "ToolCallItem",
    "ToolCallOutputItem",
    "ReasoningItem",
    "HandoffCallItem",
    "HandoffOutputItem",
    "MCPApprovalRequestItem",
    "MCPApprovalResponseItem",
    "MCPListToolsItem",
)
_MISTRAL_MESSAGES = ("UserMessage", "AssistantMessage", "SystemMessage", "ToolMessage")
# smolagents' roles and the ones it sends them as (its tool_role_conversions).
_SMOLAGENTS_ROLES = {"tool-call": "assistant", "tool-response": "user"}


def framework_view(message: object) -> Optional[View]:
    """The wire-shaped view of a known framework message object, or ``None``.

    Args:
        message: Any object; only LangChain ``BaseMessage`` subclasses,
            pydantic-ai ``ModelRequest``/``ModelResponse``, openai-agents run
            items, Mistral SDK messages, LlamaIndex ``ChatMessage``, AutoGen
            ``LLMMessage`` and smolagents ``ChatMessage`` are recognised.

    Returns:
        A new mapping (the object is not changed) in Chat Completions form for
        LangChain, Mistral, LlamaIndex and smolagents, Anthropic Messages form
        for pydantic-ai and AutoGen and Responses item form for openai-agents;
        ``None`` when ``message`` is none of these (or a run item whose
        ``raw_item`` is neither a mapping nor a pydantic model).
    """
    for cls in type(message).__mro__:
        module = cls.__module__
        for prefix, exact, readers in _READERS:
            read = readers.get(cls.__name__)
            if read is not None and (module == prefix if exact else module.startswith(prefix)):
                return read(message)
    return None


# --- LangChain ----------------------------------------------------------------

# Content blocks that are tool calls: the integrations send each call once, from
# ``tool_calls`` (and ``invalid_tool_calls``), with any such block not among them
# (an Anthropic or Bedrock ``tool_use``, a v1 standard ``tool_call``, a Responses
# ``function_call``), so the view holds them in ``tool_calls`` and not in content.
_LANGCHAIN_CALL_BLOCKS = frozenset(
    {"tool_use", "tool_call", "invalid_tool_call", "tool_call_chunk", "function_call"}
)


# The provider integrations whose API refuses a conversation that goes on at the
# model's turn after no user turn, as their AIMessages name them
# (``response_metadata["model_provider"]``), and which of the model's turns: Gemini
# takes a function call turn only right after a user turn or a function response
# turn ("calls"), Bedrock's Converse no conversation that starts with the
# assistant's turn ("any"). The system message is neither's turn.
_TURN_RULES = {"google_genai": "calls", "bedrock_converse": "any"}


class _ModelTurn(Dict[str, Any]):
    """The view of an ``AIMessage`` whose provider has rules on where the model's turn
    may come (``_TURN_RULES``): the same mapping as any view, with the rule beside it."""

    def __init__(self, view: Json, rule: str) -> None:
        super().__init__(view)
        self.rule = rule


class _LangChainTurns:
    """Where a LangChain conversation may resume after a cut, for the integrations whose
    provider refuses the model's turn right after the system message (``_TURN_RULES``):
    a ``Resuming`` of ``ctx_compact.formats``, whose views are ``_ModelTurn`` objects."""

    def resumes(self, before: Optional[View], view: View) -> bool:
        """Whether the conversation may go on at ``view`` right after ``before``."""
        if not isinstance(view, _ModelTurn) or (view.rule == "calls" and not calls_tools(view)):
            return True
        role = None if before is None else before.get("role")
        if view.rule == "calls":
            return role in ("user", "tool")  # a user turn, or function responses
        return role in ("user", "tool", "assistant")  # LangChain merges two AI messages


LANGCHAIN_TURNS = _LangChainTurns()


def _langchain_view(message: Any, role: Optional[str]) -> Json:
    # Chat Completions form, as ChatOpenAI sends it; the content as every integration
    # sends it (their tool-call blocks in tool_calls, standard data blocks as media parts).
    content = _langchain_content(message.content, role == "assistant")
    if role == "tool":
        return {"content": content, "role": "tool", "tool_call_id": message.tool_call_id}
    extra = message.additional_kwargs or {}
    view: Json = {"content": content}
    name = message.name or extra.get("name")
    if name is not None:
        view["name"] = name
    if role is None:
        view["role"] = message.role
    else:
        view["role"] = extra.get("__openai_role__", "system") if role == "system" else role
    return _langchain_calls_view(message, view, extra) if role == "assistant" else view


def _langchain_calls_view(message: Any, view: Json, extra: Json) -> Json:
    """An ``AIMessage``'s view with its calls (a ``_ModelTurn`` where its provider has rules)."""
    calls = _langchain_calls(message)
    if calls:
        view["tool_calls"] = calls
    elif "tool_calls" in extra:
        view["tool_calls"] = extra["tool_calls"]
    elif "function_call" in extra:
        view["function_call"] = extra["function_call"]
    if "tool_calls" in view or "function_call" in view:
        view["content"] = view["content"] or None
    provider = (getattr(message, "response_metadata", None) or {}).get("model_provider")
    rule = _TURN_RULES.get(provider) if isinstance(provider, str) else None
    return view if rule is None else _ModelTurn(view, rule)


def _langchain_calls(message: Any) -> List[Json]:
    calls = [
        _langchain_call(call.get("id"), call.get("name"), _arguments(call.get("args", {})))
        for call in getattr(message, "tool_calls", None) or ()
    ]
    calls += [
        _langchain_call(call.get("id"), call.get("name"), call.get("args"))
        for call in getattr(message, "invalid_tool_calls", None) or ()
    ]
    content = message.content
    if isinstance(content, list):
        seen = {call["id"] for call in calls}
        for block in content:
            call = _block_call(block)
            if call is not None and call["id"] not in seen:
                seen.add(call["id"])
                calls.append(call)
    return calls


def _block_call(block: Any) -> Optional[Json]:
    """The tool call a content block holds, in Chat form, or ``None``."""
    if not isinstance(block, Mapping) or block.get("type") not in _LANGCHAIN_CALL_BLOCKS:
        return None
    kind = block["type"]
    if kind == "tool_use":
        return _langchain_call(block.get("id"), block.get("name"), _arguments(block.get("input")))
    if kind == "function_call":  # a Responses item: its call_id is what a result answers
        return _langchain_call(block.get("call_id"), block.get("name"), block.get("arguments"))
    return _langchain_call(block.get("id"), block.get("name"), _arguments(block.get("args")))


def _arguments(args: Any) -> Any:
    if isinstance(args, str):
        return args
    return json.dumps({} if args is None else args, ensure_ascii=False)


def _langchain_call(call_id: Any, name: Any, arguments: Any) -> Json:
    function = {"name": name, "arguments": arguments}
    return {"type": "function", "id": call_id, "function": function}


def _langchain_content(content: Any, assistant: bool) -> Any:
    if not isinstance(content, list):
        return content
    blocks: List[Any] = []
    for block in content:
        if isinstance(block, Mapping):
            if assistant and block.get("type") in _LANGCHAIN_CALL_BLOCKS:
                continue  # in tool_calls
            block = _media_part(block)
        blocks.append(block)
    return blocks


def _media_part(block: View) -> Any:
    """A LangChain standard data block (v1, or v0 with ``source_type``) as the Chat
    Completions part the media-aware count reads; any other block as it is."""
    kind, mime = block.get("type"), block.get("mime_type")
    data = _block_data(block)
    if kind == "image":
        url = block.get("url") if data is None else f"data:{mime};base64,{data}"
        if isinstance(url, str):
            return {"type": "image_url", "image_url": {"url": url}}
    elif data is None:
        return block
    elif kind == "file":
        return {"type": "file", "file": {"file_data": f"data:{mime};base64,{data}"}}
    elif kind == "audio":
        audio_format = str(mime or "audio/wav").rpartition("/")[2]
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    return block


def _block_data(block: View) -> Any:
    """A standard data block's base64 payload (v1 ``base64``, v0 ``data``), or ``None``."""
    data = block.get("base64")
    if data is None and block.get("source_type") == "base64":
        return block.get("data")
    return data


# --- pydantic-ai --------------------------------------------------------------


def _text(value: Any) -> Json:
    return {"type": "text", "text": value if isinstance(value, str) else str(value)}


def _pydantic_response(response: Any) -> Json:
    blocks: List[Json] = []
    for part in response.parts:
        kind = getattr(part, "part_kind", None)
        if kind == "tool-call":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "input": _call_arguments(part),
                }
            )
        elif kind == "thinking":
            blocks.append({"type": "thinking", "thinking": part.content})
        else:
            # Text, and built-in tool calls/returns the provider pairs itself.
            blocks.append(_text(getattr(part, "content", "")))
    return {"role": "assistant", "content": blocks}


def _call_arguments(part: Any) -> Any:
    as_dict = getattr(part, "args_as_dict", None)
    if callable(as_dict):
        return as_dict()
    args = part.args
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args if args is not None else {}


def _pydantic_request(request: Any) -> Json:
    blocks: List[Json] = []
    trailing: List[Json] = []  # a return's audio and video, which a tool_result cannot hold
    for part in request.parts:
        kind = getattr(part, "part_kind", None)
        if kind == "tool-return":
            blocks.append(_tool_result(part, trailing))
        elif kind == "retry-prompt" and getattr(part, "tool_name", None) is not None:
            # A retry that answers a tool call is sent as that call's (failed) result.
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": part.tool_call_id,
                    "content": _returned(part, "model_response"),
                    "is_error": True,
                }
            )
        elif kind == "retry-prompt":
            blocks.append(_text(_returned(part, "model_response")))
        elif kind == "user-prompt" and not isinstance(part.content, str):
            for item in part.content:
                block = _prompt_block(item)
                if block is not None:
                    blocks.append(block)
        else:
            # user-prompt text, system-prompt, retry feedback
            blocks.append(_text(getattr(part, "content", "")))
    return {"role": "user", "content": blocks + trailing}


def _returned(part: Any, method: str) -> Any:
    render = getattr(part, method, None)
    if callable(render):
        return render()
    content = getattr(part, "content", "")
    return content if isinstance(content, str) else json.dumps(content, default=str)


# The kinds of pydantic-ai's file items (their ``kind`` discriminator).
_FILE_KINDS = frozenset(
    {"binary", "image-url", "document-url", "audio-url", "video-url", "uploaded-file"}
)


def _tool_result(part: Any, trailing: List[Json]) -> Json:
    content = part.content
    items = content if isinstance(content, list) else [content]
    files = [item for item in items if getattr(item, "kind", None) in _FILE_KINDS]
    block: Json = {"type": "tool_result", "tool_use_id": part.tool_call_id}
    text = _returned(part, "model_response_str")
    if not files:
        block["content"] = text
        return block
    # As Anthropic's model sends a return with files: its text, then the files' blocks.
    block["content"] = _with_files(text, files, trailing) or ""
    if getattr(part, "outcome", "success") in ("failed", "retried"):
        block["is_error"] = True
    return block


def _with_files(text: Any, files: List[Any], trailing: List[Json]) -> List[Json]:
    """A tool return's text and its files' blocks; its audio and video go to ``trailing``."""
    inner: List[Json] = [_text(text)] if text else []
    for media in map(_prompt_block, files):
        if media is not None:
            (inner if media.get("type") in ("image", "document") else trailing).append(media)
    return inner


def _prompt_block(item: Any) -> Optional[Json]:
    """One item of a prompt (or a tool's file) as the block the core reads and prices."""
    if isinstance(item, str):
        return _text(item)
    kind = getattr(item, "kind", None)
    if kind in ("text-content", "structured-content"):
        return _text(item.content)
    if kind == "cache-point":
        return None  # a marker, not content
    if kind == "binary":
        return _binary_block(item)
    if kind in _URL_BLOCKS:
        return _URL_BLOCKS[kind](item.url)
    if kind == "uploaded-file":
        image = str(getattr(item, "media_type", "")).startswith("image/")
        source = {"type": "file", "file_id": item.file_id}
        return {"type": "image" if image else "document", "source": source}
    return {"type": str(kind if kind is not None else type(item).__name__)}  # named, not counted


# pydantic-ai's URL items, as the block each is sent as.
_URL_BLOCKS: Dict[str, Callable[[Any], Json]] = {
    "image-url": lambda url: {"type": "image", "source": {"type": "url", "url": url}},
    "document-url": lambda url: {"type": "document", "source": {"type": "url", "url": url}},
    "audio-url": lambda url: {"type": "input_audio", "input_audio": {"url": url}},
    "video-url": lambda url: {"video": {"source": {"s3Location": {"uri": url}}}},
}


def _binary_block(item: Any) -> Json:
    media_type = str(item.media_type)
    major, _, minor = media_type.partition("/")
    data = bytes(item.data)
    if major == "text":
        # A text file is its text to the provider (Anthropic's plain-text document).
        text = data.decode("utf-8", "replace")
        return {
            "type": "document",
            "source": {"type": "text", "media_type": media_type, "data": text},
        }
    encoded = base64.b64encode(data).decode("ascii")
    if major == "image":
        source = {"type": "base64", "media_type": media_type, "data": encoded}
        return {"type": "image", "source": source}
    if major == "audio":
        return {"type": "input_audio", "input_audio": {"data": encoded, "format": minor}}
    if major == "video":
        return {"video": {"format": minor, "source": {"bytes": encoded}}}
    source = {"type": "base64", "media_type": media_type, "data": encoded}
    return {"type": "document", "source": source}


def _user_content(item: Any) -> Json:
    if isinstance(item, str):
        return _text(item)
    # Images, audio, documents: named, not counted (their cost is the provider's own).
    return {"type": str(getattr(item, "kind", type(item).__name__))}


# --- openai-agents ------------------------------------------------------------


def _agents_view(item: Any) -> Optional[Json]:
    raw = getattr(item, "raw_item", None)
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", exclude_unset=True)
        if isinstance(dumped, dict):
            return dumped
    return None  # not a shape this module knows: the caller decides, no guess


# --- Mistral ------------------------------------------------------------------


def _mistral_view(message: Any) -> Optional[Json]:
    # What the SDK's request serialiser sends: by alias, nulls left out, defaults in.
    dumped = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped if isinstance(dumped, dict) else None


# --- LlamaIndex ---------------------------------------------------------------


def _enum_value(value: Any) -> Any:
    return getattr(value, "value", value)


def _llama_index_view(message: Any) -> Json:
    # The shape llama-index-llms-openai sends: role, text, then additional_kwargs.
    role = _enum_value(message.role)
    view: Json = {"role": role, "content": message.content}
    calls = _llama_index_calls(message)
    if calls:
        view["tool_calls"] = calls
    extra = message.additional_kwargs or {}
    view.update({k: v for k, v in extra.items() if not (k == "tool_calls" and calls)})
    if calls_tools(view):
        view["content"] = view["content"] or None
    return view


def _llama_index_calls(message: Any) -> List[Json]:
    calls = []
    for block in getattr(message, "blocks", None) or ():
        if type(block).__name__ == "ToolCallBlock":
            arguments = block.tool_kwargs
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            function = {"name": block.tool_name, "arguments": arguments}
            calls.append({"id": block.tool_call_id, "type": "function", "function": function})
    return calls


# --- AutoGen ------------------------------------------------------------------
# What AutoGen's OpenAI client sends, where it fits one Anthropic-form message: a user
# message's source as its name, a call's arguments as the very text the model wrote.


def _autogen_system(message: Any) -> Json:
    return {"role": "system", "content": message.content}


def _autogen_user(message: Any) -> Json:
    content = message.content
    if not isinstance(content, str):
        content = [_user_content(item) for item in content]
    return {"role": "user", "name": message.source, "content": content}


def _autogen_results(message: Any) -> Json:
    blocks: List[Json] = []
    for result in message.content:
        block: Json = {"type": "tool_result", "tool_use_id": result.call_id}
        block["content"] = result.content
        if getattr(result, "is_error", False):
            block["is_error"] = True
        blocks.append(block)
    return {"role": "user", "content": blocks}


def _autogen_assistant(message: Any) -> Json:
    # Its text, or its function calls after its thought.
    content = message.content
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    thought = getattr(message, "thought", None)
    uses = [_text(thought)] if thought else []
    uses += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in content
    ]
    return {"role": "assistant", "content": uses}


_AUTOGEN = {
    "SystemMessage": _autogen_system,
    "UserMessage": _autogen_user,
    "FunctionExecutionResultMessage": _autogen_results,
    "AssistantMessage": _autogen_assistant,
}


# --- smolagents ---------------------------------------------------------------


def _smolagents_view(message: Any) -> Json:
    role = _enum_value(message.role)
    return {"role": _SMOLAGENTS_ROLES.get(role, role), "content": message.content}


# Per framework, in the order they are tried on each class of a message's MRO: the
# module its classes live in (the module itself when ``exact``, else any module under
# that prefix), and the reader of each message class it sends.
_LANGCHAIN = {name: partial(_langchain_view, role=role) for name, role in _LANGCHAIN_ROLES.items()}
_READERS: Tuple[Tuple[str, bool, Mapping[str, Callable[[Any], Optional[Json]]]], ...] = (
    ("langchain_core.messages", False, _LANGCHAIN),
    (
        "pydantic_ai.messages",
        True,
        {"ModelResponse": _pydantic_response, "ModelRequest": _pydantic_request},
    ),
    ("agents.items", False, dict.fromkeys(_AGENTS_ITEMS, _agents_view)),
    ("mistralai.", False, dict.fromkeys(_MISTRAL_MESSAGES, _mistral_view)),
    ("llama_index.core.", False, {"ChatMessage": _llama_index_view}),
    ("autogen_core.models", False, _AUTOGEN),
    ("smolagents.models", True, {"ChatMessage": _smolagents_view}),
)
