"""What a pydantic-ai request puts on the wire, for the model it goes to: to be counted.

``sent`` maps one request as ``OpenAIChatModel``, ``OpenAIResponsesModel`` or
``AnthropicModel`` (behind any wrapper model) sends it: each message's wire
JSON, and the instructions, the framework's statements and the tools beside
them. It reads pydantic-ai's public API (``prepare_request``,
``prepare_messages``, the parts' fields) and follows the adapters' private step
from parts to JSON as measured on pydantic-ai 2.78.0. Any other model class
gets ``None``: its messages are counted as the core reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.models.wrapper import WrapperModel

Json = Dict[str, Any]

CHAT = "chat"
RESPONSES = "responses"
ANTHROPIC = "anthropic"
# The model classes whose mapping is followed, by name (importing them would import
# the provider SDKs, which a user may not have).
_FORMS = {"OpenAIResponsesModel": RESPONSES, "OpenAIChatModel": CHAT, "AnthropicModel": ANTHROPIC}
# A tool return's outcomes sent as errors (pydantic-ai's ERROR_OUTCOMES).
_ERRORS = ("failed", "retried")
_TEXT_KINDS = ("text-content", "structured-content")


@dataclass(frozen=True)
class Sent:
    """One request as its model sends it.

    Attributes:
        messages: For each message given, the wire messages it becomes.
        system: Wire messages sent beside them that are never dropped (Chat
            Completions' system messages for the instructions).
        parts: Other values of the system prompt sent beside them (the
            Responses ``instructions``, Anthropic's ``system`` blocks).
        tools: Each tool's definition, as sent.
        prepared: Each message given as the model maps it (prepared, the
            framework's statement on frames taken out).
        mapper: Maps another message of the request (a summary, a cleared
            copy) to its wire messages.
    """

    messages: List[List[Json]]
    system: List[Json]
    parts: List[Any]
    tools: List[Any]
    prepared: List[Any]
    mapper: _Mapper


def _form(model: Any) -> Optional[str]:
    # The wire form of the model's class, found from the most derived class on.
    for cls in type(model).__mro__:
        if cls.__module__.startswith("pydantic_ai.models.") and cls.__name__ in _FORMS:
            return _FORMS[cls.__name__]
    return None


def sent(
    model: Any, messages: Sequence[Any], parameters: Any, settings: Any = None
) -> Optional[Sent]:
    """``messages`` and what goes beside them, as ``model`` sends them with ``parameters``.

    Args:
        model: The request's model (``request_context.model``, ``ctx.model``).
        messages: The request's ``ModelMessage`` list.
        parameters: Its ``ModelRequestParameters`` (tools, instruction parts).
        settings: Its model settings.

    Returns:
        The request as sent, or ``None`` for a model class not followed here.
    """
    while isinstance(model, WrapperModel):  # instrumentation, concurrency limits
        model = model.wrapped
    form = _form(model)
    if form is None:
        return None
    _, parameters = model.prepare_request(settings, parameters)
    prepared, added = _prepared(model, list(messages), parameters)
    instructions = [part.content for part in parameters.instruction_parts or ()]
    if instructions and not _standing(prepared):
        added = _opening_statement(model, parameters) + added
    mapper = _Mapper(model, form, settings)
    wire = [mapper.message(message) for message in prepared]
    tools = [mapper.tool(tool) for tool in (*parameters.function_tools, *parameters.output_tools)]
    system, beside = mapper.beside(added, instructions)
    return Sent(wire, system, beside, tools, prepared, mapper)


def _prepared(model: Any, given: List[Any], parameters: Any) -> Tuple[List[Any], List[str]]:
    """Each message as ``model`` maps it, and the statement on frames taken out of them.

    The statement goes in the first request holding a frame; when that one is
    dropped it moves to the next, so it is counted beside the messages, never dropped.
    """
    prepared = list(model.prepare_messages(list(given), parameters))
    if len(prepared) != len(given) or any(map(_reshaped, prepared, given)):
        return list(given), []  # reshaped (a native tool search split): each as it is
    for k, (message, original) in enumerate(zip(prepared, given)):
        new = _added_prompts(message, original)
        if new:
            parts = [p for p in message.parts if not any(p is n for n in new)]
            prepared[k] = dataclasses.replace(message, parts=parts)
            return prepared, [p.content for p in new]
    return prepared, []


def _reshaped(prepared: Any, given: Any) -> bool:
    return isinstance(prepared, ModelRequest) != isinstance(given, ModelRequest)


def _added_prompts(message: Any, original: Any) -> List[Any]:
    # The system prompts preparing added to a request.
    if not isinstance(message, ModelRequest) or message is original:
        return []
    own = {id(part) for part in original.parts}
    return [p for p in message.parts if isinstance(p, SystemPromptPart) and id(p) not in own]


def _standing(messages: Sequence[Any]) -> bool:
    """Whether the first request opens with a system prompt (pydantic-ai's standing prompt)."""
    first = next((m for m in messages if isinstance(m, ModelRequest)), None)
    return bool(first is not None and first.parts and isinstance(first.parts[0], SystemPromptPart))


def _opening_statement(model: Any, parameters: Any) -> List[str]:
    """What a model without a mid-conversation system role opens its instructions with.

    Such a model (Anthropic's) states on every request what the application's
    framed messages are, ahead of the standing system prompt or, without one,
    ahead of the instructions. The statement is pydantic-ai's own text; it is
    learnt from ``prepare_messages``, which puts it ahead of a standing prompt.
    """
    if model.profile.get("supports_inline_system_prompts", False):
        return []
    probe = [ModelRequest(parts=[SystemPromptPart(content="")])]
    opened = model.prepare_messages(probe, parameters)[:1] or probe
    return [p.content for p in opened[0].parts if isinstance(p, SystemPromptPart) and p.content]


def _media_type(item: Any) -> str:
    try:
        return str(item.media_type)
    except ValueError:  # a URL whose media type pydantic-ai cannot tell
        return ""


def _extension(item: Any) -> str:
    try:
        return str(item.format)
    except ValueError:
        return _media_type(item).rpartition("/")[2]


def _text_like(media_type: str) -> bool:
    bare = media_type.split(";", 1)[0].strip()
    return (
        bare.startswith("text/")
        or bare in ("application/json", "application/xml", "application/x-yaml", "application/yaml")
        or bare.endswith(("+json", "+xml"))
    )


def _inlined(item: Any) -> str:
    # A text file inlined into a text part, delimited as pydantic-ai does.
    text = bytes(item.data).decode("utf-8", "replace")
    media_type, identifier = _media_type(item), item.identifier
    return (
        f'-----BEGIN FILE id="{identifier}" type="{media_type}"-----\n{text}\n'
        f'-----END FILE id="{identifier}"-----'
    )


def _detail(item: Any) -> Optional[str]:
    metadata = getattr(item, "vendor_metadata", None)
    return metadata.get("detail", "auto") if metadata else None


def _each(item_of: Callable[[Any], Optional[Json]], items: Any) -> List[Json]:
    # The items the API takes, in order; the others (a cache point) are not sent.
    return [json for json in map(item_of, items) if json is not None]


def chat_tool(definition: Any, strict: bool) -> Json:
    """A tool's definition as ``OpenAIChatModel`` sends it; ``strict``: the profile allows it."""
    function: Json = {
        "name": definition.name,
        "description": definition.description or "",
        "parameters": definition.parameters_json_schema,
    }
    if definition.strict and strict:
        function["strict"] = definition.strict
    return {"type": "function", "function": function}


def _chat_result(call_id: Any, content: Any) -> Json:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _responses_result(call_id: Any, output: Any) -> Json:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _chat_image(url: str, item: Any) -> Json:
    image: Json = {"url": url}
    if _detail(item):
        image["detail"] = _detail(item)
    return {"image_url": image, "type": "image_url"}


def _chat_binary(item: Any) -> Optional[Json]:
    media_type = _media_type(item)
    yaml = media_type.split(";", 1)[0].endswith("+yaml")
    if _text_like(media_type) or (yaml and not item.is_image and not item.is_document):
        return {"text": _inlined(item), "type": "text"}
    if item.is_image:
        return _chat_image(item.data_uri, item)
    if item.is_audio:
        audio = {"data": item.base64, "format": _extension(item)}
        return {"input_audio": audio, "type": "input_audio"}
    if item.is_video:
        return None  # refused by Chat Completions: the request fails
    file = {"file_data": item.data_uri, "filename": f"filename.{_extension(item)}"}
    return {"file": file, "type": "file"}


def _responses_image(url: str, item: Any) -> Json:
    return {"image_url": url, "type": "input_image", "detail": _detail(item) or "auto"}


def _responses_binary(item: Any) -> Optional[Json]:
    if item.is_image:
        return _responses_image(item.data_uri, item)
    if not item.is_document:
        return None  # audio and video are refused: the request fails
    name = f"filename.{_extension(item)}"
    return {"type": "input_file", "file_data": item.data_uri, "filename": name}


def _responses_uploaded(item: Any) -> Json:
    if _media_type(item).startswith("image/"):
        return {"type": "input_image", "file_id": item.file_id, "detail": "auto"}
    return {"type": "input_file", "file_id": item.file_id}


def _anthropic_binary(item: Any) -> Optional[Json]:
    media_type = _media_type(item)
    if media_type == "text/plain" and not item.is_image:
        text = bytes(item.data).decode("utf-8", "replace")
        source = {"data": text, "media_type": media_type, "type": "text"}
        return {"source": source, "type": "document"}
    if not (item.is_image or item.is_document):
        return None  # audio and video are refused: the request fails
    source = {"data": item.base64, "media_type": media_type, "type": "base64"}
    return {"source": source, "type": "image" if item.is_image else "document"}


def _anthropic_retry(part: Any) -> Json:
    # A retry prompt: an error result of the call it answers, or the user's text.
    text = part.model_response()
    if part.tool_name is None:
        return {"text": text, "type": "text"}
    result = {"tool_use_id": part.tool_call_id, "type": "tool_result"}
    return {**result, "content": [{"text": text, "type": "text"}], "is_error": True}


class _Mapper:
    """The adapter's step from parts to JSON, for one form."""

    def __init__(self, model: Any, form: str, settings: Any) -> None:
        self.form = form
        profile = model.profile
        self.role = profile.get("openai_system_prompt_role", None) or "system"
        self.strict = profile.get("openai_supports_strict_tool_definition", True)
        self.anthropic_strict = profile.get("supports_json_schema_output", False)
        self.tags: Tuple[str, str] = profile.get("thinking_tags", ("<think>", "</think>"))
        self.item_ids = (settings or {}).get(
            "openai_send_reasoning_ids",
            profile.get("openai_supports_encrypted_reasoning_content", False),
        )

    # --- messages -----------------------------------------------------------------

    def message(self, message: Any) -> List[Json]:
        """The wire messages of a (prepared) ``ModelRequest`` or ``ModelResponse``."""
        request, response = {
            CHAT: (self._chat_request, self._chat_response),
            RESPONSES: (self._responses_request, self._responses_response),
            ANTHROPIC: (self._anthropic_request, self._anthropic_response),
        }[self.form]
        parts = list(message.parts)
        return response(parts) if isinstance(message, ModelResponse) else request(parts)

    def _thinking(self, content: str) -> str:
        return f"{self.tags[0]}\n{content}\n{self.tags[1]}"

    # Chat Completions (OpenAIChatModel)

    def _openai_prompt(self, part: Any, result: Callable[[Any, Any], Json]) -> List[Json]:
        """A system prompt, or a retry prompt (left as stored when the messages could not be
        prepared): to the tool call it answers, as ``result(call_id, text)``, or the user's."""
        kind = getattr(part, "part_kind", None)
        if kind == "system-prompt":
            return [{"role": self.role, "content": part.content}]
        if kind != "retry-prompt":
            return []
        if part.tool_name is not None:
            return [result(part.tool_call_id, part.model_response())]
        return [{"role": "user", "content": part.model_response()}]

    def _chat_request(self, parts: List[Any]) -> List[Json]:
        out: List[Json] = []
        files: List[Any] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "user-prompt":
                out.append({"role": "user", "content": self._chat_content(part.content)})
            elif kind == "tool-return":
                text, attached = part.model_response_str_and_user_content()
                files += attached
                out.append(_chat_result(part.tool_call_id, text))
            else:
                out += self._openai_prompt(part, _chat_result)
        if files:
            # A tool's files, after the tool messages, in a user message of their own.
            out.append({"role": "user", "content": self._chat_content(files)})
        return out

    def _chat_content(self, content: Any) -> Any:
        if isinstance(content, str):
            return content
        return _each(self._chat_item, content)

    def _chat_item(self, item: Any) -> Optional[Json]:
        kind = getattr(item, "kind", None)
        if isinstance(item, str) or kind in _TEXT_KINDS:
            return {"text": item if isinstance(item, str) else item.content, "type": "text"}
        if kind == "image-url":
            return _chat_image(item.url, item)
        if kind == "binary":
            return _chat_binary(item)
        if kind == "audio-url":
            # Downloaded when sent: its length is not known here (a minute, by default).
            return {"input_audio": {"format": _extension(item)}, "type": "input_audio"}
        if kind == "document-url":
            # Downloaded when sent: one page, by default.
            return {"file": {"filename": f"filename.{_extension(item)}"}, "type": "file"}
        if kind == "uploaded-file":
            return {"file": {"file_id": item.file_id}, "type": "file"}
        return None  # a cache point; a video, which Chat Completions refuses

    def _chat_response(self, parts: List[Any]) -> List[Json]:
        texts: List[str] = []
        calls: List[Json] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "text":
                texts.append(part.content)
            elif kind == "thinking" and part.content:
                texts.append(self._thinking(part.content))
            elif kind == "tool-call":
                function = {"name": part.tool_name, "arguments": part.args_as_json_str()}
                calls.append({"id": part.tool_call_id, "type": "function", "function": function})
        if not texts and not calls:
            return []
        message: Json = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
        if calls:
            message["tool_calls"] = calls
        return [message]

    # Responses (OpenAIResponsesModel)

    def _responses_request(self, parts: List[Any]) -> List[Json]:
        out: List[Json] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "user-prompt":
                content = part.content
                if not isinstance(content, str):
                    content = _each(self._responses_item, content)
                out.append({"role": "user", "content": content})
            elif kind == "tool-return":
                output: Any = part.model_response_str()
                if part.files:
                    items = part.content_items(mode="str")
                    output = _each(self._responses_item, items)
                out.append(_responses_result(part.tool_call_id, output))
            else:
                out += self._openai_prompt(part, _responses_result)
        return out

    def _responses_item(self, item: Any) -> Optional[Json]:
        kind = getattr(item, "kind", None)
        if isinstance(item, str) or kind in _TEXT_KINDS:
            return {"text": item if isinstance(item, str) else item.content, "type": "input_text"}
        if kind == "image-url":
            return _responses_image(item.url, item)
        if kind == "binary":
            return _responses_binary(item)
        if kind in ("document-url", "audio-url"):
            return {"type": "input_file", "file_url": item.url}
        if kind == "uploaded-file":
            return _responses_uploaded(item)
        return None

    def _responses_response(self, parts: List[Any]) -> List[Json]:
        out: List[Json] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "text" and part.id and self.item_ids:
                text = {"text": part.content, "type": "output_text", "annotations": []}
                item = {"role": "assistant", "id": part.id, "content": [text], "type": "message"}
                out.append({**item, "status": "completed"})
            elif kind == "text":
                out.append({"role": "assistant", "content": part.content})
            elif kind == "tool-call":
                call: Json = {"name": part.tool_name, "arguments": part.args_as_json_str()}
                call.update(call_id=part.tool_call_id, type="function_call")
                if part.id and self.item_ids:
                    call["id"] = part.id
                out.append(call)
            elif kind == "thinking":
                out.append(self._reasoning(part))
        return out

    def _reasoning(self, part: Any) -> Json:
        summary = [{"type": "summary_text", "text": part.content}] if part.content else []
        reasoning: Json = {"type": "reasoning", "summary": summary}
        if part.signature:
            reasoning["encrypted_content"] = part.signature
        if part.id and self.item_ids:
            reasoning["id"] = part.id
        return reasoning

    # Anthropic Messages (AnthropicModel)

    def _anthropic_request(self, parts: List[Any]) -> List[Json]:
        blocks: List[Json] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "system-prompt":
                # A standing prompt, lifted into ``system`` as one more block.
                blocks.append({"text": part.content, "type": "text"})
            elif kind == "user-prompt":
                content = part.content
                items = [content] if isinstance(content, str) else content
                blocks += _each(self._anthropic_item, items)
            elif kind == "tool-return":
                blocks.append(self._anthropic_result(part))
            elif kind == "retry-prompt":
                blocks.append(_anthropic_retry(part))
        return [{"role": "user", "content": blocks}] if blocks else []

    def _anthropic_result(self, part: Any) -> Json:
        items = part.content_items(mode="str", wrap_if_error=False)
        inner = _each(self._anthropic_result_item, items)
        result = {"tool_use_id": part.tool_call_id, "type": "tool_result"}
        error = getattr(part, "outcome", "success") in _ERRORS
        return {**result, "content": inner or "", "is_error": error}

    def _anthropic_result_item(self, item: Any) -> Optional[Json]:
        if isinstance(item, str):
            return {"text": item, "type": "text"}  # an empty one too
        return self._anthropic_item(item)

    def _anthropic_item(self, item: Any) -> Optional[Json]:
        kind = getattr(item, "kind", None)
        if isinstance(item, str) or kind in _TEXT_KINDS:
            text = item if isinstance(item, str) else item.content
            return {"text": text, "type": "text"} if text else None
        if kind == "binary":
            return _anthropic_binary(item)
        if kind == "image-url":
            return {"source": {"type": "url", "url": item.url}, "type": "image"}
        if kind == "document-url":
            # A PDF by its URL; a text file downloaded when sent (one page, by default).
            return {"source": {"url": item.url, "type": "url"}, "type": "document"}
        if kind == "uploaded-file":
            image = _media_type(item).startswith("image/")
            source = {"file_id": item.file_id, "type": "file"}
            return {"source": source, "type": "image" if image else "document"}
        return None

    def _anthropic_response(self, parts: List[Any]) -> List[Json]:
        blocks: List[Json] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "text" and part.content:
                blocks.append({"text": part.content, "type": "text"})
            elif kind == "tool-call":
                call = {"id": part.tool_call_id, "type": "tool_use", "name": part.tool_name}
                blocks.append({**call, "input": part.args_as_dict()})
            elif kind == "thinking" and part.signature:
                thinking = {"thinking": part.content, "signature": part.signature}
                blocks.append({**thinking, "type": "thinking"})
            elif kind == "thinking" and part.content:
                blocks.append({"text": self._thinking(part.content), "type": "text"})
        return [{"role": "assistant", "content": blocks}] if blocks else []

    # --- beside the messages --------------------------------------------------------

    def beside(self, added: List[str], instructions: List[str]) -> Tuple[List[Json], List[Any]]:
        """The system messages and other values sent beside the messages.

        ``added``: the framework's statements (moved out of the messages);
        ``instructions``: the request's instruction texts.
        """
        if self.form == CHAT:
            return [{"role": self.role, "content": text} for text in added + instructions], []
        if self.form == RESPONSES:
            system = [{"role": self.role, "content": text} for text in added]
            joined = "\n\n".join(instructions).strip()
            return system, [joined] if joined else []
        texts = added + instructions
        return [], [[{"type": "text", "text": text} for text in texts]] if texts else []

    def tool(self, definition: Any) -> Json:
        """A tool's definition as the model sends it."""
        if self.form == CHAT:
            return chat_tool(definition, self.strict)
        name, description = definition.name, definition.description or ""
        schema = definition.parameters_json_schema
        if self.form == RESPONSES:
            tool = {"name": name, "parameters": schema, "type": "function"}
            strict = bool(definition.strict and self.strict)
            return {**tool, "description": definition.description, "strict": strict}
        tool = {"name": name, "description": description, "input_schema": schema}
        if definition.strict and self.anthropic_strict:
            tool["strict"] = definition.strict
        return tool
