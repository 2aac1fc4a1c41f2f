//! `onnx-opt rules list | check | explain` and `optimize --rules`.

use super::{onnx_opt, stderr, stdout};

const WRONG: &str = "# wrong.rules: a rule that is wrong on purpose.\n\n# Relu(x) == Abs(x) (false)\nrule relu_is_abs:\n  Relu(x) => Abs(x)\n";

#[test]
fn rules_list_shows_windows_and_tags() {
    let o = onnx_opt(&[&"rules", &"list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("rules/cleanup.rules"), "{out}");
    assert!(out.contains("layer_norm_pow"), "{out}");
    let ln = out.lines().find(|l| l.contains("layer_norm_pow")).unwrap();
    assert!(ln.contains("opset 17.."), "{ln}");
    assert!(ln.contains("fusion"), "{ln}");
}

#[test]
fn rules_check_proves_a_good_file_and_fails_a_wrong_rule_with_its_instance() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.rules");
    std::fs::write(
        &good,
        "# good.rules\n\n# Identity(x) == x\nrule my_identity [exact]:\n  Identity(x) => x\n",
    )
    .unwrap();
    let o = onnx_opt(&[&"rules", &"check", &good]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("1 rules: 1 passed, 0 failed"),
        "{}",
        stdout(&o)
    );

    let wrong = dir.path().join("wrong.rules");
    std::fs::write(&wrong, WRONG).unwrap();
    let o = onnx_opt(&[&"rules", &"check", &wrong]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("relu_is_abs") && out.contains("FAIL"), "{out}");
    // The failing instance is printed in the ONNX text syntax.
    assert!(out.contains("Relu ("), "{out}");
}

#[test]
fn a_bad_rule_file_is_refused_with_file_line_and_column_and_nothing_is_written() {
    let shared = onnx_testdata::require_shared!();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.rules");
    std::fs::write(&bad, "# bad\n\n# x\nrule r:\n  Relux(x) => x\n").unwrap();
    let out = dir.path().join("out.onnx");
    let model = shared.join("models/squeezenet1_0-opset13/model.onnx");
    let o = onnx_opt(&[&"optimize", &model, &"-o", &out, &"--rules", &bad]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("bad.rules:5:3: error: unknown op `Relux`"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists());
    let missing = dir.path().join("missing.rules");
    let o = onnx_opt(&[&"optimize", &model, &"-o", &out, &"--rules", &missing]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.rules"), "{}", stderr(&o));
}

#[test]
fn a_users_rule_file_adds_to_the_builtin_rules_and_the_report_counts_firings() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("mine.rules");
    std::fs::write(
        &rules,
        "# mine.rules\n\n# Relu(Relu(x)) as Relu(x), named by me\nrule my_relu_twice [exact]:\n  Relu(Relu(x)) => Relu(x)\n",
    )
    .unwrap();
    let model = dir.path().join("m.onnx");
    let text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2,3] x) => (float[2,3] y) {\n a = Relu(x)\n y = Relu(a)\n}\n";
    let proto = onnx_text::parse_model(text).unwrap();
    onnx_proto::save_model(&proto, None, &model, &Default::default()).unwrap();
    let out = dir.path().join("out.onnx");
    let report = dir.path().join("r.json");
    let o = onnx_opt(&[
        &"optimize",
        &model,
        &"-o",
        &out,
        &"--rules",
        &rules,
        &"--no-builtin-rules",
        &"--report",
        &report,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(
        json["egraph"]["main"]["phases"][0]["firings"]["my_relu_twice"],
        serde_json::json!(1),
        "{json}"
    );
    assert_eq!(json["nodes_after"], serde_json::json!(1));
    // Explain on the same model: the rule fired at y's class.
    let o = onnx_opt(&[
        &"rules",
        &"explain",
        &"my_relu_twice",
        &model,
        &"--rules",
        &rules,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(": fired"), "{}", stdout(&o));
    let o = onnx_opt(&[&"rules", &"explain", &"no_such_rule", &model]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no rule named 'no_such_rule'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn float_unsafe_rules_run_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    let text =
        std::fs::read_to_string(super::repo_root().join("tests/rule_cases/add_zero.onnxtxt"))
            .unwrap();
    let proto = onnx_text::parse_model(&text).unwrap();
    onnx_proto::save_model(&proto, None, &model, &Default::default()).unwrap();
    let out = dir.path().join("out.onnx");
    let nodes = |extra: &[&str]| -> usize {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"optimize", &model, &"-o", &out];
        for e in extra {
            args.push(e);
        }
        let o = onnx_opt(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let loaded = onnx_proto::load_model(&out).unwrap();
        loaded.model.graph.unwrap().node.len()
    };
    assert_eq!(nodes(&[]), 2, "x + 0 stays: not exact for x = -0");
    assert_eq!(nodes(&["--unsafe-rules"]), 1);
}

/// A rule whose sides use onnxruntime's contrib ops is checked against their schemas and proved
/// with their kernels; a wrong one fails with its instance.
#[test]
fn rules_over_contrib_ops_are_proved() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("contrib.rules");
    std::fs::write(
        &good,
        "# contrib.rules: rules over com.microsoft ops.\n\n\
         # BiasGelu(x, b) == Gelu(x + b)\n\
         rule bias_gelu_split:\n  com.microsoft::BiasGelu(x, b) => com.microsoft::Gelu(Add(x, b))\n\n\
         # Gelu(x) == x * 0.5 * (1 + erf(x / sqrt(2)))\n\
         rule ms_gelu_is_erf_gelu:\n  com.microsoft::Gelu(x) => Mul(Mul(x, 0.5), Add(Erf(Div(x, Sqrt(2.0))), 1.0))\n",
    )
    .unwrap();
    let o = onnx_opt(&[&"rules", &"check", &good]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("2 rules: 2 passed, 0 failed"),
        "{}",
        stdout(&o)
    );
    let wrong = dir.path().join("wrong.rules");
    std::fs::write(
        &wrong,
        "# wrong.rules\n\n# QuickGelu(x) == Gelu(x) (false)\nrule quick_is_gelu:\n  com.microsoft::QuickGelu(x) => com.microsoft::Gelu(x)\n",
    )
    .unwrap();
    let o = onnx_opt(&[&"rules", &"check", &wrong]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("quick_is_gelu") && out.contains("FAIL"),
        "{out}"
    );
}
