"""scripts/gen_decoder.py: torch-export-like decoder models, checked against the numpy reference
(scripts/decoder_reference.py) in onnxruntime, or onnx's ReferenceEvaluator for bfloat16."""

import collections
import dataclasses
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import decoder_reference  # noqa: E402
import gen_decoder  # noqa: E402


def run_script(args):
    command = [sys.executable, str(SCRIPTS / "gen_decoder.py"), *args.split()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def generate(directory, args):
    """Run the script with the arguments in the string ``args``; returns (path, stdout)."""
    out = directory / "model.onnx"
    result = run_script(f"--out {out} {args}")
    assert result.returncode == 0, result.stdout + result.stderr
    return out, result.stdout


def op_counts(path):
    return collections.Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)


# (preset, style, opset, dtype, more arguments, op types the style has at that opset, op types it must not have)
VERIFIED = [
    ("tiny", "torchscript", 14, "float32", "", {"Constant", "Div", "Range", "Less"}, {"RMSNormalization"}),
    ("tiny", "torchscript", 17, "float32", "", {"Constant", "ConstantOfShape", "Expand"}, {"Attention"}),
    ("tiny", "torchscript", 18, "float32", "", {"Constant", "Softmax", "Neg"}, {"Reciprocal"}),
    ("tiny", "torchscript", 23, "float32", "", {"Constant", "Softmax"}, {"Attention", "RotaryEmbedding"}),
    ("tiny", "dynamo", 18, "float16", "", {"IsNaN", "Reciprocal", "GatherND", "Cos"}, {"Constant", "Attention"}),
    ("tiny", "dynamo", 23, "float16", "", {"RMSNormalization", "Attention", "Neg"}, {"Constant", "RotaryEmbedding"}),
    ("tiny-qwen2", "torchscript", 17, "float16", "", {"Constant", "Add"}, set()),
    ("tiny-mistral", "dynamo", 20, "float32", "--partial-rotary 0.5", {"Slice", "IsNaN"}, {"Constant"}),
    ("tiny", "torchscript", 18, "bfloat16", "", {"Constant", "Cast"}, set()),
]


@pytest.mark.parametrize("preset,style,opset,dtype,more,has,lacks", VERIFIED, ids=lambda v: str(v))
def test_generated_model_matches_the_numpy_reference(tmp_path, preset, style, opset, dtype, more, has, lacks):
    path, stdout = generate(
        tmp_path, f"--preset {preset} --style {style} --opset {opset} --dtype {dtype} --verify {more}"
    )
    assert "verified against the numpy reference" in stdout
    checker = "ReferenceEvaluator" if dtype == "bfloat16" else "onnxruntime"
    assert checker in stdout.splitlines()[-1]
    ops = op_counts(path)
    assert has <= set(ops) and not lacks & set(ops), ops
    model = onnx.load(str(path), load_external_data=False)
    assert model.opset_import[0].version == opset
    assert model.ir_version == {14: 7, 17: 8, 18: 8, 20: 9, 23: 11}[opset]
    assert bool(model.graph.value_info) == (style == "dynamo")


def test_weights_are_external_aligned_and_realistic(tmp_path):
    path, _ = generate(tmp_path, "--preset tiny-qwen2 --style torchscript --opset 17 --dtype float16")
    data = pathlib.Path(str(path) + ".data")
    assert data.is_file() and path.stat().st_size < 200_000
    model = onnx.load(str(path), load_external_data=False)
    external = {}
    for t in model.graph.initializer:
        nbytes = int(np.prod(t.dims, dtype=np.int64)) * decoder_reference.NP_TYPES[t.data_type].itemsize
        if nbytes >= 1024:
            assert t.data_location == onnx.TensorProto.EXTERNAL and not t.raw_data, t.name
            info = {e.key: e.value for e in t.external_data}
            assert info["location"] == data.name and int(info["length"]) == nbytes, t.name
            assert int(info["offset"]) % 4096 == 0 and int(info["offset"]) + nbytes <= data.stat().st_size, t.name
        else:
            assert t.data_location != onnx.TensorProto.EXTERNAL, t.name
        external[t.name] = decoder_reference.read_tensor(t, str(tmp_path)).astype(np.float64)
    norms = [v for name, v in external.items() if name.endswith("layernorm.weight") or name == "model.norm.weight"]
    linears = [v for name, v in external.items() if name.startswith("onnx::MatMul_")]
    biases = [v for name, v in external.items() if name.endswith("_proj.bias")]
    assert len(norms) == 5 and len(linears) == 15 and len(biases) == 6
    for norm in norms:
        assert abs(norm.mean() - 1) < 0.03 and 0.03 < norm.std() < 0.07
    for w in linears + biases + [external["model.embed_tokens.weight"]]:
        assert abs(w.mean()) < 0.01 and 0.012 < w.std() < 0.028
    assert len({w.tobytes() for w in linears}) == len(linears)


