"""Hooks for agent hosts (Claude Code, Codex CLI, Gemini CLI): memory without a tool call.

A host runs ``nexus-grpc hooks run HOST`` around every prompt with the event's
JSON on stdin. At a session's start and with each prompt the hook answers with
what the server remembers as context for the model; when the agent stops, the
exchange (the prompt and the answer) becomes an episode of the session named
after the agent's own session id. ``nexus-grpc hooks install HOST`` merges the
hook entries into the host's settings and ``uninstall`` takes exactly them out.

It is a client of the gRPC API like ``mcp/``, and it runs once per prompt, so
``hooks run`` imports only grpc and the memory service's messages (``wire.py``),
never the typed client: docs/agents.md has the start-up figures.
"""
