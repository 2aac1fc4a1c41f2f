//! Symbolic shape arithmetic through whole graphs: shapes computed with Shape, Gather,
//! Unsqueeze, Concat, Slice, Range, arithmetic, ... reach Reshape, Expand, ConstantOfShape and
//! Tile as symbolic dims, named as the graph input names them.

use onnx_schema::infer::{GraphInference, SymDim};

use crate::support::{attr_int, attr_ints, dims, float, int64s, render, Graph};

/// Checks the rendered types of the named values.
pub fn check(result: &GraphInference, expect: &[(&str, &str)]) {
    for (name, want) in expect {
        assert_eq!(render(result.types.get(*name)), *want, "type of {name}");
    }
}

fn sym(result: &GraphInference, name: &str) -> Vec<SymDim> {
    result
        .sym_values
        .get(name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} has no symbolic value"))
}

/// The head-splitting pattern of exported transformers:
/// `x.reshape(x.shape[0], x.shape[1], 2, 64)`.
fn split_heads(opset: i64) -> Graph {
    let unsqueeze = |g: Graph, from: &str, to: &str| {
        if opset >= 13 {
            g.node("Unsqueeze", &[from, "axes0"], &[to], vec![])
        } else {
            g.node("Unsqueeze", &[from], &[to], vec![attr_ints("axes", &[0])])
        }
    };
    let g = Graph::new(opset)
        .input("x", float(&["batch", "sequence", "128"]))
        .node("Shape", &["x"], &["s"], vec![])
        .constant("i0", &[], &[0])
        .constant("i1", &[], &[1])
        .node("Gather", &["s", "i0"], &["b"], vec![attr_int("axis", 0)])
        .node("Gather", &["s", "i1"], &["q"], vec![attr_int("axis", 0)])
        .constant("axes0", &[1], &[0]);
    let g = unsqueeze(g, "b", "ub");
    let g = unsqueeze(g, "q", "uq");
    g.constant("c2", &[1], &[2])
        .constant("c64", &[1], &[64])
        .node(
            "Concat",
            &["ub", "uq", "c2", "c64"],
            &["shape"],
            vec![attr_int("axis", 0)],
        )
        .node("Reshape", &["x", "shape"], &["y"], vec![])
}

#[test]
fn shape_gather_unsqueeze_concat_reshape_keeps_names() {
    for opset in [11, 13, 17] {
        let result = split_heads(opset).infer();
        check(
            &result,
            &[
                ("s", "int64[3]"),
                ("b", "int64[]"),
                ("ub", "int64[1]"),
                ("shape", "int64[4]"),
                ("y", "float[batch, sequence, 2, 64]"),
            ],
        );
        assert_eq!(sym(&result, "s"), dims(&["batch", "sequence", "128"]));
        assert_eq!(sym(&result, "b"), dims(&["batch"]));
        assert_eq!(
            sym(&result, "shape"),
            dims(&["batch", "sequence", "2", "64"]),
            "opset {opset}"
        );
    }
}

#[test]
fn reshape_solves_minus_one_through_params() {
    let result = split_heads(17)
        .node(
            "Transpose",
            &["y"],
            &["t"],
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        )
        .constant("merge", &[3], &[0, 0, -1])
        .constant("split", &[4], &[0, 0, -1, 64])
        .node("Reshape", &["x", "split"], &["y2"], vec![])
        .node("Reshape", &["y", "merge"], &["back"], vec![])
        .node("Reshape", &["t", "merge"], &["mixed"], vec![])
        .infer();
    check(
        &result,
        &[
            ("t", "float[batch, 2, sequence, 64]"),
            ("y2", "float[batch, sequence, 2, 64]"),
            ("back", "float[batch, sequence, 128]"),
            // [batch, 2, sequence, 64] -> [batch, 2, -1]: the -1 is sequence * 64, not a name.
            ("mixed", "float[batch, 2, 64*sequence]"),
        ],
    );
}

