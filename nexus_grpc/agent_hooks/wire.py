"""The few MemoryService calls a hook makes, over a plain synchronous channel.

The typed client (``nexus_grpc.client``) imports every service's stubs and
``grpc.aio``: most of a hook's start-up, paid on every prompt. A hook needs
ten methods of one service, so it calls them by name with the generated
messages alone. No retries: the hook has a hard deadline, and a server that
does not answer at once means no context, not a wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb

__all__ = ["Credentials", "Wire", "pb"]

_SERVICE = "/nexus.memory.v1.MemoryService/"

#: method -> (response type, server-streaming)
_METHODS: dict[str, tuple[Any, bool]] = {
    "ListProjects": (pb.ListProjectsResponse, False),
    "CreateProject": (pb.Project, False),
    "GetServiceStatus": (pb.ServiceStatus, False),
    "GetSession": (pb.Session, False),
    "CreateSession": (pb.Session, False),
    "CreateEpisode": (pb.Episode, False),
    "ListMemories": (pb.ListMemoriesResponse, False),
    "SearchMemories": (pb.MemoryHit, True),
    "SelectMemories": (pb.SelectedMemory, True),
    "SearchEpisodes": (pb.SearchHit, True),
}


@dataclass(frozen=True)
class Credentials:
    """How to reach the server: the other client commands' ``--api-key`` and TLS flags."""

    api_key: str = ""
    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None

    @property
    def tls(self) -> bool:
        return any(
            x is not None
            for x in (self.root_certificates, self.private_key, self.certificate_chain)
        )


class Wire:
    """One channel to ``target``; every call takes the seconds it may last."""

    def __init__(self, target: str, credentials: Credentials) -> None:
        if credentials.tls:
            channel_credentials = grpc.ssl_channel_credentials(
                root_certificates=credentials.root_certificates,
                private_key=credentials.private_key,
                certificate_chain=credentials.certificate_chain,
            )
            self.channel = grpc.secure_channel(target, channel_credentials)
        else:
            self.channel = grpc.insecure_channel(target)
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {credentials.api_key}"),) if credentials.api_key else ()
        )
        self._callables: dict[str, Any] = {}

    def _callable(self, method: str) -> Any:
        found = self._callables.get(method)
        if found is None:
            response, streaming = _METHODS[method]
            make = self.channel.unary_stream if streaming else self.channel.unary_unary
            found = make(
                _SERVICE + method,
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=response.FromString,
            )
            self._callables[method] = found
        return found

    def call(self, method: str, request: Any, timeout: float) -> Any:
        """A unary call; raises ``grpc.RpcError``."""
        return self._callable(method)(request, timeout=timeout, metadata=self.metadata)

    def start(self, method: str, request: Any, timeout: float) -> Any:
        """Starts a unary call without waiting: ``.result()`` waits for it."""
        return self._callable(method).future(request, timeout=timeout, metadata=self.metadata)

    def stream(self, method: str, request: Any, timeout: float) -> Any:
        """Starts a server-streaming call at once: iterating it waits for the
        answers, ``.cancel()`` ends it."""
        return self._callable(method)(request, timeout=timeout, metadata=self.metadata)

    def close(self) -> None:
        self.channel.close()