def test_unaligned_weights_are_contiguous_and_the_seed_decides(tmp_path):
    def data(name, args=""):
        path, _ = generate(
            tmp_path / name, f"--preset tiny --style dynamo --opset 18 --dtype float32 --no-align {args}"
        )
        model = onnx.load(str(path), load_external_data=False)
        spans = sorted(
            (int(e["offset"]), int(e["length"]))
            for e in ({x.key: x.value for x in t.external_data} for t in model.graph.initializer)
            if e
        )
        return pathlib.Path(str(path) + ".data").read_bytes(), spans

    first, spans = data("a")
    assert [offset for offset, _ in spans] == [0] + list(np.cumsum([length for _, length in spans])[:-1])
    assert data("b")[0] == first
    assert data("c", "--seed 1")[0] != first


def test_tied_lm_head_is_the_transposed_embedding(tmp_path, monkeypatch):
    monkeypatch.setitem(gen_decoder.PRESETS, "tiny-tied", dataclasses.replace(gen_decoder.TINY, tied=True))
    for style in ("torchscript", "dynamo"):
        out = tmp_path / style / "model.onnx"
        gen_decoder.main(f"--preset tiny-tied --style {style} --opset 18 --dtype float16 --out {out} --verify".split())
        stored = {t.name: t for t in onnx.load(str(out), load_external_data=False).graph.initializer}
        logits = next(n for n in onnx.load(str(out), load_external_data=False).graph.node if n.output[0] == "logits")
        embed = "model.embed_tokens.weight" if style == "torchscript" else "lm_head.weight"
        lm_head = decoder_reference.read_tensor(stored[logits.input[1]], str(out.parent))
        np.testing.assert_array_equal(lm_head, decoder_reference.read_tensor(stored[embed], str(out.parent)).T)


def test_verify_refuses_a_big_model_before_writing(tmp_path):
    out = tmp_path / "big" / "model.onnx"
    result = run_script(f"--preset llama2-7b --style dynamo --opset 18 --dtype float16 --out {out} --verify")
    assert result.returncode != 0 and "--verify needs at most" in result.stderr
    assert not out.parent.exists()


def test_llama2_7b_shapes_load_in_onnxruntime(tmp_path):
    import onnxruntime as ort

    path, stdout = generate(tmp_path, "--preset llama2-7b --layers 1 --style torchscript --opset 17 --dtype float16")
    try:
        model = onnx.load(str(path), load_external_data=False)
        shapes = collections.Counter(
            tuple(t.dims) for t in model.graph.initializer if t.name.startswith("onnx::MatMul_")
        )
        assert shapes == {(4096, 4096): 4, (4096, 11008): 2, (11008, 4096): 1, (4096, 32000): 1}
        stored = {t.name: tuple(t.dims) for t in model.graph.initializer}
        assert stored["model.embed_tokens.weight"] == (32000, 4096)
        assert stored["model.layers.0.self_attn.rotary_emb.cos_cached"] == (4096, 128)
        assert "464,531,456 params" in stdout
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        inputs = {i.name: i.shape for i in session.get_inputs()}
        assert inputs["past_key_values.0.key"] == ["batch_size", 32, "past_sequence_length", 128]
        assert [o.shape for o in session.get_outputs()][:2] == [
            ["batch_size", "sequence_length", 32000],
            ["batch_size", 32, "total_sequence_length", 128],
        ]
    finally:  # pytest keeps the last runs' tmp_path: drop the 0.9 GB of weights
        pathlib.Path(str(path) + ".data").unlink()
