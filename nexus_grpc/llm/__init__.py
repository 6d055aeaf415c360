"""Everything that talks to the local LLM (Ollama): the client, the prompts
and JSON schemas for extraction, summaries and memory selection, and the
parsers that turn untrusted model answers into clean values."""

from nexus_grpc.llm.client import LLMClient, parse_json_object
from nexus_grpc.llm.errors import LLMBadOutput, LLMError, LLMUnavailable, LLMUnreachable
from nexus_grpc.llm.options import SamplingOptions
from nexus_grpc.llm.text import StreamCleaner, clean_stream, strip_model_tokens, to_snake_case

__all__ = [
    "LLMBadOutput",
    "LLMClient",
    "LLMError",
    "LLMUnavailable",
    "LLMUnreachable",
    "SamplingOptions",
    "StreamCleaner",
    "clean_stream",
    "parse_json_object",
    "strip_model_tokens",
    "to_snake_case",
]
