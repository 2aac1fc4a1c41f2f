//! What works on a bare clone: text models everywhere, the example model, pipelines, and the
//! default check (on, off, and a failure that names the output and the rule).

use std::path::PathBuf;

use super::{onnx_opt, stderr, stdout};

fn example() -> PathBuf {
    super::repo_root().join("examples/models/mlp.onnxtxt")
}

#[test]
fn every_command_accepts_a_text_model() {
    let m = example();
    let dir = tempfile::tempdir().unwrap();
    let o = onnx_opt(&[&"info", &m]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nodes: 10"), "{}", stdout(&o));
    let o = onnx_opt(&[&"check", &m]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = onnx_opt(&[&"print", &m]);
    assert!(o.status.success() && stdout(&o).contains("Softmax"));
    let o = onnx_opt(&[&"run", &m, &"--random-inputs", &"--dim", &"batch=2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("probabilities: float[2, 4]"),
        "{}",
        stdout(&o)
    );
    let copy = dir.path().join("copy.onnx");
    let o = onnx_opt(&[&"copy", &m, &"-o", &copy]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = onnx_opt(&[&"info", &copy]);
    assert!(stdout(&o).contains("nodes: 10"), "{}", stdout(&o));
    let o = onnx_opt(&[&"rules", &"explain", &"matmul_add_to_gemm", &m]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("fired"), "{}", stdout(&o));
}

#[test]
fn a_text_model_that_does_not_parse_names_the_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.onnxtxt");
    std::fs::write(
        &bad,
        "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float x) => (y) {\n  y = Relu(x\n}\n",
    )
    .unwrap();
    let out = dir.path().join("out.onnx");
    for args in [vec!["info"], vec!["optimize"]] {
        let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> = args.iter().map(|s| s as _).collect();
        a.push(&bad);
        if args[0] == "optimize" {
            a.push(&"-o");
            a.push(&out);
        }
        let o = onnx_opt(&a);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(err.contains("bad.onnxtxt:4:1"), "{err}");
    }
    assert!(!out.exists());
}

#[test]
fn the_readme_first_command_optimizes_the_example_with_the_check_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp.onnx");
    let o = onnx_opt(&[&example(), &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("check: outputs equal on 3 random inputs"),
        "{text}"
    );
    assert!(
        text.contains("Gemm                                  0          2"),
        "{text}"
    );
    let o = onnx_opt(&[&"info", &out]);
    assert!(stdout(&o).contains("nodes: 4"), "{}", stdout(&o));
}

#[test]
fn check_0_turns_the_check_off_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp.onnx");
    let o = onnx_opt(&[&example(), &"-o", &out, &"--check", &"0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("check: off (--check 0)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_failed_check_names_the_output_and_the_rule_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("wrong.rules");
    // Relu(x) is not x: a wrong rule the checker cannot see (it is well typed).
    std::fs::write(&rules, "# Wrong on purpose, for a test.\n\n# Relu(x) == x (false)\nrule relu_is_identity: Relu(x) => x\n").unwrap();
    let out = dir.path().join("mlp.onnx");
    let o = onnx_opt(&[&example(), &"-o", &out, &"--rules", &rules]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("check failed, nothing written"), "{err}");
    assert!(err.contains("output 'probabilities' differs"), "{err}");
    assert!(err.contains("rule 'relu_is_identity' breaks it"), "{err}");
    assert!(!out.exists());
}

#[test]
fn pipelines_are_listed_and_selected_by_name_or_file() {
    let o = onnx_opt(&[&"pipelines"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for name in ["default:", "fast:", "aggressive:"] {
        assert!(text.contains(name), "{text}");
    }
    // Each pipeline says its passes, and the table says what each pass does.
    assert!(
        text.contains("  passes: expand-bodies, convert-functions, saturate, splice-constant-ifs (if expand-bodies changed the model), saturate-at-target\n"),
        "{text}"
    );
    assert!(text.contains("  merge-sibling-convs "), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp.onnx");
    let o = onnx_opt(&[&example(), &"-o", &out, &"--pipeline", &"fast"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // fast has the cleanups only: no Gemm.
    assert!(stdout(&o).contains("pipeline: fast"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("matmul_add_to_gemm"), "{}", stdout(&o));

    let file = dir.path().join("mine.toml");
    std::fs::write(
        &file,
        "description = \"fusions only\"\n[[phase]]\nname = \"fuse\"\nrules = [\"builtin:fusion\"]\n",
    )
    .unwrap();
    let o = onnx_opt(&[&example(), &"-o", &out, &"--pipeline", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("matmul_add_to_gemm 2"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("identity_elim"), "{}", stdout(&o));

    std::fs::write(
        &file,
        "[[phase]]\nname = \"x\"\nrules = [\"missing.rules\"]\n",
    )
    .unwrap();
    let o = onnx_opt(&[&example(), &"-o", &out, &"--pipeline", &file]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.rules"), "{}", stderr(&o));
    let o = onnx_opt(&[&example(), &"-o", &out, &"--pipeline", &"nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no built-in pipeline named 'nope'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_text_model_that_does_not_parse_is_one_line_naming_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bad.onnxtxt");
    std::fs::write(
        &src,
        "<ir_version: 7, opset_import: [\"\" : 9]>\ng (float[2,3] x) => (float[2,3] y) {\n  y = Dropout<ratio: 0.5>(x)\n}\n",
    )
    .unwrap();
    let out = dir.path().join("o.onnx");
    let o = onnx_opt(&[&"optimize", &src, &"-o", &out]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("bad.onnxtxt:3:22: expected an attribute type, found `0.5`"),
        "{err}"
    );
    // The position and the message once, not repeated by the error's sources.
    assert_eq!(
        err.matches("expected an attribute type").count(),
        1,
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn the_table_and_report_give_the_cost_estimate_and_the_spliced_ifs() {
    let model = super::repo_root().join("tests/pipelines/models/if_constant_condition.onnxtxt");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.onnx");
    let report = dir.path().join("report.json");
    let o = onnx_opt(&[&model, &"-o", &out, &"--report", &report]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("if: 2 If node(s) with a constant condition replaced by the branch taken"),
        "{text}"
    );
    assert!(text.contains("estimate (cost model, us)"), "{text}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        r["passes"]["splice-constant-ifs"]["changes"]["spliced_ifs"],
        2
    );
    let (before, after) = (
        r["estimate_before"].as_f64().unwrap(),
        r["estimate_after"].as_f64().unwrap(),
    );
    // The If nodes and the condition's shape arithmetic are gone: the estimate falls.
    assert!(after > 0.0 && after < before, "{before} -> {after}");
    // Without an If the line is not printed.
    let o = onnx_opt(&[&example(), &"-o", &out]);
    assert!(!stdout(&o).contains("if: "), "{}", stdout(&o));
}

/// Three projections of one input are merged into one MatMul and a Split: the table says so and
/// the report counts the MatMul nodes that went.
#[test]
fn the_table_and_report_give_the_merged_matmuls() {
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,5,4] x) => (float[2,5,2] q, float[2,5,2] k, float[2,5,3] v) {
  wq = Constant <value = float[4,2] {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}> ()
  wk = Constant <value = float[4,2] {0.5, -1.0, 0.25, 2.0, -3.0, 1.5, 0.0, 1.0}> ()
  wv = Constant <value = float[4,3] {1.0, 0.0, -1.0, 2.0, 0.5, 0.25, -2.0, 3.0, 1.0, 0.0, 1.0, 4.0}> ()
  q = MatMul(x, wq)
  k = MatMul(x, wk)
  v = MatMul(x, wv)
}"#;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("qkv.onnxtxt");
    std::fs::write(&model, text).unwrap();
    let out = dir.path().join("out.onnx");
    let report = dir.path().join("report.json");
    let o = onnx_opt(&[&model, &"-o", &out, &"--report", &report]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(
        table.contains("matmuls: 2 MatMul node(s) merged into a sibling that reads the same input"),
        "{table}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        r["passes"]["merge-sibling-matmuls"]["changes"]["merged_matmuls"],
        2
    );
    assert_eq!(r["nodes_after"], 2);
}

/// Under `--cost nodes`, three 1x1 Convs of one input, each followed by a Relu, become one Conv,
/// one Relu and a Split: the table says so and the report counts the Conv nodes that went; the
/// default cost model leaves them apart and prints no such line.
#[test]
fn the_table_and_report_give_the_merged_convs() {
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,3,3] x) => (float[1,1,3,3] a, float[1,2,3,3] b, float[1,1,3,3] c) <float[1,2,1,1] wa = {1.0, -2.0}, float[2,2,1,1] wb = {0.5, 0.25, -1.0, 3.0}, float[1,2,1,1] wc = {2.0, 1.5}> {
  ca = Conv(x, wa)
  cb = Conv(x, wb)
  cc = Conv(x, wc)
  a = Relu(ca)
  b = Relu(cb)
  c = Relu(cc)
}"#;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("branches.onnxtxt");
    std::fs::write(&model, text).unwrap();
    let out = dir.path().join("out.onnx");
    let report = dir.path().join("report.json");
    let o = onnx_opt(&[
        &model,
        &"-o",
        &out,
        &"--cost",
        &"nodes",
        &"--report",
        &report,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(
        table.contains("convs: 2 Conv node(s) merged into a sibling that reads the same input"),
        "{table}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        r["passes"]["merge-sibling-convs"]["changes"]["merged_convs"],
        2
    );
    assert_eq!(r["nodes_after"], 3);
    let o = onnx_opt(&[&model, &"-o", &out, &"--report", &report]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("convs: "), "{}", stdout(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    // Under the latency cost model the pass is declared but not enabled.
    assert_eq!(r["passes"]["merge-sibling-convs"]["ran"], false);
    assert_eq!(
        r["passes"]["merge-sibling-convs"]["changes"],
        serde_json::json!({})
    );
}
