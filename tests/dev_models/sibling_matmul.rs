//! MatMuls that share their input and take constant weights merge into one MatMul and a Split
//! (`src/passes/sibling_matmul.rs`); each case is optimized with the check on, so the merged model
//! computes what the original does.

/// Optimizes a text model with the default pipeline and the check on; returns the optimized
/// main graph's op counts and the report's merged MatMul count.
fn optimize(text: &str) -> (std::collections::BTreeMap<String, usize>, usize) {
    let model = onnx_opt::parse_text(text).unwrap();
    let out = onnx_opt::Optimizer::new()
        .check(3)
        .optimize(&model)
        .unwrap();
    let g = out.model.to_proto().graph.unwrap();
    let mut ops = std::collections::BTreeMap::new();
    for n in &g.node {
        *ops.entry(n.op_type.clone().unwrap_or_default())
            .or_default() += 1;
    }
    (
        ops,
        out.report
            .passes
            .count("merge-sibling-matmuls", "merged_matmuls"),
    )
}

/// Three projections of one input, at `opset`, the third weight `w3` (3 columns).
fn projections(opset: i64, extra_inputs: &str, w3: &str) -> String {
    format!(
        r#"<ir_version: 8, opset_import: ["" : {opset}]>
g (float[2,5,4] x{extra_inputs}) => (float[2,5,2] q, float[2,5,2] k, float[2,5,3] v) {{
  wq = Constant <value = float[4,2] {{1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}}> ()
  wk = Constant <value = float[4,2] {{0.5, -1.0, 0.25, 2.0, -3.0, 1.5, 0.0, 1.0}}> ()
  {w3}
  q = MatMul(x, wq)
  k = MatMul(x, wk)
  v = MatMul(x, wv)
}}"#
    )
}

const WV: &str =
    "wv = Constant <value = float[4,3] {1.0, 0.0, -1.0, 2.0, 0.5, 0.25, -2.0, 3.0, 1.0, 0.0, 1.0, 4.0}> ()";

#[test]
fn three_projections_of_one_input_become_one_matmul_and_a_split() {
    // Split takes its sizes as an input from 13, as an attribute at 11 and 12.
    for opset in [11, 12, 13, 18, 21] {
        let (ops, merged) = optimize(&projections(opset, "", WV));
        assert_eq!(merged, 2, "opset {opset}");
        assert_eq!(ops.get("MatMul"), Some(&1), "opset {opset}: {ops:?}");
        assert_eq!(ops.get("Split"), Some(&1), "opset {opset}: {ops:?}");
    }
}

#[test]
fn sibling_matmuls_stay_apart_where_merging_would_not_pay_or_not_hold() {
    let cases = [
        // Below opset 11 Split has no negative axis.
        ("opset 10", projections(10, "", WV)),
        // A weight that is a graph input can be overridden.
        (
            "a weight given as an input",
            projections(13, ", float[4,3] wv", ""),
        ),
        // Two MatMuls would become a MatMul and a Split.
        (
            "two siblings",
            projections(13, "", "wv = Constant <value = float[4,3] {1.0, 0.0, -1.0, 2.0, 0.5, 0.25, -2.0, 3.0, 1.0, 0.0, 1.0, 4.0}> ()\n  wz = Relu(x)")
                .replace("v = MatMul(x, wv)", "v = MatMul(wz, wv)"),
        ),
    ];
    for (what, text) in cases {
        let (ops, merged) = optimize(&text);
        assert_eq!(merged, 0, "{what}");
        assert_eq!(ops.get("MatMul"), Some(&3), "{what}: {ops:?}");
        assert_eq!(ops.get("Split"), None, "{what}: {ops:?}");
    }
}

#[test]
fn a_weight_read_by_another_node_is_left_out_of_the_merge() {
    // `wk` is also added to an input, so it stays; the other three merge.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,5,4] x, float[4,2] y) => (float[2,5,2] q, float[2,5,2] k, float[2,5,3] v, float[2,5,1] u, float[4,2] kk) {
  wq = Constant <value = float[4,2] {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}> ()
  wk = Constant <value = float[4,2] {0.5, -1.0, 0.25, 2.0, -3.0, 1.5, 0.0, 1.0}> ()
  wv = Constant <value = float[4,3] {1.0, 0.0, -1.0, 2.0, 0.5, 0.25, -2.0, 3.0, 1.0, 0.0, 1.0, 4.0}> ()
  wu = Constant <value = float[4,1] {1.0, -1.0, 2.0, -2.0}> ()
  q = MatMul(x, wq)
  k = MatMul(x, wk)
  v = MatMul(x, wv)
  u = MatMul(x, wu)
  kk = Add(y, wk)
}"#;
    let (ops, merged) = optimize(text);
    assert_eq!(merged, 2);
    assert_eq!(ops.get("MatMul"), Some(&2), "{ops:?}");
    assert_eq!(ops.get("Split"), Some(&1), "{ops:?}");
}

