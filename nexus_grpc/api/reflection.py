"""Server reflection that also resolves method symbols.

grpcio-reflection asks the descriptor pool for the file containing a symbol,
and Python's pool does not index methods, so ``grpcurl describe
pkg.Service.Method`` fails with "Symbol not found".  Resolving a method to
its service's file is exactly what the C++ and Go servers do.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc
from grpc_reflection.v1alpha._async import ReflectionServicer


class MethodAwareReflectionServicer(ReflectionServicer):
    def _file_containing_symbol(self, request, fully_qualified_name):
        response = super()._file_containing_symbol(request, fully_qualified_name)
        if response.HasField("error_response") and "." in fully_qualified_name:
            service_name, _, method = fully_qualified_name.rpartition(".")
            try:
                service = self._pool.FindServiceByName(service_name)
            except KeyError:
                return response
            if method in service.methods_by_name:
                return super()._file_containing_symbol(request, service_name)
        return response


def enable_reflection(service_names: Iterable[str], server: grpc.aio.Server) -> None:
    names = (*service_names, reflection.SERVICE_NAME)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        MethodAwareReflectionServicer(names), server
    )
