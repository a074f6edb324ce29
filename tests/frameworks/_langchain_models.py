"""The chat models of LangChain's provider integrations, each pointed at the local provider.

One entry per integration: how to make its model against a ``FakeProvider``, the
route it calls there, and how to close the HTTP clients it opened (sync and
async), so that no socket is left to the garbage collector. Used by the tests of
``CompactionMiddleware`` (``test_integration_langchain.py``) and of LangChain
messages through the core (``test_langchain.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Awaitable, Callable, Dict

import boto3
import httpx
from botocore.config import Config
from langchain_anthropic import ChatAnthropic
from langchain_aws import ChatBedrockConverse
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI

from ctx_compact.testing import FakeProvider

from ._scenario import CLAUDE_MODEL, OPENAI_MODEL

GEMINI_MODEL = "gemini-2.5-flash"
BEDROCK_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
OLLAMA_MODEL = "llama3.2"


def chat_openai(provider: FakeProvider) -> Any:
    # stream_usage: without it ChatOpenAI asks for no usage on streams, so there is none to report.
    # HTTP clients of its own: langchain-openai's default ones are shared by every model of a
    # base URL, so closing one would close it for a later provider on a reused port.
    return ChatOpenAI(
        model=OPENAI_MODEL,
        base_url=provider.openai_url,
        api_key="t",
        max_retries=0,
        stream_usage=True,
        http_client=httpx.Client(),
        http_async_client=httpx.AsyncClient(),
    )


def chat_anthropic(provider: FakeProvider) -> Any:
    return ChatAnthropic(
        model=CLAUDE_MODEL,
        base_url=provider.anthropic_url,
        api_key="t",
        max_retries=0,
        max_tokens=256,
    )


def chat_google(provider: FakeProvider) -> Any:
    # max_retries=1 is one attempt (google-genai reads 0 as its own default).
    return ChatGoogleGenerativeAI(
        model=GEMINI_MODEL, google_api_key="t", base_url=provider.gemini_url, max_retries=1
    )


def chat_bedrock(provider: FakeProvider) -> Any:
    # A client of its own session, given the region and keys: no credentials are looked up.
    client = boto3.session.Session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=provider.bedrock_url,
        aws_access_key_id="t",
        aws_secret_access_key="t",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    return ChatBedrockConverse(model=BEDROCK_MODEL, client=client, region_name="us-east-1")


def chat_ollama(provider: FakeProvider) -> Any:
    return ChatOllama(model=OLLAMA_MODEL, base_url=provider.base_url)


@dataclass(frozen=True)
class Integration:
    """One provider integration of LangChain, as the tests use it."""

    name: str  # the chat model's class name
    package: str
    route: str
    make: Callable[[FakeProvider], Any]
    close: Callable[[Any], None]
    aclose: Callable[[Any], Awaitable[None]]
    # How many tokens the core's count of a request (compact, @budgeted: the messages read
    # in Chat Completions form, as ChatOpenAI sends them) may be under and over what the
    # client sends for it, in test_langchain.py's cuts of a conversation.
    read_under: int = 0
    read_over: int = 0
    # How many tokens CompactionMiddleware's count of a request (the messages counted as the
    # client sends them, tools included) may be over what it sends, in the scenario's runs:
    # the turns the client joins into one, counted each alone. Never under.
    hook_over: int = 0

    @property
    def label(self) -> str:
        return f"{self.name} ({self.package} {version(self.package)})"


def _close_openai(llm: Any) -> None:
    llm.root_client.close()


async def _aclose_openai(llm: Any) -> None:
    await llm.root_async_client.close()


# langchain-anthropic keeps one HTTP client per base URL for the process (closed when its
# cache lets it go), and takes none of ours: closing it would close it for a later model
# of the same URL, a later provider on a reused port.
def _close_anthropic(llm: Any) -> None:
    pass


async def _aclose_anthropic(llm: Any) -> None:
    pass


def _close_google(llm: Any) -> None:
    llm.client.close()


async def _aclose_google(llm: Any) -> None:
    await llm.client.aio.aclose()
    llm.client.close()


def _close_bedrock(llm: Any) -> None:
    llm.client.close()


async def _aclose_bedrock(llm: Any) -> None:
    llm.client.close()  # the async calls run the sync client on a worker thread


def _close_ollama(llm: Any) -> None:
    llm._client.close()  # the ollama client it made; LangChain offers no close()


async def _aclose_ollama(llm: Any) -> None:
    await llm._async_client.close()


INTEGRATIONS: Dict[str, Integration] = {
    i.name: i
    for i in (
        Integration(
            "ChatOpenAI",
            "langchain-openai",
            "/v1/chat/completions",
            chat_openai,
            _close_openai,
            _aclose_openai,
        ),
        Integration(
            "ChatAnthropic",
            "langchain-anthropic",
            "/v1/messages",
            chat_anthropic,
            _close_anthropic,
            _aclose_anthropic,
            read_under=60,
            read_over=30,
            hook_over=8,
        ),
        Integration(
            "ChatGoogleGenerativeAI",
            "langchain-google-genai",
            "/v1beta/models/{model}:generateContent",
            chat_google,
            _close_google,
            _aclose_google,
            read_over=250,
        ),
        Integration(
            "ChatBedrockConverse",
            "langchain-aws",
            "/model/{modelId}/converse",
            chat_bedrock,
            _close_bedrock,
            _aclose_bedrock,
            read_under=150,
            read_over=30,
            hook_over=20,
        ),
        Integration(
            "ChatOllama",
            "langchain-ollama",
            "/api/chat",
            chat_ollama,
            _close_ollama,
            _aclose_ollama,
            read_over=450,
        ),
    )
}