/// Three projections whose merged weight would pass `MERGE_MAX_BYTES` (a 7B decoder's query,
/// key and value) stay three MatMuls; the same shapes at a quarter of the columns merge.
#[test]
fn projections_too_large_to_copy_stay_separate() {
    use onnx_ir::onnx_proto::{
        tensor_proto::DataType, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
        TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
    };
    let rows = 1024usize;
    // The merged float16 weight: just over 32 MiB, and a quarter of that.
    let cols_over = (32 << 20) / (3 * rows * 2) + 1;
    for (cols, merges) in [(cols_over, false), (cols_over / 4, true)] {
        let info = |name: &str, dims: &[usize]| {
            ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(DataType::Float16 as i32),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| onnx_ir::onnx_proto::tensor_shape_proto::Dimension {
                                value: Some(
                                    onnx_ir::onnx_proto::tensor_shape_proto::dimension::Value::DimValue(
                                        d as i64,
                                    ),
                                ),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
        };
        let names = ["q", "k", "v"];
        let weights = names
            .iter()
            .enumerate()
            .map(|(i, n)| TensorProto {
                name: Some(format!("w{n}")),
                dims: vec![rows as i64, cols as i64],
                data_type: Some(DataType::Float16 as i32),
                raw_data: Some(
                    (0..rows * cols)
                        .flat_map(|j| {
                            half::f16::from_f32(((j * 7 + i) % 13) as f32 / 16.0).to_le_bytes()
                        })
                        .collect::<Vec<u8>>()
                        .into(),
                ),
                ..Default::default()
            })
            .collect();
        let model = ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(17),
            }],
            graph: Some(GraphProto {
                name: Some("g".into()),
                node: names
                    .iter()
                    .map(|n| NodeProto {
                        op_type: Some("MatMul".into()),
                        input: vec!["x".into(), format!("w{n}")],
                        output: vec![n.to_string()],
                        ..Default::default()
                    })
                    .collect(),
                initializer: weights,
                input: vec![info("x", &[1, rows])],
                output: names.iter().map(|n| info(n, &[1, cols])).collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let model = onnx_ir::Model::from_proto(model).unwrap();
        let out = onnx_opt::Optimizer::new()
            .check(0)
            .optimize(&model)
            .unwrap();
        let merged = out
            .report
            .passes
            .count("merge-sibling-matmuls", "merged_matmuls");
        assert_eq!(merged > 0, merges, "{cols} columns: {merged} merged");
    }
}

/// The `onnxruntime` pipeline's `merge-sibling-matmul-pairs` stacks two siblings too (a gated
/// MLP's gate and up projections); the default pipeline leaves a pair apart (above).
#[test]
fn the_onnxruntime_pipeline_merges_a_pair() {
    let text = projections(
        13,
        "",
        "wv = Constant <value = float[4,3] {1.0, 0.0, -1.0, 2.0, 0.5, 0.25, -2.0, 3.0, 1.0, 0.0, 1.0, 4.0}> ()\n  wz = Relu(x)",
    )
    .replace("v = MatMul(x, wv)", "v = MatMul(wz, wv)");
    let model = onnx_opt::parse_text(&text).unwrap();
    let out = onnx_opt::Optimizer::new()
        .pipeline(onnx_opt::Pipeline::builtin("onnxruntime").unwrap())
        .check(3)
        .optimize(&model)
        .unwrap();
    let g = out.model.to_proto().graph.unwrap();
    let count = |op: &str| {
        g.node
            .iter()
            .filter(|n| n.op_type.as_deref() == Some(op))
            .count()
    };
    assert_eq!((count("MatMul"), count("Split")), (2, 1));
    assert_eq!(
        out.report
            .passes
            .count("merge-sibling-matmul-pairs", "merged_matmuls"),
        1
    );
}