#[test]
fn shape_slices_and_arithmetic_fold() {
    let result = Graph::new(17)
        .input("x", float(&["batch", "sequence", "128"]))
        .node("Shape", &["x"], &["s"], vec![])
        .node("Shape", &["x"], &["tail"], vec![attr_int("start", 1)])
        .constant("starts", &[1], &[1])
        .constant("ends", &[1], &[i64::MAX])
        .node("Slice", &["s", "starts", "ends"], &["sliced"], vec![])
        .node("Size", &["x"], &["n"], vec![])
        .constant("two", &[], &[2])
        .constant("i2", &[], &[2])
        .node("Gather", &["s", "i2"], &["hidden"], vec![])
        .node("Div", &["hidden", "two"], &["half"], vec![])
        .node("Mul", &["half", "two"], &["again"], vec![])
        .node("Cast", &["hidden"], &["hidden_f"], vec![attr_int("to", 1)])
        .node("Equal", &["hidden", "half"], &["eq"], vec![])
        .node("Where", &["eq", "two", "hidden"], &["picked"], vec![])
        .infer();
    assert_eq!(sym(&result, "tail"), dims(&["sequence", "128"]));
    assert_eq!(sym(&result, "sliced"), dims(&["sequence", "128"]));
    assert_eq!(
        sym(&result, "n"),
        dims(&["128*batch*sequence"]),
        "batch * sequence * 128 is the product's name"
    );
    assert_eq!(sym(&result, "half"), dims(&["64"]));
    assert_eq!(sym(&result, "again"), dims(&["128"]));
    assert_eq!(sym(&result, "hidden_f"), dims(&["128"]));
    assert_eq!(sym(&result, "eq"), dims(&["0"]));
    assert_eq!(sym(&result, "picked"), dims(&["128"]));
    check(
        &result,
        &[
            ("tail", "int64[2]"),
            ("n", "int64[]"),
            ("eq", "bool[]"),
            ("hidden_f", "float[]"),
        ],
    );
}

#[test]
fn shape_vectors_drive_expand_constant_of_shape_tile_and_range() {
    let result = Graph::new(17)
        .input("x", float(&["batch", "sequence", "128"]))
        .input("row", float(&["1", "1", "128"]))
        .node("Shape", &["x"], &["s"], vec![])
        .node("Expand", &["row", "s"], &["expanded"], vec![])
        .node("ConstantOfShape", &["s"], &["zeros"], vec![])
        .constant("i1", &[], &[1])
        .node("Gather", &["s", "i1"], &["seq"], vec![])
        .constant("zero", &[], &[0])
        .constant("one", &[], &[1])
        .node("Range", &["zero", "seq", "one"], &["positions"], vec![])
        .constant("reps", &[3], &[1, 2, 1])
        .node("Tile", &["x", "reps"], &["tiled"], vec![])
        .node("Concat", &["s", "s"], &["s2"], vec![attr_int("axis", 0)])
        .infer();
    check(
        &result,
        &[
            ("expanded", "float[batch, sequence, 128]"),
            ("zeros", "float[batch, sequence, 128]"),
            ("positions", "int64[sequence]"),
            ("tiled", "float[batch, 2*sequence, 128]"),
            ("s2", "int64[6]"),
        ],
    );
}

#[test]
fn position_ids_slice_takes_the_symbolic_end() {
    // BERT's embeddings: position_ids[:, :sequence] of a [1, 512] table, then a gather, then an
    // add with the token embeddings: the output keeps [batch, sequence, 128].
    let table: Vec<i64> = (0..512).collect();
    let result = Graph::new(13)
        .input(
            "input_ids",
            crate::support::typed(7, &["batch", "sequence"]),
        )
        .input("tokens", float(&["batch", "sequence", "128"]))
        .input("embeddings", float(&["512", "128"]))
        .initializer("position_ids", int64s(&[1, 512], &table))
        .node("Shape", &["input_ids"], &["s"], vec![])
        .constant("i1", &[], &[1])
        .node("Gather", &["s", "i1"], &["seq"], vec![attr_int("axis", 0)])
        .constant("axes", &[1], &[0])
        .node("Unsqueeze", &["seq", "axes"], &["end"], vec![])
        .constant("start", &[1], &[0])
        .constant("axis1", &[1], &[1])
        .constant("step", &[1], &[1])
        .node(
            "Slice",
            &["position_ids", "start", "end", "axis1", "step"],
            &["ids"],
            vec![],
        )
        .node("Gather", &["embeddings", "ids"], &["pos"], vec![])
        .node("Add", &["tokens", "pos"], &["sum"], vec![])
        .infer();
    check(
        &result,
        &[
            ("ids", "int64[1, sequence]"),
            ("pos", "float[1, sequence, 128]"),
            ("sum", "float[batch, sequence, 128]"),
        ],
    );
}

