"""The graph rewrite that runs the packaged int8 weights on int8 kernels."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from nexus_grpc.embedding import MiniLMEmbedder
from nexus_grpc.embedding import minilm as minilm_module
from nexus_grpc.embedding.int8_matmul import pack_in_subprocess, pack_int8_matmuls


def _dense_model(
    path: Path, k: int = 64, n: int = 48, *, int8: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """x @ (Cast(W_int8) * scale) + bias, as the packaged model writes a dense layer.
    Returns the dequantized weight, for a reference result."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, size=(k, n), dtype=np.int8)
    scale = rng.uniform(0.001, 0.01, size=(1, n)).astype(np.float32)
    bias = rng.normal(size=(n,)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])
    if int8:
        nodes = [
            helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        ]
        inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(scale, "w_scale")]
    else:
        nodes = []
        inits = [numpy_helper.from_array(w.astype(np.float32) * scale, "w")]
    nodes += [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["y"]),
    ]
    inits.append(numpy_helper.from_array(bias, "b"))
    graph = helper.make_graph(nodes, "dense", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return w.astype(np.float32) * scale, bias


def _run(model: bytes | str, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]  # type: ignore[no-any-return]


def test_dense_layer_moves_to_matmulnbits_with_its_bias(tmp_path: Path) -> None:
    path = tmp_path / "dense.onnx"
    w, bias = _dense_model(path)
    packed = pack_int8_matmuls(str(path))
    assert packed.layers == 1
    ops = [n.op_type for n in onnx.load_from_string(packed.model).graph.node]
    assert ops == ["MatMulNBits"]  # the unpacking and the bias Add are absorbed
    x = np.random.default_rng(1).normal(size=(5, w.shape[0])).astype(np.float32)
    expected = x @ w + bias
    got = _run(packed.model, x)
    # int8 activations: close to the fp32 product, not bit-equal.  Measured
    # 0.99998 or more (1 - cos ~2e-5); the bound leaves 5x that, no more.
    cos = (got * expected).sum(axis=1) / (
        np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1)
    )
    assert cos.min() > 0.9999
    np.testing.assert_allclose(_run(str(path), x), expected, rtol=1e-4, atol=1e-4)


def test_the_child_process_returns_the_same_graph(tmp_path: Path) -> None:
    path = tmp_path / "dense.onnx"
    _dense_model(path)
    here, there = pack_int8_matmuls(str(path)), pack_in_subprocess(str(path))
    assert there.layers == here.layers == 1
    assert there.model == here.model


def test_the_child_process_reports_its_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="No such file|not found|does not exist"):
        pack_in_subprocess(str(tmp_path / "missing.onnx"))


def test_a_graph_without_int8_weights_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "fp32.onnx"
    _dense_model(path, int8=False)
    packed = pack_int8_matmuls(str(path))
    assert packed.layers == 0
    ops = [n.op_type for n in onnx.load_from_string(packed.model).graph.node]
    assert ops == ["MatMul", "Add"]


def test_k_not_a_multiple_of_the_block_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "odd.onnx"
    _dense_model(path, k=40)
    assert pack_int8_matmuls(str(path)).layers == 0


async def test_minilm_int8_kernels_agree_with_the_unpacked_weights() -> None:
    texts = [
        "postgres",
        "How do I reset my password?",
        "Ada moved the team's deadline to Friday because the migration plan slipped.",
        "vacation in lisbon booked for august " * 12,
    ]
    fast, plain = MiniLMEmbedder(), MiniLMEmbedder(int8_kernels=False)
    try:
        a, b = await fast.embed(texts), await plain.embed(texts)
        assert fast.int8_layers == 36  # 6 layers x (q, k, v, out, ffn in, ffn out)
        assert plain.int8_layers == 0
        cos = (np.asarray(a) * np.asarray(b)).sum(axis=1)
        # The packaged int8 model agrees with the fp32 original at >= 0.9995:
        # the kernels must not add more error than that, or the index would mix
        # spaces.  Measured: 0.99986 at the least on these texts.
        assert cos.min() > 0.9995, cos
    finally:
        await fast.close()
        await plain.close()


async def test_minilm_falls_back_to_fp32_kernels(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unavailable(path: str) -> None:
        raise RuntimeError("no MatMulNBits here")

    monkeypatch.setattr(minilm_module, "pack_in_subprocess", unavailable)
    e = MiniLMEmbedder()
    try:
        with caplog.at_level(logging.WARNING):
            await e.warm()
        assert e.int8_layers == 0
        assert "int8 kernels unavailable (no MatMulNBits here)" in caplog.text
        [v] = await e.embed(["still embeds"])
        assert abs(np.linalg.norm(v) - 1.0) < 1e-4
    finally:
        await e.close()
