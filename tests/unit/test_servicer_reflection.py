"""Server reflection (api/reflection.py), its servicer driven directly with a
stream of requests: what it lists, which file a symbol (a method too) is
found in, that our files carry the proto comments and no json_name, that the
v1 file is v1alpha's renamed, and the error each unanswerable request gets.
The servicer needs no store and no server; it reads the committed
nexus_grpc/gen/descriptors.binpb.

What stays over the wire (tests/e2e/api/test_grpcurl.py): both versions
registered on the server, and grpcurl's own use of them.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

from nexus_grpc.api.reflection import V1, V1ALPHA, ReflectionServicer
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

SERVICES = (
    "nexus.memory.v1.MemoryService",
    "nexus.summary.v1.SummaryService",
    "nexus.graph.v1.GraphService",
    "grpc.health.v1.Health",
)
# The generated modules register our files in the default pool.
REGISTERED = (memory_pb2, summary_pb2, graph_pb2)
MEMORY_FILE = "nexus/memory/v1/memory_service.proto"


async def ask(*requests: reflection_pb2.ServerReflectionRequest):
    async def stream():
        for r in requests:
            yield r

    servicer = ReflectionServicer(SERVICES)
    return [answer async for answer in servicer.ServerReflectionInfo(stream(), None)]


async def files_for(symbol: str) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    [answer] = await ask(reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol))
    protos = answer.file_descriptor_response.file_descriptor_proto
    files = [descriptor_pb2.FileDescriptorProto.FromString(p) for p in protos]
    assert len({f.name for f in files}) == len(files), "each file is sent once"
    return {f.name: f for f in files}


def error_code(answer: reflection_pb2.ServerReflectionResponse) -> int:
    return answer.error_response.error_code


async def test_the_list_holds_the_services_and_both_reflection_versions_once_sorted():
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    [answer] = await ask(request)
    names = [s.name for s in answer.list_services_response.service]
    assert names == sorted({*SERVICES, V1, V1ALPHA})
    assert answer.original_request == request


async def test_a_method_is_found_in_its_services_file_with_every_file_it_imports():
    files = await files_for("nexus.memory.v1.MemoryService.SearchEpisodes")
    assert {MEMORY_FILE, "google/protobuf/struct.proto", "nexus/graph/v1/graph_service.proto"} <= (
        set(files)
    )


async def test_our_files_carry_their_comments_and_no_json_names():
    memory = (await files_for("nexus.memory.v1.MemoryService"))[MEMORY_FILE]
    comments = [loc.leading_comments for loc in memory.source_code_info.location]
    assert any("Streams hits in rank order" in c for c in comments)
    fields = [f for m in memory.message_type for f in m.field]
    assert fields and not any(f.HasField("json_name") for f in fields)


async def test_a_message_and_an_enum_are_found_in_their_file():
    assert MEMORY_FILE in await files_for("nexus.memory.v1.Memory")
    assert MEMORY_FILE in await files_for("nexus.memory.v1.SearchMode")


async def test_the_v1_file_is_v1alphas_in_the_v1_package():
    [answer] = await ask(
        reflection_pb2.ServerReflectionRequest(
            file_by_filename="grpc/reflection/v1/reflection.proto"
        )
    )
    [proto] = answer.file_descriptor_response.file_descriptor_proto
    v1 = descriptor_pb2.FileDescriptorProto.FromString(proto)
    assert v1.package == "grpc.reflection.v1"
    [service] = v1.service
    [method] = service.method
    assert method.input_type == ".grpc.reflection.v1.ServerReflectionRequest"
    typed = [f.type_name for m in v1.message_type for f in m.field if f.type_name]
    assert typed and all(".v1alpha." not in t for t in typed)
    files = await files_for(V1)
    assert set(files) == {"grpc/reflection/v1/reflection.proto"}


async def test_a_v1_method_is_found_in_the_v1_file_as_ours_are_in_theirs():
    # The method fallback once served only our pool, so v1's own method was
    # NOT_FOUND where v1alpha's and ours were found.
    files = await files_for(f"{V1}.ServerReflectionInfo")
    assert set(files) == {"grpc/reflection/v1/reflection.proto"}


@pytest.mark.parametrize(
    "symbol",
    [
        "no.such.Symbol",
        "nexus.memory.v1.MemoryService.NoSuchMethod",
        "grpc.reflection.v1.NoSuchMessage",
    ],
)
async def test_a_symbol_not_served_is_not_found(symbol):
    request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)
    [answer] = await ask(request)
    assert error_code(answer) == grpc.StatusCode.NOT_FOUND.value[0]
    assert answer.original_request == request


async def test_unknown_files_types_and_extensions_are_not_found():
    answers = await ask(
        reflection_pb2.ServerReflectionRequest(file_by_filename="no/such.proto"),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="no.Such"),
        reflection_pb2.ServerReflectionRequest(
            file_containing_extension=reflection_pb2.ExtensionRequest(
                containing_type="nexus.memory.v1.Memory", extension_number=99
            )
        ),
    )
    assert [error_code(a) for a in answers] == [grpc.StatusCode.NOT_FOUND.value[0]] * 3


async def test_a_message_with_no_extensions_lists_none():
    request = reflection_pb2.ServerReflectionRequest(
        all_extension_numbers_of_type="nexus.memory.v1.Memory"
    )
    [answer] = await ask(request)
    numbers = answer.all_extension_numbers_response
    assert numbers.base_type_name == "nexus.memory.v1.Memory"
    assert list(numbers.extension_number) == []


async def test_a_request_that_asks_nothing_is_invalid_and_the_stream_answers_on():
    asked = reflection_pb2.ServerReflectionRequest(list_services="")
    empty, listed = await ask(reflection_pb2.ServerReflectionRequest(), asked)
    assert error_code(empty) == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert listed.list_services_response.service
