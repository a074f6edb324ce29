"""strands-agents' model providers pointed at the kit: OpenAI's and Bedrock's (through boto3)."""

from __future__ import annotations

import boto3
from strands.models import BedrockModel
from strands.models.openai import OpenAIModel

from ctx_compact.testing import FakeProvider


def openai_model(provider: FakeProvider) -> OpenAIModel:
    return OpenAIModel(
        client_args={"base_url": provider.openai_url, "api_key": "test", "max_retries": 0},
        model_id="gpt-4o",
    )


def bedrock_model(provider: FakeProvider, streaming: bool = True) -> BedrockModel:
    session = boto3.Session(
        aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    return BedrockModel(
        model_id="anthropic.claude-sonnet-4-6",
        boto_session=session,
        endpoint_url=provider.bedrock_url,
        streaming=streaming,
    )
