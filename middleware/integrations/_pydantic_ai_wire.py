"""What a pydantic-ai request puts on the wire, for the model it goes to: to be counted.

The core reads a ``ModelRequest``/``ModelResponse`` in Anthropic form (one turn,
its tool results in it), which is how it keeps a call with its return. What a
request costs depends on the model class it is sent to, and differs from that
form: ``OpenAIChatModel`` sends a tool's file after the tool message, in a user
message of its own framed by tags that name the call, and the first time it
frames one it adds a system message saying what such frames mean; the
Anthropic model opens its ``system`` with a long statement of the same kind on
every request; every model prices a photo by its own formula; and the tools
go out as ``prepare_request`` resolves them (``strict`` included).

``sent`` builds, for one request, the JSON each message becomes for its model
(``OpenAIChatModel``, ``OpenAIResponsesModel``, ``AnthropicModel`` and their
subclasses, behind any wrapper model), and what goes beside the messages (the
instructions, that statement, the tools), so that the integration counts
those with its counter: the media in them as their provider bills them. It
reads pydantic-ai through its public API only: ``Model.prepare_request`` (the
tool definitions and instructions as sent), ``Model.prepare_messages`` (the
messages as the adapter maps them: retries rendered, notes and that statement
added), ``ToolReturnPart.model_response_str_and_user_content`` (a tool's text
and files as Chat Completions takes them), the parts' own fields. The
adapters' step from parts to JSON is private to pydantic-ai, so it is followed
here, as measured on pydantic-ai 2.78.0. A model of any other class (a
``FallbackModel``, Gemini, Bedrock, a test model) gets ``None``: its messages
are counted as the core reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.models.wrapper import WrapperModel

Json = Dict[str, Any]

CHAT = "chat"
RESPONSES = "responses"
ANTHROPIC = "anthropic"
# The model classes whose mapping is followed, by name, most derived first
# (importing them would import the provider SDKs, which a user may not have).
_FORMS = (
    ("OpenAIResponsesModel", RESPONSES),
    ("OpenAIChatModel", CHAT),
    ("AnthropicModel", ANTHROPIC),
)
# A tool return's outcomes sent as errors (pydantic-ai's ERROR_OUTCOMES).
_ERRORS = ("failed", "retried")
_TEXT_KINDS = ("text-content", "structured-content")


@dataclass(frozen=True)
class Sent:
    """One request as its model sends it.

    Attributes:
        form: ``"chat"``, ``"responses"`` or ``"anthropic"``.
        messages: For each message given, the wire messages it becomes.
        system: Wire messages sent beside them that are never dropped (Chat
            Completions' system messages for the instructions).
        parts: Other values sent beside them (the Responses ``instructions``,
            Anthropic's ``system`` blocks, each tool's definition).
        prepared: Each message given as the model maps it (prepared, the
            framework's statement on frames taken out), for ``wire``.
    """

    form: str
    messages: List[List[Json]]
    system: List[Json]
    parts: List[Any]
    prepared: List[Any]
    mapper: _Mapper

    def wire(self, message: Any) -> List[Json]:
        """The wire messages of another message of the request (a summary, a cleared copy)."""
        return self.mapper.message(message)


def unwrapped(model: Any) -> Any:
    """The model a wrapper model (instrumentation, concurrency limits) sends through."""
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return model


def form_of(model: Any) -> Optional[str]:
    """The wire form ``model`` sends in, or ``None`` for a model class not followed here."""
    for cls in type(unwrapped(model)).__mro__:
        if cls.__module__.startswith("pydantic_ai.models."):
            for name, form in _FORMS:
                if cls.__name__ == name:
                    return form
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
    form = form_of(model)
    if form is None:
        return None
    model = unwrapped(model)
    _, parameters = model.prepare_request(settings, parameters)
    given = list(messages)
    prepared = list(model.prepare_messages(list(given), parameters))
    if len(prepared) != len(given) or any(
        isinstance(p, ModelRequest) != isinstance(g, ModelRequest) for p, g in zip(prepared, given)
    ):
        prepared = list(given)  # reshaped (a native tool search split): each as it is
    # The statement on frames goes in the first request holding one; when that one is
    # dropped it moves to the next, so it is counted beside the messages, never dropped.
    added: List[str] = []
    for k, (message, original) in enumerate(zip(prepared, given)):
        if isinstance(message, ModelRequest) and message is not original:
            own = {id(part) for part in original.parts}
            new = [p for p in message.parts if isinstance(p, SystemPromptPart) and id(p) not in own]
            if new:
                added = [p.content for p in new]
                parts = [p for p in message.parts if not any(p is n for n in new)]
                prepared[k] = dataclasses.replace(message, parts=parts)
                break
    instructions = [part.content for part in parameters.instruction_parts or ()]
    if instructions and not _standing(prepared):
        added = _opening_statement(model, parameters) + added
    mapper = _Mapper(model, form, settings)
    wire = [mapper.message(message) for message in prepared]
    tools = [mapper.tool(tool) for tool in (*parameters.function_tools, *parameters.output_tools)]
    system, beside = mapper.beside(added, instructions)
    return Sent(form, wire, system, [*beside, *tools], prepared, mapper)


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

    def _chat_request(self, parts: List[Any]) -> List[Json]:
        out: List[Json] = []
        files: List[Any] = []
        for part in parts:
            kind = getattr(part, "part_kind", None)
            if kind == "system-prompt":
                out.append({"role": self.role, "content": part.content})
            elif kind == "user-prompt":
                out.append({"role": "user", "content": self._chat_content(part.content)})
            elif kind == "tool-return":
                text, attached = part.model_response_str_and_user_content()
                files += attached
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
            elif kind == "retry-prompt":  # left as stored when the messages could not be prepared
                if part.tool_name is not None:
                    tool = {"role": "tool", "tool_call_id": part.tool_call_id}
                    out.append({**tool, "content": part.model_response()})
                else:
                    out.append({"role": "user", "content": part.model_response()})
        if files:
            # A tool's files, after the tool messages, in a user message of their own.
            out.append({"role": "user", "content": self._chat_content(files)})
        return out

    def _chat_content(self, content: Any) -> Any:
        if isinstance(content, str):
            return content
        return [p for p in map(self._chat_item, content) if p is not None]

    def _chat_item(self, item: Any) -> Optional[Json]:
        kind = getattr(item, "kind", None)
        if isinstance(item, str) or kind in _TEXT_KINDS:
            return {"text": item if isinstance(item, str) else item.content, "type": "text"}
        if kind == "image-url":
            image: Json = {"url": item.url}
            if _detail(item):
                image["detail"] = _detail(item)
            return {"image_url": image, "type": "image_url"}
        if kind == "binary":
            media_type = _media_type(item)
            yaml = media_type.split(";", 1)[0].endswith("+yaml")
            if _text_like(media_type) or (yaml and not item.is_image and not item.is_document):
                return {"text": _inlined(item), "type": "text"}
            if item.is_image:
                image = {"url": item.data_uri}
                if _detail(item):
                    image["detail"] = _detail(item)
                return {"image_url": image, "type": "image_url"}
            if item.is_audio:
                audio = {"data": item.base64, "format": _extension(item)}
                return {"input_audio": audio, "type": "input_audio"}
            if item.is_video:
                return None  # refused by Chat Completions: the request fails
            file = {"file_data": item.data_uri, "filename": f"filename.{_extension(item)}"}
            return {"file": file, "type": "file"}
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
            if kind == "system-prompt":
                out.append({"role": self.role, "content": part.content})
            elif kind == "user-prompt":
                content = part.content
                if not isinstance(content, str):
                    content = [p for p in map(self._responses_item, content) if p is not None]
                out.append({"role": "user", "content": content})
            elif kind == "tool-return":
                output: Any = part.model_response_str()
                if part.files:
                    items = part.content_items(mode="str")
                    output = [p for p in map(self._responses_item, items) if p is not None]
                call = {"type": "function_call_output", "call_id": part.tool_call_id}
                out.append({**call, "output": output})
            elif kind == "retry-prompt":
                if part.tool_name is not None:
                    call = {"type": "function_call_output", "call_id": part.tool_call_id}
                    out.append({**call, "output": part.model_response()})
                else:
                    out.append({"role": "user", "content": part.model_response()})
        return out

    def _responses_item(self, item: Any) -> Optional[Json]:
        kind = getattr(item, "kind", None)
        if isinstance(item, str) or kind in _TEXT_KINDS:
            return {"text": item if isinstance(item, str) else item.content, "type": "input_text"}
        if kind == "image-url" or (kind == "binary" and item.is_image):
            url = item.url if kind == "image-url" else item.data_uri
            return {"image_url": url, "type": "input_image", "detail": _detail(item) or "auto"}
        if kind == "binary":
            if not item.is_document:
                return None  # audio and video are refused: the request fails
            name = f"filename.{_extension(item)}"
            return {"type": "input_file", "file_data": item.data_uri, "filename": name}
        if kind in ("document-url", "audio-url"):
            return {"type": "input_file", "file_url": item.url}
        if kind == "uploaded-file":
            if _media_type(item).startswith("image/"):
                return {"type": "input_image", "file_id": item.file_id, "detail": "auto"}
            return {"type": "input_file", "file_id": item.file_id}
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
                summary = [{"type": "summary_text", "text": part.content}] if part.content else []
                reasoning: Json = {"type": "reasoning", "summary": summary}
                if part.signature:
                    reasoning["encrypted_content"] = part.signature
                if part.id and self.item_ids:
                    reasoning["id"] = part.id
                out.append(reasoning)
        return out

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
                blocks += [b for b in map(self._anthropic_item, items) if b is not None]
            elif kind == "tool-return":
                items = part.content_items(mode="str", wrap_if_error=False)
                inner = [b for b in map(self._anthropic_result_item, items) if b is not None]
                result = {"tool_use_id": part.tool_call_id, "type": "tool_result"}
                error = getattr(part, "outcome", "success") in _ERRORS
                blocks.append({**result, "content": inner or "", "is_error": error})
            elif kind == "retry-prompt":
                text = part.model_response()
                if part.tool_name is not None:
                    result = {"tool_use_id": part.tool_call_id, "type": "tool_result"}
                    content = [{"text": text, "type": "text"}]
                    blocks.append({**result, "content": content, "is_error": True})
                else:
                    blocks.append({"text": text, "type": "text"})
        return [{"role": "user", "content": blocks}] if blocks else []

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
            media_type = _media_type(item)
            if item.is_image:
                source = {"data": item.base64, "media_type": media_type, "type": "base64"}
                return {"source": source, "type": "image"}
            if media_type == "text/plain":
                text = bytes(item.data).decode("utf-8", "replace")
                source = {"data": text, "media_type": media_type, "type": "text"}
                return {"source": source, "type": "document"}
            if item.is_document:
                source = {"data": item.base64, "media_type": media_type, "type": "base64"}
                return {"source": source, "type": "document"}
            return None  # audio and video are refused: the request fails
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
        name, description = definition.name, definition.description or ""
        schema = definition.parameters_json_schema
        if self.form == CHAT:
            function: Json = {"name": name, "description": description, "parameters": schema}
            if definition.strict and self.strict:
                function["strict"] = definition.strict
            return {"type": "function", "function": function}
        if self.form == RESPONSES:
            tool = {"name": name, "parameters": schema, "type": "function"}
            strict = bool(definition.strict and self.strict)
            return {**tool, "description": definition.description, "strict": strict}
        tool = {"name": name, "description": description, "input_schema": schema}
        if definition.strict and self.anthropic_strict:
            tool["strict"] = definition.strict
        return tool
