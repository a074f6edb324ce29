"""A LangChain request as its chat model sends it, for the LangChain and LangGraph integrations.

For a chat model recognised by its class (``ChatAnthropic``, ``ChatGoogleGenerativeAI``,
``ChatBedrockConverse``, ``ChatOllama``, or a binding of one), ``measured`` counts each message,
the system message and the tools as that integration writes them (following langchain-anthropic
1.7, langchain-google-genai 4.4, langchain-aws 1.9 and langchain-ollama 1.1); any other class is
counted as the core reads its messages. Each message is written alone, so that its count is never
under what is sent whatever compaction keeps beside it (docs/integrations/langchain.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    is_data_content_block,
)
from langchain_core.runnables import RunnableBinding
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctx_compact._contract import count_all, message_views

from .._callables import Beside
from ._common import Compactor, Counted
from ._langchain_messages import native

Json = Dict[str, Any]
Names = Mapping[Any, str]  # a call's id to its tool's name


# --- what the integrations share ----------------------------------------------


class _Data(NamedTuple):
    """A media block or part, read: its kind, MIME type, and base64 data or URL."""

    kind: str
    mime: Optional[str]
    data: Optional[str]
    url: Optional[str]


_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]+);base64,(?P<data>.*)$", re.DOTALL)


def _data(block: Mapping[str, Any]) -> Optional[_Data]:
    """A LangChain data block (v1, or v0 with ``source_type``) or an ``image_url`` part."""
    if block.get("type") == "image_url":
        url = block.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        return _at_url("image", None, url) if isinstance(url, str) else None
    if not is_data_content_block(dict(block)):
        return None
    data = block.get("base64")
    if data is None and block.get("source_type") == "base64":
        data = block.get("data")
    url = block.get("url") if data is None else None
    if isinstance(url, str):
        return _at_url(block["type"], block.get("mime_type"), url)
    return _Data(block["type"], block.get("mime_type"), data, url)


def _at_url(kind: str, mime: Optional[str], url: str) -> _Data:
    # A data URL is read as the base64 data it holds.
    found = _DATA_URL.match(url)
    if found is not None:
        return _Data(kind, found["mime"], found["data"], None)
    return _Data(kind, mime, None, url)


def _parsed(arguments: Any) -> Any:
    # An invalid call's arguments, as the integrations parse them: a JSON object, or {}.
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def openai_tools(tools: Sequence[Any]) -> List[Any]:
    """Tools in OpenAI's form; a dict is a provider's own (``{"type": "web_search"}``) or one."""
    return [tool if isinstance(tool, dict) else convert_to_openai_tool(tool) for tool in tools]


def _function(schema: Any) -> Optional[Json]:
    """The function of a tool in OpenAI's form (``convert_to_openai_tool``), else ``None``."""
    if isinstance(schema, Mapping) and schema.get("type") == "function":
        function = schema.get("function")
        if isinstance(function, Mapping) and "name" in function:
            return dict(function)
    return None


def _tools(schemas: Sequence[Any], write: Callable[[Json], Json]) -> List[Any]:
    # Each tool in OpenAI's form as ``write`` sends it; a provider's own tool, or a
    # tool in its form already, as it is.
    functions = [_function(schema) for schema in schemas]
    return [schema if f is None else write(f) for schema, f in zip(schemas, functions)]


def _described(function: Json) -> Json:
    # A tool's description, which the integrations leave out when it is empty.
    return {"description": function["description"]} if function.get("description") else {}


def _kept(value: Mapping[str, Any], keys: Sequence[str]) -> Json:
    # The keys a client's model keeps, those that are set.
    return {key: value[key] for key in keys if value.get(key) is not None}


def _only(block: Mapping[str, Any], keys: Sequence[str]) -> Json:
    # The keys an integration copies from a block, in the block's order.
    return {key: value for key, value in block.items() if key in keys}


def _without_index(block: Mapping[str, Any]) -> Json:
    # A streamed block's position, which no integration sends.
    return {key: value for key, value in block.items() if key != "index"}


Writer = Callable[..., Optional[Any]]


def _writer(table: Mapping[str, Writer], block: Mapping[str, Any]) -> Optional[Writer]:
    # How an integration writes a block of this type, if it names it.
    kind = block.get("type")
    return table.get(kind) if isinstance(kind, str) else None


