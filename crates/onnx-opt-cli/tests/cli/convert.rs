//! `onnx-opt convert` and `optimize --target-opset`: one step to the target, the IR version that
//! goes with it, every node that cannot be expressed listed, nothing written on failure.

use std::path::PathBuf;

use super::{onnx_opt, stderr, stdout};

fn example() -> PathBuf {
    super::repo_root().join("examples/models/mlp.onnxtxt")
}

/// Ops whose schema did not change between opsets 7 and 13, an initializer, an IR 7 model.
const UNCHANGED_OPS: &str = r#"<ir_version: 7, opset_import: ["" : 13]>
g (float[2, 3] x, bool[2] a) => (float[2, 3] y, bool[2] z) <bool[2] b = {1, 0}> {
  s = Sin(x)
  y = Cos(s)
  z = And(a, b)
}
"#;

#[test]
fn convert_up_sets_the_opset_and_the_ir_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp18.onnx");
    let o = onnx_opt(&[&"convert", &example(), &"--opset", &"18", &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("check: outputs equal on 3 random inputs"));
    let info = stdout(&onnx_opt(&[&"info", &out]));
    assert!(info.contains("opsets: ai.onnx 18"), "{info}");
    assert!(info.contains("ir_version: 8"), "{info}");
}

#[test]
fn convert_down_below_ir_4_lists_initializers_as_inputs_and_back_up() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.onnxtxt");
    std::fs::write(&src, UNCHANGED_OPS).unwrap();
    let down = dir.path().join("m7.onnx");
    let o = onnx_opt(&[&"convert", &src, &"--opset", &"7", &"-o", &down]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info = stdout(&onnx_opt(&[&"info", &down]));
    assert!(info.contains("opsets: ai.onnx 7"), "{info}");
    assert!(info.contains("ir_version: 3"), "{info}");
    let text = stdout(&onnx_opt(&[&"print", &down]));
    assert!(text.contains("bool[2] b"), "{text}");
    // IR 3: the initializer is listed among the graph inputs.
    let inputs = text.split("=>").next().unwrap();
    assert!(inputs.contains(" b"), "{text}");
    assert!(onnx_opt(&[&"check", &down]).status.success());

    let up = dir.path().join("m13.onnx");
    let o = onnx_opt(&[&"convert", &down, &"--opset", &"13", &"-o", &up]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info = stdout(&onnx_opt(&[&"info", &up]));
    assert!(info.contains("opsets: ai.onnx 13"), "{info}");
    assert!(info.contains("ir_version: 7"), "{info}");
}

#[test]
fn nodes_without_an_equivalent_at_the_target_are_all_listed_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.onnxtxt");
    // BitwiseNot and BitwiseAnd exist from 18 only, with no older form; the Dropout and the
    // Softmax over axis 0 have one (Dropout-10, and Softmax through a Transpose).
    std::fs::write(
        &src,
        "<ir_version: 8, opset_import: [\"\" : 18]>\ng (int32[2, 3] a, float[2, 3] x) => (int32[2, 3] z, float[2, 3] y) {\n  n = BitwiseNot(a)\n  z = BitwiseAnd(n, a)\n  d = Dropout(x)\n  y = Softmax <axis = 0> (d)\n}\n",
    )
    .unwrap();
    let out = dir.path().join("m11.onnx");
    let o = onnx_opt(&[&"convert", &src, &"--opset", &"11", &"-o", &out]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("cannot express 2 node(s) at opset 11"),
        "{err}"
    );
    for line in [
        "the node computing 'n' (BitwiseNot, version 18; opset 11 has no BitwiseNot)",
        "the node computing 'z' (BitwiseAnd, version 18; opset 11 has no BitwiseAnd)",
    ] {
        assert!(err.contains(line), "{err}");
    }
    assert!(
        !err.contains("Dropout") && !err.contains("Softmax"),
        "{err}"
    );
    assert!(!out.exists());
    // The example (Dropout-13 and a Softmax over the last axis) converts.
    let o = onnx_opt(&[&"convert", &example(), &"--opset", &"11", &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn versions_that_only_widen_types_or_add_defaulted_attributes_carry_over() {
    // mlp is opset 17: Add-14, Relu-14 and Identity-16 differ from opset 13's versions only in
    // their type sets; the model's float types are allowed at 13.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp13.onnx");
    let o = onnx_opt(&[&"convert", &example(), &"--opset", &"13", &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info = stdout(&onnx_opt(&[&"info", &out]));
    assert!(
        info.contains("opsets: ai.onnx 13") && info.contains("ir_version: 7"),
        "{info}"
    );
    // An int32 Relu cannot go below 14 (Relu-13 takes floats only).
    let src = dir.path().join("int_relu.onnxtxt");
    std::fs::write(
        &src,
        "<ir_version: 8, opset_import: [\"\" : 17]>\ng (int32[2] x) => (int32[2] y) {\n  y = Relu(x)\n}\n",
    )
    .unwrap();
    let o = onnx_opt(&[
        &"convert", &src, &"--opset", &"13", &"-o", &out, &"--check", &"0",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("(Relu, version 14; opset 13 has version 13)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn optimize_can_land_at_a_target_opset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp18.onnx");
    let o = onnx_opt(&[&example(), &"-o", &out, &"--target-opset", &"18"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info = stdout(&onnx_opt(&[&"info", &out]));
    assert!(
        info.contains("opsets: ai.onnx 18") && info.contains("Gemm"),
        "{info}"
    );
}

#[test]
fn an_onnxtxt_output_is_written_as_text_and_loads_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp18.onnxtxt");
    let o = onnx_opt(&[&"convert", &example(), &"--opset", &"18", &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).expect("the output is UTF-8 text");
    assert!(text.contains(r#"opset_import: ["" : 18]"#), "{text}");
    assert!(onnx_opt(&[&"check", &out]).status.success());
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}