#[test]
fn split_shape_vectors_reassemble() {
    let result = Graph::new(18)
        .input("x", float(&["batch", "sequence", "128"]))
        .node("Shape", &["x"], &["s"], vec![])
        .node(
            "Split",
            &["s"],
            &["b", "q", "h"],
            vec![attr_int("num_outputs", 3)],
        )
        .constant("parts", &[2], &[1, 2])
        .node("Split", &["s", "parts"], &["head", "tail"], vec![])
        .node(
            "Concat",
            &["q", "b", "h"],
            &["swapped"],
            vec![attr_int("axis", 0)],
        )
        .node("Reshape", &["x", "swapped"], &["y"], vec![])
        .infer();
    assert_eq!(sym(&result, "q"), dims(&["sequence"]));
    assert_eq!(sym(&result, "tail"), dims(&["sequence", "128"]));
    check(
        &result,
        &[
            ("head", "int64[1]"),
            ("tail", "int64[2]"),
            ("y", "float[sequence, batch, 128]"),
        ],
    );
}

#[test]
fn partly_known_shape_vectors_keep_what_is_known() {
    let result = Graph::new(17)
        .input("x", float(&["batch", "sequence", "128"]))
        .input("unknown_len", crate::support::typed(7, &["1"]))
        .node("Shape", &["x"], &["s"], vec![attr_int("end", 1)])
        .constant("c64", &[1], &[64])
        .node(
            "Concat",
            &["s", "unknown_len", "c64"],
            &["target"],
            vec![attr_int("axis", 0)],
        )
        .node("Reshape", &["x", "target"], &["y"], vec![])
        .infer();
    assert_eq!(sym(&result, "target"), dims(&["batch", "?", "64"]));
    check(&result, &[("y", "float[batch, ?, 64]")]);
}

#[test]
fn torch_expand_guard_is_false_over_dims() {
    // TorchScript's `x.expand(shape)` guard: Where(Equal(shape, -1), 1, shape). A dim is never
    // negative, so the guard picks the shape itself and Expand keeps the dims' names.
    let result = Graph::new(17)
        .input("x", float(&["batch", "1", "sequence"]))
        .node("Shape", &["x"], &["s"], vec![])
        .constant("minus_one", &[3], &[-1, -1, -1])
        .constant("ones", &[3], &[1, 1, 1])
        .constant("four", &[1], &[4])
        .constant("i1", &[1], &[1])
        .constant("i0", &[1], &[0])
        .node("Gather", &["s", "i0"], &["b"], vec![attr_int("axis", 0)])
        .node("Gather", &["s", "i1"], &["one"], vec![attr_int("axis", 0)])
        .node("Shape", &["x"], &["tail"], vec![attr_int("start", 2)])
        .node(
            "Concat",
            &["b", "four", "tail"],
            &["shape"],
            vec![attr_int("axis", 0)],
        )
        .node("Equal", &["shape", "minus_one"], &["is_neg"], vec![])
        .node("Where", &["is_neg", "ones", "shape"], &["guarded"], vec![])
        .node("Expand", &["x", "guarded"], &["y"], vec![])
        .node("Less", &["b", "minus_one"], &["lt"], vec![])
        .node("GreaterOrEqual", &["tail", "minus_one"], &["ge"], vec![])
        .node("Less", &["b", "four"], &["unknown"], vec![])
        .infer();
    assert_eq!(sym(&result, "is_neg"), dims(&["0", "0", "0"]));
    assert_eq!(sym(&result, "guarded"), dims(&["batch", "4", "sequence"]));
    assert_eq!(sym(&result, "lt"), dims(&["0", "0", "0"]));
    assert_eq!(sym(&result, "ge"), dims(&["1", "1", "1"]));
    assert_eq!(sym(&result, "unknown"), dims(&["?"]));
    check(&result, &[("y", "float[batch, 4, sequence]")]);
}