# --- Anthropic ----------------------------------------------------------------

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_ANTHROPIC_TEXT = ("type", "text", "cache_control", "citations")
_ANTHROPIC_THINKING = ("type", "thinking", "cache_control", "signature")


def _anthropic_id(call_id: Any) -> Any:
    # Anthropic takes ids of [a-zA-Z0-9_-] only: another provider's is sent hashed.
    if not isinstance(call_id, str) or not call_id or _ANTHROPIC_ID.match(call_id):
        return call_id
    return "toolu_" + hashlib.sha256(call_id.encode()).hexdigest()[:24]


def _anthropic_media(found: _Data) -> Json:
    kind = "image" if found.kind == "image" else "document"
    if found.data is not None:
        mime = found.mime or ("image/png" if kind == "image" else "application/pdf")
        source: Json = {"type": "base64", "media_type": mime, "data": found.data}
    elif found.url is not None:
        source = {"type": "url", "url": found.url}
    else:
        source = {"type": "file", "file_id": None}
    return {"type": kind, "source": source}


def _anthropic_tool(function: Json) -> Json:
    schema = {"input_schema": function.get("parameters")}
    return {"name": function["name"], **schema, **_described(function)}


def _anthropic_use(call_id: Any, name: Any, args: Any) -> Json:
    return {"type": "tool_use", "name": name, "input": args, "id": _anthropic_id(call_id)}


def _anthropic_content(content: Any, provider: Optional[str]) -> Any:
    if not isinstance(content, list):
        return content
    blocks = [_anthropic_block(block, provider) for block in content]
    return [block for block in blocks if block is not None]


