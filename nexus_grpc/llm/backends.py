"""Which backend serves the LLM: ``--llm-api ollama`` (default) or ``openai``."""

from __future__ import annotations

from nexus_grpc.llm.client import LLMClient, OllamaClient
from nexus_grpc.llm.openai_client import OpenAIClient

APIS = ("ollama", "openai")


def make_client(
    api: str, url: str, *, timeout: float, context_length: int = 0, api_key: str = ""
) -> LLMClient:
    if api == "ollama":
        return OllamaClient(url, timeout=timeout, context_length=context_length)
    if api == "openai":
        return OpenAIClient(url, timeout=timeout, context_length=context_length, api_key=api_key)
    raise ValueError(f"--llm-api must be one of {', '.join(APIS)}, not {api!r}")
