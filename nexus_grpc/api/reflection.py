"""Server reflection, ``grpc.reflection.v1`` and ``v1alpha``, with the proto comments.

grpcio-reflection serves only ``v1alpha`` (grpcurl 1.8.8 and later ask for
``v1`` first, and fall back), describes files from the generated modules,
whose descriptors carry no source info (so ``grpcurl describe`` printed no
comment), and does not resolve method symbols (``describe
pkg.Service.Method`` was "Symbol not found"). This servicer:

- answers both versions: their protos are the same messages in another
  package, so one implementation speaks both with the v1alpha message
  classes, and ``v1``'s own file is v1alpha's with the package renamed;
- serves our three files from ``nexus_grpc/gen/descriptors.binpb``, written
  by ``proto/generate.py`` with ``--include_source_info`` (checked by
  ``make proto-check``), and every other file from the descriptor pool;
- resolves a method to its service's file, as the C++ and Go servers do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from importlib import resources
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2

V1ALPHA = "grpc.reflection.v1alpha.ServerReflection"
V1 = "grpc.reflection.v1.ServerReflection"
_V1ALPHA_FILE = "grpc_reflection/v1alpha/reflection.proto"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _source_files() -> dict[str, bytes]:
    """Our files' serialized descriptors, with source info, by file name.

    protoc writes each field's json_name into a descriptor set; the pool's
    descriptors leave it out, and a client that finds it set (grpcurl) then
    prints camelCase names instead of the proto's own. Left out here too, so
    the comments are the only difference."""
    data = resources.files("nexus_grpc.gen").joinpath("descriptors.binpb").read_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(data).file
    for file in files:
        pending = list(file.message_type)
        while pending:
            message = pending.pop()
            pending.extend(message.nested_type)
            for field in (*message.field, *message.extension):
                field.ClearField("json_name")
    return {f.name: f.SerializeToString() for f in files}


def _v1_file(pool: descriptor_pool.DescriptorPool) -> descriptor_pb2.FileDescriptorProto:
    """grpc/reflection/v1/reflection.proto: v1alpha's, in the v1 package."""
    proto = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(_V1ALPHA_FILE).CopyToProto(proto)
    proto.name, proto.package = _V1_FILE, "grpc.reflection.v1"
    proto.ClearField("options")
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(".v1alpha.", ".v1.")
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(".v1alpha.", ".v1.")
            method.output_type = method.output_type.replace(".v1alpha.", ".v1.")
    return proto


class ReflectionServicer:
    """``ServerReflectionInfo`` for both versions (see the module docstring)."""

    def __init__(
        self, service_names: Iterable[str], pool: descriptor_pool.DescriptorPool | None = None
    ) -> None:
        self._pool = pool or descriptor_pool.Default()
        self._service_names = tuple(sorted({*service_names, V1ALPHA, V1}))
        self._sources = _source_files()
        # v1's file lives in a pool of its own: the default one has no such file.
        self._v1_pool = descriptor_pool.DescriptorPool()
        self._v1_pool.Add(_v1_file(self._pool))

    async def ServerReflectionInfo(  # noqa: N802 - the gRPC method's name
        self, requests: AsyncIterator[reflection_pb2.ServerReflectionRequest], context: Any
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        async for request in requests:
            yield self._answer(request)

    def _answer(
        self, request: reflection_pb2.ServerReflectionRequest
    ) -> reflection_pb2.ServerReflectionResponse:
        which = request.WhichOneof("message_request")
        try:
            if which == "list_services":
                names = [reflection_pb2.ServiceResponse(name=n) for n in self._service_names]
                return reflection_pb2.ServerReflectionResponse(
                    original_request=request,
                    list_services_response=reflection_pb2.ListServiceResponse(service=names),
                )
            if which == "file_by_filename":
                return self._files(request, self._file_named(request.file_by_filename))
            if which == "file_containing_symbol":
                return self._files(request, self._file_of(request.file_containing_symbol))
            if which == "file_containing_extension":
                ext = request.file_containing_extension
                message = self._pool.FindMessageTypeByName(ext.containing_type)
                extension = self._pool.FindExtensionByNumber(message, ext.extension_number)
                return self._files(
                    request, self._pool.FindFileContainingSymbol(extension.full_name)
                )
            if which == "all_extension_numbers_of_type":
                message = self._pool.FindMessageTypeByName(request.all_extension_numbers_of_type)
                numbers = sorted(e.number for e in self._pool.FindAllExtensions(message))
                return reflection_pb2.ServerReflectionResponse(
                    original_request=request,
                    all_extension_numbers_response=reflection_pb2.ExtensionNumberResponse(
                        base_type_name=message.full_name, extension_number=numbers
                    ),
                )
        except KeyError:
            return _error(request, grpc.StatusCode.NOT_FOUND)
        return _error(request, grpc.StatusCode.INVALID_ARGUMENT)

    def _file_named(self, name: str) -> Any:
        if name == _V1_FILE:
            return self._v1_pool.FindFileByName(name)
        return self._pool.FindFileByName(name)

    def _file_of(self, symbol: str) -> Any:
        pool = self._v1_pool if symbol.startswith("grpc.reflection.v1.") else self._pool
        try:
            return pool.FindFileContainingSymbol(symbol)
        except KeyError:
            # Python's pool does not index methods: a method is in its service's
            # file, in either pool (grpcurl asks v1's own methods by name too).
            service, _, method = symbol.rpartition(".")
            if service and method in pool.FindServiceByName(service).methods_by_name:
                return pool.FindFileContainingSymbol(service)
            raise

    def _files(
        self, request: reflection_pb2.ServerReflectionRequest, file: Any
    ) -> reflection_pb2.ServerReflectionResponse:
        """The file and every file it imports, each serialized once."""
        found: dict[str, Any] = {}
        pending = [file]
        while pending:
            current = pending.pop()
            if current.name not in found:
                found[current.name] = current
                pending.extend(current.dependencies)
        return reflection_pb2.ServerReflectionResponse(
            original_request=request,
            file_descriptor_response=reflection_pb2.FileDescriptorResponse(
                file_descriptor_proto=[self._serialized(f) for f in found.values()]
            ),
        )

    def _serialized(self, file: Any) -> bytes:
        source = self._sources.get(file.name)
        if source is not None:
            return source
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        return proto.SerializeToString()


def _error(
    request: reflection_pb2.ServerReflectionRequest, code: grpc.StatusCode
) -> reflection_pb2.ServerReflectionResponse:
    return reflection_pb2.ServerReflectionResponse(
        original_request=request,
        error_response=reflection_pb2.ErrorResponse(
            error_code=code.value[0], error_message=code.value[1]
        ),
    )


def enable_reflection(service_names: Iterable[str], server: grpc.aio.Server) -> None:
    """Reflection on ``server`` for ``service_names``, both versions, and itself."""
    servicer = ReflectionServicer(service_names)
    for service in (V1ALPHA, V1):
        handler = grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"ServerReflectionInfo": handler}),)
        )