def _anthropic_block(block: Any, provider: Optional[str]) -> Optional[Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        return block
    found = _data(block)
    if found is not None:
        return _anthropic_media(found)
    kind = block.get("type")
    if kind == "refusal" or (kind in ("reasoning", "function_call") and provider != "anthropic"):
        return None  # left out: another provider's reasoning and calls are not sent
    write = _writer(_ANTHROPIC_BLOCKS, block)
    return write(block) if write is not None else _without_index(block)


def _anthropic_text(block: Mapping[str, Any]) -> Optional[Json]:
    return _only(block, _ANTHROPIC_TEXT) if block.get("text", "").strip() else None


def _anthropic_thinking(block: Mapping[str, Any]) -> Json:
    thinking = _only(block, _ANTHROPIC_THINKING)
    if "signature" in thinking:
        thinking.setdefault("thinking", "")
    return thinking


def _anthropic_result(block: Mapping[str, Any]) -> Json:
    return {
        **block,
        "content": _anthropic_content(block.get("content"), None),
        "tool_use_id": _anthropic_id(block.get("tool_use_id")),
    }


_ANTHROPIC_BLOCKS: Dict[str, Writer] = {
    "text": _anthropic_text,
    "thinking": _anthropic_thinking,
    "redacted_thinking": lambda block: _only(block, ("type", "cache_control", "data")),
    "tool_result": _anthropic_result,
}


class _Anthropic:
    """``ChatAnthropic``: the system apart; a result is a ``tool_result`` in a user turn."""

    def system(self, message: Optional[BaseMessage], joined: bool) -> Tuple[List[Any], List[Any]]:
        if message is None:
            return [], []
        content = message.content
        if joined and isinstance(content, str):
            content = [content]  # another system message joins it: both are sent as blocks
        if isinstance(content, list):
            content = [
                {"type": "text", "text": block}
                if isinstance(block, str)
                else _only(block, _ANTHROPIC_TEXT)
                for block in content
                if isinstance(block, str) or block.get("type") == "text"
            ]
        return [], [content]

    def tools(self, schemas: Sequence[Any]) -> List[Any]:
        return _tools(schemas, _anthropic_tool)

    def message(self, message: BaseMessage, names: Names, joined: bool) -> List[Any]:
        if isinstance(message, SystemMessage):
            return self.system(message, True)[1]  # joins the request's system, as blocks
        if isinstance(message, ToolMessage):
            result = {
                "type": "tool_result",
                "content": _anthropic_content(message.content, None),
                "tool_use_id": _anthropic_id(message.tool_call_id),
                "is_error": message.status == "error",
            }
            return [{"role": "user", "content": [result]}]
        if isinstance(message, AIMessage):
            return [{"role": "assistant", "content": self._assistant(message)}]
        if isinstance(message, HumanMessage):
            content = message.content
            if joined and isinstance(content, str):
                content = [content]  # a run of user turns is sent as one, of blocks
            return [{"role": "user", "content": _anthropic_content(content, None)}]
        return []  # a class ChatAnthropic does not send

    def _assistant(self, message: AIMessage) -> Any:
        content = message.content
        if not isinstance(content, str):
            blocks = self._blocks(message)
        elif message.tool_calls or message.invalid_tool_calls:
            blocks = [{"type": "text", "text": content}] if content else []
        else:
            return content
        return self._with_calls(blocks, message)

    def _blocks(self, message: AIMessage) -> List[Any]:
        # An assistant turn's blocks; a tool_use block takes its call's parsed arguments.
        provider = (message.response_metadata or {}).get("model_provider")
        calls = {call["id"]: call for call in message.tool_calls}
        blocks = [
            self._use(block, calls)
            if isinstance(block, Mapping) and block.get("type") == "tool_use"
            else _anthropic_block(block, provider)
            for block in message.content  # a list: _assistant sends a text itself
        ]
        return [block for block in blocks if block is not None]

    def _with_calls(self, blocks: List[Any], message: AIMessage) -> List[Any]:
        # The calls no tool_use block sends yet, appended; an invalid one needs an id and a name.
        calls = [(call["id"], call["name"], call["args"]) for call in message.tool_calls]
        calls += [
            (call.get("id"), call.get("name"), _parsed(call.get("args")))
            for call in message.invalid_tool_calls
            if call.get("id") and call.get("name")
        ]
        sent = {
            block.get("id")
            for block in blocks
            if isinstance(block, Mapping) and block.get("type") == "tool_use"
        }
        for call_id, name, args in calls:
            if _anthropic_id(call_id) not in sent:
                blocks.append(_anthropic_use(call_id, name, args))
                sent.add(_anthropic_id(call_id))
        return blocks

    def _use(self, block: Mapping[str, Any], calls: Mapping[Any, Any]) -> Json:
        call = calls.get(block.get("id"))
        if call is not None and not block.get("caller"):
            made = _anthropic_use(call["id"], call["name"], call["args"])
        else:
            args = block.get("input") or _parsed(block.get("partial_json"))
            made = _anthropic_use(block.get("id"), block.get("name"), args)
            if block.get("caller"):
                made["caller"] = block["caller"]
        if block.get("toolset_name"):
            made["toolset_name"] = block["toolset_name"]
        return made


# --- Gemini -------------------------------------------------------------------

# Where ChatGoogleGenerativeAI keeps each call's thought signature, by the call's id.
_GEMINI_SIGNATURES = "__gemini_function_call_thought_signatures__"
# What it sends on a call of a Gemini 3 model that has no thought signature: no message
# holds it, so it is counted on every turn of calls that could get it.
_GEMINI_NO_SIGNATURE = "skip_thought_signature_validator"
_GEMINI_VERSION = re.compile(r"gemini-(\d+)")
_GEMINI_CALL_BLOCKS = frozenset(
    {
        "tool_call",
        "tool_call_chunk",
        "invalid_tool_call",
        "function_call_signature",
        "function_call",
        "tool_use",
    }
)


def _signature(value: Any) -> Optional[str]:
    # A thought signature as the SDK sends its bytes: base64.
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii") if value else None
    return value if isinstance(value, str) and value else None


def _block_signature(block: Mapping[str, Any]) -> Optional[str]:
    extras = block.get("extras")
    return _signature(
        block.get("thought_signature")
        or block.get("signature")
        or (extras.get("signature") if isinstance(extras, Mapping) else None)
    )


def _gemini_media(found: _Data) -> Json:
    if found.data is not None:
        return {"inlineData": {"mimeType": found.mime, "data": found.data}}
    # A URL's bytes are fetched and sent inline; as a file they are priced the same.
    return {"fileData": {"fileUri": found.url, "mimeType": found.mime}}


def _gemini_schema(value: Any) -> Any:
    # A JSON schema with Gemini's upper-case type names.
    if isinstance(value, Mapping):
        return {
            key: item.upper() if key == "type" and isinstance(item, str) else _gemini_schema(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_gemini_schema(item) for item in value]
    return value


def _gemini_declaration(function: Json) -> Json:
    declaration: Json = {"name": function["name"], **_described(function)}
    if function.get("parameters") is not None:
        parameters = _gemini_schema(function["parameters"])
        declaration["parameters"] = {"required": [], **parameters}
    return declaration


def _gemini_text(block: Mapping[str, Any], kind: str, trim: bool) -> Optional[Json]:
    # A text, or a thought (kind "thinking" or "reasoning"), with its signature.
    text = block.get("text") if kind == "text" else block.get(kind)
    signature = _block_signature(block)
    if trim and not text and signature is None:
        return None
    part: Json = {"text": text or ""}
    if kind != "text":
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _gemini_response(content: Any) -> Tuple[List[Any], Any]:
    # A result's media, sent as parts before it, and the rest: its response.
    if isinstance(content, str):
        try:
            return [], json.loads(content)
        except ValueError:
            return [], content
    if not isinstance(content, list):
        return [], content
    parts: List[Any] = []
    response: List[Any] = []
    for block in content:
        found = _data(block) if isinstance(block, Mapping) else None
        if found is not None:
            parts.append(_gemini_media(found))
        else:
            response.append(block)
    return parts, response


class _Gemini:
    """``ChatGoogleGenerativeAI``: contents of parts; calls without ids; results apart."""

    def __init__(self, model: Any) -> None:
        name = str(getattr(model, "model", "") or "").lower().rsplit("/", 1)[-1]
        self.signs_calls = any(int(major) >= 3 for major in _GEMINI_VERSION.findall(name))

    def system(self, message: Optional[BaseMessage], joined: bool) -> Tuple[List[Any], List[Any]]:
        if message is None:
            return [], []
        return [], [{"parts": self._parts(message.content)}]

    def tools(self, schemas: Sequence[Any]) -> List[Any]:
        functions = [_function(schema) for schema in schemas]
        declarations = [_gemini_declaration(f) for f in functions if f is not None]
        own = [schema for schema, f in zip(schemas, functions) if f is None]
        return ([{"functionDeclarations": declarations}] if declarations else []) + own

    def message(self, message: BaseMessage, names: Names, joined: bool) -> List[Any]:
        if isinstance(message, SystemMessage):
            return [{"parts": self._parts(message.content)}]  # joins the system
        if isinstance(message, ToolMessage):
            return [{"role": "user", "parts": self._result(message, names)}]
        if isinstance(message, AIMessage):
            return [{"role": "model", "parts": self._model(message) or [{"text": ""}]}]
        if isinstance(message, HumanMessage):
            if not message.content:
                return []  # ChatGoogleGenerativeAI leaves an empty one out
            return [{"role": "user", "parts": self._parts(message.content)}]
        return []

    def _parts(self, content: Any, model: bool = False, trim: bool = False) -> List[Any]:
        # model: an AIMessage's, whose call blocks are sent from its tool_calls; trim: one
        # with tool calls, whose empty texts ChatGoogleGenerativeAI leaves out.
        if isinstance(content, str):
            return [] if trim and not content else [{"text": content}]
        parts = [self._part(block, model, trim) for block in content]
        return [part for part in parts if part is not None]

    def _part(self, block: Any, model: bool, trim: bool) -> Optional[Any]:
        if isinstance(block, str):
            return None if trim and not block else {"text": block}
        if not isinstance(block, Mapping):
            return block
        found = _data(block)
        if found is not None:
            return _gemini_media(found)
        kind = block.get("type")
        if kind in ("text", "thinking", "reasoning"):
            return _gemini_text(block, kind, trim)
        if (model and kind in _GEMINI_CALL_BLOCKS) or kind == "refusal":
            return None  # a call is sent from tool_calls
        return _without_index(block)

    def _model(self, message: AIMessage) -> List[Any]:
        parts = self._parts(message.content, True, bool(message.tool_calls))
        if message.tool_calls:
            return parts + self._calls(message)
        raw = (message.additional_kwargs or {}).get("function_call")
        if isinstance(raw, Mapping):
            return [
                {"functionCall": {"name": raw.get("name"), "args": _parsed(raw.get("arguments"))}}
            ]
        return parts

    def _calls(self, message: AIMessage) -> List[Any]:
        signatures = (message.additional_kwargs or {}).get(_GEMINI_SIGNATURES) or {}
        parts: List[Any] = []
        for index, call in enumerate(message.tool_calls):
            part: Json = {"functionCall": {"name": call["name"], "args": call["args"]}}
            signature = _signature(signatures.get(call.get("id")))
            if signature is None and index == 0 and self.signs_calls:
                signature = _GEMINI_NO_SIGNATURE
            if signature is not None:
                part["thoughtSignature"] = signature
            parts.append(part)
        return parts

    def _result(self, message: ToolMessage, names: Names) -> List[Any]:
        name = (
            message.name
            or names.get(message.tool_call_id)
            or (message.additional_kwargs or {}).get("name")
        )
        parts, response = _gemini_response(message.content)
        function: Json = {
            "response": response if isinstance(response, dict) else {"output": response}
        }
        if name is not None:
            function["name"] = name
        return [*parts, {"functionResponse": function}]


# --- Bedrock Converse ---------------------------------------------------------

_BEDROCK_EMPTY = "."  # what ChatBedrockConverse sends for empty content
_BEDROCK_FORMATS = {"jpg": "jpeg", "plain": "txt", "markdown": "md", "msword": "doc"}


def _bedrock_media(found: _Data) -> Json:
    subtype = (found.mime or "/").split("/", 1)[1].split(";", 1)[0]
    kind = found.kind if found.kind in ("image", "video") else "document"
    body: Json = {"format": _BEDROCK_FORMATS.get(subtype, subtype), "source": {"bytes": found.data}}
    return {kind: body}


def _bedrock_tool(function: Json) -> Json:
    parameters = {"inputSchema": {"json": function.get("parameters")}}
    return {"toolSpec": {"name": function["name"], **_described(function), **parameters}}


def _bedrock_use(call_id: Any, args: Any, name: Any) -> Json:
    return {"toolUse": {"toolUseId": call_id, "input": args, "name": name}}


def _bedrock_blocks(content: Any, model: bool) -> List[Any]:
    # model: an AIMessage's, from which blocks Converse does not know are left out.
    if isinstance(content, str):
        content = [content if content.strip() else _BEDROCK_EMPTY]
    elif not content:
        content = [_BEDROCK_EMPTY]
    blocks = [_bedrock_block(block, model) for block in content]
    # Empty texts are left out.
    return [
        b
        for b in blocks
        if b is not None and not (isinstance(b, Mapping) and b.get("text", True) == "")
    ]


def _bedrock_block(block: Any, model: bool) -> Optional[Any]:
    if isinstance(block, str):
        return {"text": block}
    if not isinstance(block, Mapping) or "type" not in block:
        return block  # a Converse block already
    found = _data(block)
    if found is not None:
        return _bedrock_media(found)
    write = _writer(_BEDROCK_BLOCKS, block)
    if write is not None:
        return write(block, model)
    return None if model else _without_index(block)


def _bedrock_text(block: Mapping[str, Any], model: bool) -> Json:
    text = block.get("text")
    return {"text": text if isinstance(text, str) and text.strip() else _BEDROCK_EMPTY}


def _bedrock_tool_use(block: Mapping[str, Any], model: bool) -> Json:
    args = block.get("input")
    return _bedrock_use(
        block.get("id"), _parsed(args) if isinstance(args, str) else args, block.get("name")
    )


def _bedrock_call(block: Mapping[str, Any], model: bool) -> Optional[Json]:
    # An invalid call is sent without its arguments, if it has an id and a name.
    valid = block["type"] == "tool_call"
    if not (valid or (block.get("id") and block.get("name"))):
        return None
    args = block.get("args") if valid else {}
    return _bedrock_use(block.get("id") or "", args or {}, block.get("name", ""))


def _bedrock_result(block: Mapping[str, Any], model: bool) -> Json:
    result = {
        "toolUseId": block.get("tool_use_id", block.get("toolUseId")),
        "content": _bedrock_blocks(block.get("content"), model) or [{"text": _BEDROCK_EMPTY}],
        "status": "error" if block.get("is_error", block.get("isError")) else "success",
    }
    return {"toolResult": result}


def _bedrock_reasoning(block: Mapping[str, Any], model: bool) -> Optional[Json]:
    inner = block.get("reasoningContent") or block.get("reasoning_content") or {}
    if inner.get("redactedContent"):
        return {"reasoningContent": {"redactedContent": inner["redactedContent"]}}
    return _reasoning(inner.get("text", ""), inner.get("signature", ""))


def _reasoning(text: Any, signature: Any) -> Optional[Json]:
    # Reasoning as Converse takes it back; what has neither text nor signature is left out.
    if not text and not signature:
        return None
    inner: Json = {"text": text}
    if signature:
        inner["signature"] = signature
    return {"reasoningContent": {"reasoningText": inner}}


_BEDROCK_BLOCKS: Dict[str, Writer] = {
    "text": _bedrock_text,
    "tool_use": _bedrock_tool_use,
    "server_tool_use": _bedrock_tool_use,
    "tool_call": _bedrock_call,
    "invalid_tool_call": _bedrock_call,
    "tool_result": _bedrock_result,
    "server_tool_result": _bedrock_result,
    "thinking": lambda block, model: _reasoning(
        block.get("thinking", ""), block.get("signature", "")
    ),
    "reasoning_content": _bedrock_reasoning,
    "json": lambda block, model: {"json": block.get("json")},
}


class _Bedrock:
    """``ChatBedrockConverse``: every text in a block; a result a ``toolResult`` in a user turn."""

    def system(self, message: Optional[BaseMessage], joined: bool) -> Tuple[List[Any], List[Any]]:
        # The system list is sent with every request, empty without a system message.
        return [], [_bedrock_blocks(message.content, False) if message is not None else []]

    def tools(self, schemas: Sequence[Any]) -> List[Any]:
        return _tools(schemas, _bedrock_tool)

    def message(self, message: BaseMessage, names: Names, joined: bool) -> List[Any]:
        if isinstance(message, SystemMessage):
            return [_bedrock_blocks(message.content, False)]  # joins the system
        if isinstance(message, ToolMessage):
            result = {
                "content": _bedrock_blocks(message.content, False) or [{"text": _BEDROCK_EMPTY}],
                "toolUseId": message.tool_call_id,
                "status": message.status,
            }
            return [{"role": "user", "content": [{"toolResult": result}]}]
        if isinstance(message, AIMessage):
            blocks = self._calls(_bedrock_blocks(message.content, True), message)
            return [{"role": "assistant", "content": blocks or [{"text": _BEDROCK_EMPTY}]}]
        if isinstance(message, HumanMessage):
            return [{"role": "user", "content": _bedrock_blocks(message.content, False)}]
        return []

    def _calls(self, blocks: List[Any], message: AIMessage) -> List[Any]:
        # Each call of tool_calls updates its toolUse block, or is appended as one.
        if message.tool_calls and blocks == [{"text": _BEDROCK_EMPTY}]:
            blocks = []
        uses = {
            block["toolUse"].get("toolUseId"): block["toolUse"]
            for block in blocks
            if isinstance(block, Mapping) and isinstance(block.get("toolUse"), dict)
        }
        for call in message.tool_calls:
            use = _bedrock_use(call["id"], call["args"], call["name"])
            if call["id"] in uses:
                uses[call["id"]].update(use["toolUse"])
            else:
                blocks.append(use)
        return blocks


# --- Ollama -------------------------------------------------------------------


_OLLAMA_PROPERTY = ("type", "items", "description", "enum")
_OLLAMA_ROLES = (
    (ToolMessage, "tool"),
    (SystemMessage, "system"),
    (AIMessage, "assistant"),
    (HumanMessage, "user"),
)


def _ollama_tool(function: Json) -> Json:
    # The ollama client sends a tool through its Tool model, which keeps only the
    # fields Ollama reads, each property's type, items, description and enum.
    sent = _kept(function, ("name", "description"))
    parameters = function.get("parameters")
    if isinstance(parameters, Mapping):
        kept = _kept(parameters, ("type", "$defs", "items", "required"))
        kept.setdefault("type", "object")
        properties = parameters.get("properties")
        if isinstance(properties, Mapping):
            kept["properties"] = {
                name: _kept(value, _OLLAMA_PROPERTY) if isinstance(value, Mapping) else {}
                for name, value in properties.items()
            }
        sent["parameters"] = kept
    return {"type": "function", "function": sent}


def _ollama_role(message: BaseMessage) -> Optional[str]:
    for cls, name in _OLLAMA_ROLES:
        if isinstance(message, cls):
            return name
    return message.role if isinstance(message, ChatMessage) else None


class _Ollama:
    """``ChatOllama``: Chat-like messages, its text joined, calls without ids, images apart."""

    def system(self, message: Optional[BaseMessage], joined: bool) -> Tuple[List[Any], List[Any]]:
        return (self.message(message, {}, False) if message is not None else []), []

    def tools(self, schemas: Sequence[Any]) -> List[Any]:
        return _tools(schemas, _ollama_tool)

    def message(self, message: BaseMessage, names: Names, joined: bool) -> List[Any]:
        role = _ollama_role(message)
        if role is None:
            return []  # a class ChatOllama does not send
        text, images = self._content(message.content)
        sent: Json = {"role": role}
        if text:
            sent["content"] = text
        if images:
            sent["images"] = images
        if isinstance(message, AIMessage):
            calls = [
                {"function": {"name": c["name"], "arguments": c["args"]}}
                for c in message.tool_calls
            ]
            if calls:
                sent["tool_calls"] = calls
            thinking = (message.additional_kwargs or {}).get("reasoning_content")
            if thinking:
                sent["thinking"] = thinking
        return [sent]

    def _content(self, content: Any) -> Tuple[str, List[Any]]:
        if isinstance(content, str):
            return content, []
        text = ""
        images: List[Any] = []
        for block in content:
            if isinstance(block, str):
                text += f"\n{block}"
            elif isinstance(block, Mapping) and block.get("type") == "text":
                text += f"\n{block.get('text', '')}"
            elif isinstance(block, Mapping):
                found = _data(block)
                if found is not None and found.kind == "image":
                    images.append(found.data if found.data is not None else found.url)
        return text, images


# --- the request --------------------------------------------------------------

_SENDERS: Dict[Tuple[str, str], Callable[[Any], Any]] = {
    ("langchain_anthropic", "ChatAnthropic"): lambda model: _Anthropic(),
    ("langchain_google_genai", "ChatGoogleGenerativeAI"): _Gemini,
    ("langchain_aws", "ChatBedrockConverse"): lambda model: _Bedrock(),
    ("langchain_ollama", "ChatOllama"): lambda model: _Ollama(),
}


def sender(model: Any) -> Any:
    """How ``model`` writes a request (``_Anthropic``, ...), or ``None`` for the Chat form.

    A binding (``model.bind_tools(...)``) is its model's. A class is known by
    its name and package, so no integration is imported to recognise it.
    """
    while isinstance(model, RunnableBinding):
        model = model.bound
    for cls in type(model).__mro__:
        made = _SENDERS.get((cls.__module__.split(".", 1)[0], cls.__name__))
        if made is not None:
            return made(model)
    return None


def _names(messages: Sequence[Any]) -> Dict[Any, str]:
    names: Dict[Any, str] = {}
    for message in messages:
        for call in getattr(message, "tool_calls", None) or ():
            names[call.get("id")] = call.get("name")
    return names


def _user_turn(message: Any) -> bool:
    return isinstance(message, (HumanMessage, ToolMessage))


def measured(
    compactor: Compactor,
    model: Any,
    messages: Sequence[Any],
    system: Optional[BaseMessage],
    tools: Sequence[Any],
) -> Tuple[Optional[Counted], Beside]:
    """The messages (to compact), the system message and the tools, counted as ``model`` sends them.

    ``tools`` are in OpenAI's form (``convert_to_openai_tool``) or a provider's
    own. Returns ``(counted, beside)``: ``counted`` is ``None`` when the messages
    are counted as the core reads them (a model of another class, or a
    ``count_tokens`` given); ``beside`` the system message's and the tools' tokens.
    """
    wire = sender(model) if compactor.options.count_tokens is None else None
    if wire is None:
        return None, compactor.beside([system] if system is not None else [], tools=tools)
    options = compactor.options
    counter = options.counter
    names = _names(messages)

    def count(message: Any, joined: bool) -> int:
        if not isinstance(message, BaseMessage):  # not LangChain's: as the core reads it
            return sum(count_all(message_views([message]), counter))
        return sum(count_all(wire.message(message, names, joined), counter))

    def recount(made: Any) -> int:
        # A summary or a cleared copy (a Chat Completions mapping), as the message it
        # becomes, wherever it lands.
        (message,) = native([made], messages)
        return count(message, True)

    # Whether a user turn may follow a message when it is sent (ChatAnthropic then sends
    # a prompt of text as a text block): the one after it now, or, after the messages kept
    # first, whatever compaction keeps after them. A summary may land anywhere.
    follows = [*map(_user_turn, messages[1:]), False]
    counts = [
        count(message, index < options.keep_head or follows[index])
        for index, message in enumerate(messages)
    ]
    joined = options.summary_role == "system" or any(
        isinstance(message, SystemMessage) for message in messages
    )
    sent, parts = wire.system(system, joined)
    return Counted(counts, recount), compactor.beside(sent, parts, wire.tools(tools))
