"""nexus-grpc as the memory of Python agent frameworks, through their own interfaces.

One module per framework, each behind its own extra, each importing its
framework only when it is itself imported (so ``import
nexus_grpc.integrations`` needs none of them):

- ``langgraph`` (``pip install 'nexus-grpc[langgraph]'``): ``NexusStore``, a
  LangGraph ``BaseStore`` on nexus memories.
- ``langchain`` (``[langchain]``): ``NexusChatMessageHistory``, a chat history
  on a nexus session, and ``NexusRetriever`` over episodes, memories or
  entities.
- ``llamaindex`` (``[llamaindex]``): ``NexusMemoryBlock`` for LlamaIndex's
  ``Memory`` and ``NexusRetriever``.

They are thin: every call is the typed client's (``nexus_grpc.client``: its
retries, deadlines, TLS and API key), and they add no rule of their own. The
parts they share: ``adapter_client`` (the client, the project by name, the
synchronous bridge), ``conventional_errors`` (refusals as the exceptions
Python code expects), ``exchanges`` (chat messages as episodes, alike in both chat
adapters) and ``search_results`` (search hits as text with their score,
sources and ids); ``namespace_owners`` is LangGraph's alone (whose memories a
namespace names). How to use them:
docs/integrations.md.
"""
