"""Generate the Python protobuf and gRPC code (with .pyi stubs) from proto/.

It also writes nexus_grpc/client/__init__.py, the typed client, from the same
descriptors (proto/gen_client.py), so its methods and docstrings follow the
protos.  The TypeScript client has its own generator (clients/typescript).

The generated modules live in nexus_grpc/gen/ and are committed, so a user
needs no protoc.  protoc writes imports such as ``from nexus.memory.v1 import``
for cross-file references; they are rewritten to ``nexus_grpc.gen.nexus...``
so the code imports as part of our package without touching sys.path.

It also writes nexus_grpc/gen/descriptors.binpb: the three service files'
descriptors with their source info (the proto comments), which server
reflection serves so that ``grpcurl describe`` prints the comments (the
generated modules carry descriptors without them).

``--check`` generates into a scratch directory and fails when the committed
code differs, which is how CI proves the two match.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
GEN_DIR = ROOT / "nexus_grpc" / "gen"
CLIENT = ROOT / "nexus_grpc" / "client" / "__init__.py"
IMPORT_RE = re.compile(r"^(from|import) nexus\.", re.MULTILINE)
# The descriptors with source info that reflection serves (api/reflection.py).
DESCRIPTORS = "descriptors.binpb"


def generate(out: Path, client: Path) -> None:
    import grpc_tools
    from google.protobuf import descriptor_pb2

    sys.path.insert(0, str(PROTO_DIR))
    from gen_client import render

    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"-I{PROTO_DIR}", f"-I{well_known}",
        f"--python_out={out}", f"--grpc_python_out={out}",
        f"--mypy_out={out}", f"--mypy_grpc_out={out}",
        *protos,
    ]
    subprocess.run(cmd, check=True, cwd=PROTO_DIR)
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = Path(tmp) / "descriptors.binpb"
        # Source info carries the proto comments, which become the client's docstrings.
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"-I{well_known}",
             "--include_imports", "--include_source_info",
             f"--descriptor_set_out={descriptors}", *protos],
            check=True, cwd=PROTO_DIR,
        )
        fds = descriptor_pb2.FileDescriptorSet.FromString(descriptors.read_bytes())
    client.write_text(render(fds))
    # Only our own files (the well-known ones are protobuf's), with their comments.
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"-I{well_known}",
         "--include_source_info", f"--descriptor_set_out={out / DESCRIPTORS}", *protos],
        check=True, cwd=PROTO_DIR,
    )
    for path in out.rglob("*"):
        if path.suffix in (".py", ".pyi"):
            text = path.read_text()
            fixed = IMPORT_RE.sub(lambda m: f"{m.group(1)} nexus_grpc.gen.nexus.", text)
            if fixed != text:
                path.write_text(fixed)
    for directory in [out, *[d for d in out.rglob("*") if d.is_dir()]]:
        (directory / "__init__.py").touch()


def differences(a: Path, b: Path) -> list[str]:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    diff = sorted(str(p) for p in files_a ^ files_b)
    for rel in sorted(files_a & files_b):
        if not filecmp.cmp(a / rel, b / rel, shallow=False):
            diff.append(str(rel))
    return diff


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if committed code is stale")
    args = parser.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "gen"
            fresh_client = Path(tmp) / "client.py"
            generate(fresh, fresh_client)
            stale = differences(fresh, GEN_DIR)
            if not filecmp.cmp(fresh_client, CLIENT, shallow=False):
                stale.append(str(CLIENT.relative_to(ROOT)))
        if stale:
            print("generated code differs from proto/; run `make proto`:", *stale, sep="\n  ")
            return 1
        print("generated code matches proto/")
        return 0
    shutil.rmtree(GEN_DIR, ignore_errors=True)
    generate(GEN_DIR, CLIENT)
    print(f"generated into {GEN_DIR.relative_to(ROOT)} and {CLIENT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
