"""``nexus-grpc mcp``: the memory tools for coding agents, over the Model Context Protocol.

An MCP server (the official ``mcp`` SDK) in front of a running nexus-grpc
server.  It holds no data of its own: every tool is gRPC calls through the
typed client (``nexus_grpc.client``), so it installs with the client alone
(``pip install 'nexus-grpc[mcp]'``) and never imports the server's modules.

- ``workspace``: the project and the agent sessions the tools act in, found or
  created on first use.
- ``arguments``: what each tool accepts, checked before any call.
- ``results``: protobuf messages as the JSON an agent reads; gRPC failures as
  tool errors carrying the status.
- ``tools``: the tools themselves.
- ``serve``: the MCP server over stdio or streamable HTTP.
"""
