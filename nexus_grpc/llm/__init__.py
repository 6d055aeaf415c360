"""Everything that talks to the local LLM (Ollama, or an OpenAI-compatible
server): the clients, the token budgets, the prompts
and JSON schemas for extraction, summaries and memory selection, and the
parsers that turn untrusted model answers into clean values."""

from nexus_grpc.llm.backends import APIS, make_client
from nexus_grpc.llm.client import LLMClient, OllamaClient, parse_json_object
from nexus_grpc.llm.llm_errors import (
    LLMBadOutput,
    LLMCutOff,
    LLMError,
    LLMInputTooLong,
    LLMTimedOut,
    LLMUnavailable,
    LLMUnreachable,
)
from nexus_grpc.llm.openai_client import OpenAIClient
from nexus_grpc.llm.sampling import SamplingOptions
from nexus_grpc.llm.text import StreamCleaner, clean_stream, strip_model_tokens, to_snake_case

__all__ = [
    "APIS",
    "LLMBadOutput",
    "LLMClient",
    "LLMCutOff",
    "LLMError",
    "LLMInputTooLong",
    "LLMTimedOut",
    "LLMUnavailable",
    "LLMUnreachable",
    "OllamaClient",
    "OpenAIClient",
    "SamplingOptions",
    "StreamCleaner",
    "clean_stream",
    "make_client",
    "parse_json_object",
    "strip_model_tokens",
    "to_snake_case",
]
