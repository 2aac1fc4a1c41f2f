//! The `onnx-opt` binary: exit codes, messages, and that failures write nothing.

mod convert;
mod external_data;
mod first_run;
mod npy;
mod rules;

use std::path::Path;
use std::process::{Command, Output};

fn onnx_opt(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_onnx-opt"));
    for a in args {
        c.arg(a);
    }
    c.output().expect("the binary runs")
}

/// The repository's root, where the example and test models are.
fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn info_summarizes_a_model() {
    let shared = onnx_testdata::require_shared!();
    let m = shared.join("models/bert-tiny-opset13/model.onnx");
    let o = onnx_opt(&[&"info", &m]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("ir_version: 7"), "{out}");
    assert!(out.contains("opsets: ai.onnx 13"), "{out}");
    assert!(out.contains("input_ids: int64[batch,sequence]"), "{out}");
    assert!(out.contains("nodes: 277"), "{out}");
    assert!(out.contains("MatMul                   16"), "{out}");
}

#[test]
fn bad_files_fail_with_a_message_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, [0xff, 0xff, 0xff, 0x07, 0x01]).unwrap();
    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.path().join("missing.onnx");
    let out = dir.path().join("out.onnx");
    for input in [&garbage, &empty, &missing] {
        for cmd in ["info", "check"] {
            let o = onnx_opt(&[&cmd, input]);
            assert_eq!(o.status.code(), Some(1), "{cmd} {}", input.display());
            let err = stderr(&o);
            assert!(
                err.contains(input.file_name().unwrap().to_str().unwrap()),
                "{err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
        let o = onnx_opt(&[&"optimize", input, &"-o", &out]);
        assert_eq!(o.status.code(), Some(1));
        assert!(!out.exists(), "no output on failure");
    }
}

#[test]
fn usage_errors_exit_2() {
    let o = onnx_opt(&[&"optimize"]);
    assert_eq!(o.status.code(), Some(2));
    let o = onnx_opt(&[&"frobnicate", &"-x"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn check_accepts_dev_models() {
    let shared = onnx_testdata::require_shared!();
    for name in ["resnet18-opset13", "light_squeezenet", "bert-tiny-opset17"] {
        let m = shared.join("models").join(name).join("model.onnx");
        let o = onnx_opt(&[&"check", &m]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
}

#[test]
fn optimize_writes_a_checked_model_and_a_report() {
    let shared = onnx_testdata::require_shared!();
    let dir = tempfile::tempdir().unwrap();
    let m = shared.join("models/squeezenet1_0-opset13/model.onnx");
    let out = dir.path().join("opt.onnx");
    let report = dir.path().join("report.json");
    // The short form `onnx-opt MODEL -o OUT` is `optimize`.
    let o = onnx_opt(&[&m, &"-o", &out, &"--check", &"1", &"--report", &report]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("nodes"), "{table}");
    assert!(
        table.contains("check: outputs equal on 1 random inputs"),
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(json["nodes_before"], 82);
    // Exactly as the dev-model snapshot (tests/pipeline) says.
    assert_eq!(json["nodes_after"], 64);
    let o = onnx_opt(&[&"check", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    assert!(Path::new(&out).is_file());
}

#[test]
fn print_writes_text_that_parses_back_to_the_model() {
    let shared = onnx_testdata::require_shared!();
    let m = shared.join("onnx-backend/node/test_relu/model.onnx");
    let o = onnx_opt(&[&"print", &m]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("y = Relu (x)"), "{text}");
    let parsed = onnx_text::parse_model(&text).unwrap();
    let original = onnx_proto::load_model(&m).unwrap().model;
    assert_eq!(parsed, original);
}

#[test]
fn copy_is_byte_identical_and_externalizes_on_request() {
    let shared = onnx_testdata::require_shared!();
    let dir = tempfile::tempdir().unwrap();
    let m = shared.join("models/squeezenet1_0-opset13/model.onnx");
    let out = dir.path().join("copy.onnx");
    let o = onnx_opt(&[&"copy", &m, &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&m).unwrap(), std::fs::read(&out).unwrap());
    let ext = dir.path().join("ext.onnx");
    let o = onnx_opt(&[&"copy", &m, &"-o", &ext, &"--external-threshold", &"4096"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("ext.onnx.data").is_file());
    assert!(std::fs::metadata(&ext).unwrap().len() < 100_000);
    // The externalized model optimizes and checks like the original.
    let opt = dir.path().join("opt.onnx");
    let o = onnx_opt(&[&ext, &"-o", &opt, &"--check", &"1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        dir.path().join("opt.onnx.data").is_file(),
        "external input -> external output"
    );
}

#[test]
fn run_reproduces_test_data_and_writes_outputs() {
    let shared = onnx_testdata::require_shared!();
    let dir = tempfile::tempdir().unwrap();
    let case = shared.join("onnx-backend/node/test_add_bcast");
    let m = case.join("model.onnx");
    let data = case.join("test_data_set_0");
    let x = format!("x={}", data.join("input_0.pb").display());
    let y = format!("y={}", data.join("input_1.pb").display());
    let o = onnx_opt(&[
        &"run",
        &m,
        &"--input",
        &x,
        &"--input",
        &y,
        &"-o",
        &dir.path(),
        &"--repeat",
        &"3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("sum: float[3, 4, 5]"), "{out}");
    assert!(out.contains("inference median:"), "{out}");
    let got: onnx_proto::TensorProto =
        onnx_proto::decode_file(dir.path().join("output_0.pb")).unwrap();
    let want: onnx_proto::TensorProto = onnx_proto::decode_file(data.join("output_0.pb")).unwrap();
    assert_eq!(got.dims, want.dims);
    assert_eq!(got.name(), "sum");
    // Missing inputs and unknown names are errors naming the input.
    let o = onnx_opt(&[&"run", &m, &"--input", &x]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no value for input 'y'"),
        "{}",
        stderr(&o)
    );
    let o = onnx_opt(&[&"run", &m, &"--input", &"nope=a.pb"]);
    assert!(
        stderr(&o).contains("no input named 'nope'"),
        "{}",
        stderr(&o)
    );
    let o = onnx_opt(&[&"run", &m, &"--random-inputs"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `run --profile` prints one row per operator type with its node runs summed over repeats.
#[test]
fn run_profile_lists_each_op_type() {
    let shared = onnx_testdata::require_shared!();
    let m = shared.join("models/squeezenet1_0-opset13/model.onnx");
    let o = onnx_opt(&[
        &"run",
        &m,
        &"--random-inputs",
        &"--repeat",
        &"2",
        &"--profile",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("op ") && out.contains("total ms"), "{out}");
    // squeezenet1_0 has 26 Conv nodes; two runs time each twice.
    let conv = out
        .lines()
        .find(|l| l.starts_with("Conv "))
        .unwrap_or_else(|| panic!("no Conv row in {out}"));
    let runs: Vec<&str> = conv.split_whitespace().collect();
    assert_eq!(runs.get(1), Some(&"52"), "{conv}");
    assert!(out.lines().any(|l| l.starts_with("Concat ")), "{out}");
}

/// A reader that stops early (`onnx-opt print MODEL | head -1`) ends the process quietly: no
/// panic message about a broken pipe.
#[cfg(unix)]
#[test]
fn a_closed_stdout_pipe_is_not_a_panic() {
    use std::io::Read;
    let shared = onnx_testdata::require_shared!();
    let m = shared.join("models/bert-tiny-opset13/model.onnx");
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnx-opt"))
        .arg("print")
        .arg(&m)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut first = [0u8; 16];
    child
        .stdout
        .take()
        .expect("piped")
        .read_exact(&mut first)
        .expect("some output");
    // The read end is dropped here; the printer then writes into a closed pipe.
    let out = child.wait_with_output().expect("it ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.status.success() || err.is_empty(), "{err}");
}

/// A model whose original fails on random inputs (a Reshape target `|s| - 3` cast from a float
/// input: random `s` in [-1, 1] gives negative dims, and the check searches no float's values) converts with a
/// warning that the check could not run (the table says why), is refused with
/// `--require-check`, converts checked with `--check-data` (a data set it runs on proves it,
/// and the table says the random trials could not run), and a missing data directory is an
/// error naming it, with nothing written.
#[test]
fn check_data_proves_a_conversion_random_inputs_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("case");
    let data = case.join("test_data_set_0");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        case.join("model.onnxtxt"),
        "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[6] x, float[2] s) => (float[A, B] y) {\n  a = Abs (s)\n  three = Constant <value = float {3}> ()\n  d = Sub (a, three)\n  t = Cast <to = 7> (d)\n  r = Reshape (x, t)\n  y = Neg (r)\n}\n",
    )
    .unwrap();
    let tensor = |name: &str, dims: Vec<i64>, f: Vec<f32>, i: Vec<i64>| onnx_proto::TensorProto {
        name: Some(name.into()),
        dims,
        data_type: Some(if f.is_empty() { 7 } else { 1 }),
        float_data: f,
        int64_data: i,
        ..Default::default()
    };
    use onnx_proto::Message;
    let files = [
        (
            "input_0.pb",
            tensor("x", vec![6], vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0], vec![]),
        ),
        ("input_1.pb", tensor("s", vec![2], vec![-5.0, 6.0], vec![])),
        (
            "output_0.pb",
            tensor(
                "y",
                vec![2, 3],
                vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0],
                vec![],
            ),
        ),
    ];
    for (f, t) in files {
        std::fs::write(data.join(f), t.encode_to_vec()).unwrap();
    }
    let m = case.join("model.onnxtxt");
    let out = dir.path().join("out.onnx");
    let o = onnx_opt(&[
        &"convert",
        &m,
        &"--opset",
        &"11",
        &"-o",
        &out,
        &"--require-check",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("the check could not run: the original model fails on random inputs"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    let o = onnx_opt(&[&"convert", &m, &"--opset", &"11", &"-o", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: the check could not run, the result is written unchecked"),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("check: skipped, the result is unchecked"),
        "{}",
        stdout(&o)
    );
    assert!(out.is_file());
    std::fs::remove_file(&out).unwrap();
    let o = onnx_opt(&[
        &"convert",
        &m,
        &"--opset",
        &"11",
        &"-o",
        &out,
        &"--check-data",
        &case,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(
        table.contains("check: outputs equal on 1 test data set(s); random inputs stopped: the original model fails on random inputs"),
        "{table}"
    );
    assert!(out.is_file());
    let missing = dir.path().join("no_such_dir");
    let out2 = dir.path().join("out2.onnx");
    let o = onnx_opt(&[
        &"convert",
        &m,
        &"--opset",
        &"11",
        &"-o",
        &out2,
        &"--check-data",
        &missing,
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no_such_dir"), "{}", stderr(&o));
    assert!(!out2.exists());
}

/// A model holding onnxruntime's LayerNormalization in the default domain at opset 13 (as its
/// transformers optimizer writes GPT-2) loads with a warning, is optimized and checked.
#[test]
fn onnxruntime_layer_norm_below_17_loads_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let m = repo_root().join("tests/models/contrib/gpt2_ort_fused_opset13/model.onnx");
    let out = dir.path().join("out.onnx");
    let o = onnx_opt(&[&"check", &m]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("onnxruntime"), "{}", stderr(&o));
    let o = onnx_opt(&[&m, &"-o", &out, &"--require-check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning:"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("check: outputs equal on 3 random inputs"),
        "{}",
        stdout(&o)
    );
    assert!(out.is_file());
}

/// A model with an Identity before a Relu (the cleanup `identity_elim` removes it) and a
/// MatMul + Add (the fusion `matmul_add_to_gemm` makes a Gemm).
const SKIP_MODEL: &str = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x, float[3, 4] w, float[4] b) => (float[2, 4] y) {
  t = Identity(x)
  m = MatMul(t, w)
  a = Add(m, b)
  y = Relu(a)
}"#;

/// Optimizes `SKIP_MODEL` with extra arguments; the output's op types in order, and the run.
fn optimize_skip_model(extra: &[&str]) -> (Vec<String>, Output) {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.onnxtxt");
    std::fs::write(&m, SKIP_MODEL).unwrap();
    let out = dir.path().join("out.onnx");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&m, &"-o", &out];
    for e in extra {
        args.push(e);
    }
    let o = onnx_opt(&args);
    let ops = match o.status.success() {
        true => onnx_opt::load(&out)
            .unwrap()
            .graph
            .nodes_in_order()
            .map(|(_, n)| n.op_type.to_string())
            .collect(),
        false => Vec::new(),
    };
    (ops, o)
}

#[test]
fn skip_leaves_out_rules_by_name_file_label_and_passes_by_name() {
    let (ops, o) = optimize_skip_model(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!ops.contains(&"Identity".to_string()), "{ops:?}");
    assert!(ops.contains(&"Gemm".to_string()), "{ops:?}");
    // By rule name: the Identity stays.
    let (ops, o) = optimize_skip_model(&["--skip", "identity_elim"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(ops.contains(&"Identity".to_string()), "{ops:?}");
    // By label and by file: no fusion, so no Gemm; the cleanups still run.
    for skip in ["fusion", "fusion.rules", "rules/fusion.rules"] {
        let (ops, o) = optimize_skip_model(&["--skip", skip]);
        assert!(o.status.success(), "{skip}: {}", stderr(&o));
        assert!(!ops.contains(&"Gemm".to_string()), "{skip}: {ops:?}");
        assert!(!ops.contains(&"Identity".to_string()), "{skip}: {ops:?}");
    }
    // A pass by name: without saturation nothing changes.
    let (ops, o) = optimize_skip_model(&["--skip", "saturate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(ops, ["Identity", "MatMul", "Add", "Relu"]);
    // An unknown name is an error naming it and the close ones, and writes nothing.
    let (_, o) = optimize_skip_model(&["--skip", "identity_elimm"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("--skip identity_elimm: no rule, rule file, label or pass has this name"),
        "{err}"
    );
    assert!(err.contains("did you mean: identity_elim"), "{err}");
}

#[test]
fn quiet_prints_nothing_and_report_dash_writes_the_json_on_stdout() {
    let (_, o) = optimize_skip_model(&["--quiet", "--check", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "");
    let (_, o) = optimize_skip_model(&["--report", "-", "--check", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is the JSON");
    assert_eq!(json["nodes_before"], 4, "{json}");
    assert!(stderr(&o).contains("nodes"), "the table goes to stderr");
    let (_, o) = optimize_skip_model(&["--report", "-", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok());
    assert_eq!(stderr(&o), "");
}

#[test]
fn outputs_keeps_only_the_named_outputs_and_what_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("two.onnxtxt");
    std::fs::write(
        &m,
        r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x) => (float[2, 3] y, float[2, 3] z, float[2, 3] w) {
  y = Relu(x)
  z = Neg(x)
  w = Exp(x)
}"#,
    )
    .unwrap();
    let out = dir.path().join("out.onnx");
    for args in [["--outputs", "w", "z"], ["--outputs", "w,z", "--quiet"]] {
        let o = onnx_opt(&[&m, &"-o", &out, &args[0], &args[1], &args[2]]);
        assert!(o.status.success(), "{}", stderr(&o));
        let model = onnx_opt::load(&out).unwrap();
        let g = &model.graph;
        let outs: Vec<&str> = g
            .outputs
            .iter()
            .map(|&v| g.value(v).name.as_str())
            .collect();
        assert_eq!(outs, ["w", "z"]);
        let ops: Vec<String> = g
            .nodes_in_order()
            .map(|(_, n)| n.op_type.to_string())
            .collect();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert!(!ops.contains(&"Relu".to_string()), "{ops:?}");
    }
    std::fs::remove_file(&out).unwrap();
    for (args, why) in [
        (
            vec!["--outputs", "v"],
            "--outputs v: not an output of the model",
        ),
        (vec!["--outputs", "z,z"], "--outputs z: named twice"),
    ] {
        let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&m, &"-o", &out];
        for x in &args {
            a.push(x);
        }
        let o = onnx_opt(&a);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(err.contains(why), "{err}");
        assert!(err.contains("(the model's outputs: y, z, w)"), "{err}");
        assert!(!out.exists(), "nothing is written");
    }
}

#[test]
fn input_shape_fixes_symbolic_dims_and_folds_shape_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("dyn.onnxtxt");
    std::fs::write(
        &m,
        r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[batch, 3] x) => (float[batch, 3] y, int64[2] s) {
  y = Relu(x)
  s = Shape(x)
}"#,
    )
    .unwrap();
    let out = dir.path().join("out.onnx");
    let o = onnx_opt(&[&m, &"-o", &out, &"--input-shape", &"x:4,3", &"--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = onnx_opt(&[&"print", &out]);
    let text = stdout(&o);
    assert!(
        text.contains("(float[4,3] x) => (float[4,3] y, int64[2] s)"),
        "{text}"
    );
    assert!(!text.contains("Shape ("), "the Shape is folded: {text}");
    std::fs::remove_file(&out).unwrap();
    for (shape, why) in [
        (
            "x:4",
            "--input-shape x: the model's input has rank 2, the shape given 1 dims",
        ),
        ("x:4,5", "--input-shape x: dim 1 is 3 in the model, not 5"),
        (
            "q:1",
            "--input-shape q: not an input of the model (its inputs: x)",
        ),
    ] {
        let o = onnx_opt(&[&m, &"-o", &out, &"--input-shape", &shape]);
        assert_eq!(o.status.code(), Some(1), "{shape}");
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(!out.exists(), "nothing is written");
    }
    let o = onnx_opt(&[&m, &"-o", &out, &"--input-shape", &"x:4,-1"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
}

#[test]
fn same_dim_ties_symbols_in_every_declaration_and_the_layers_share_their_shape_work() {
    // Two "layers", each with a cache of its own length symbol (as torch's dynamo exporter
    // names them), each computing its total length: tied, one computation serves both.
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("dyn.onnxtxt");
    std::fs::write(
        &m,
        r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[b, s] x, float[b, p0] c0, float[b, p1] c1) => (int64[1] n0, int64[1] n1) {
  y0 = Concat <axis = 1> (c0, x)
  y1 = Concat <axis = 1> (c1, x)
  t0 = Shape(y0)
  t1 = Shape(y1)
  one = Constant <value = int64[1] {1}> ()
  two = Constant <value = int64[1] {2}> ()
  n0 = Slice(t0, one, two)
  n1 = Slice(t1, one, two)
}"#,
    )
    .unwrap();
    let out = dir.path().join("out.onnx");
    let o = onnx_opt(&[&m, &"-o", &out, &"--same-dim", &"p1=p0", &"--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&onnx_opt(&[&"print", &out]));
    assert!(
        text.contains("(float[b,s] x, float[b,p0] c0, float[b,p0] c1) => (int64[1] n0"),
        "{text}"
    );
    assert_eq!(
        text.matches("Shape").count(),
        1,
        "one Shape for both: {text}"
    );
    std::fs::remove_file(&out).unwrap();
    let o = onnx_opt(&[&m, &"-o", &out, &"--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&onnx_opt(&[&"print", &out]));
    assert_eq!(
        text.matches("Shape").count(),
        2,
        "untied, each its own: {text}"
    );
    std::fs::remove_file(&out).unwrap();
    for (tie, why) in [
        (
            "q=p0",
            "--same-dim q: no input of the model has a dim of that name (their symbolic dims: b, p0, p1, s)",
        ),
        ("p1=p0 + s", "--same-dim p1: 'p0 + s' is not a plain name"),
    ] {
        let o = onnx_opt(&[&m, &"-o", &out, &"--same-dim", &tie]);
        assert_eq!(o.status.code(), Some(1), "{tie}");
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(!out.exists(), "nothing is written");
    }
    let o = onnx_opt(&[&m, &"-o", &out, &"--same-dim", &"p1"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
}

#[test]
fn assume_ones_folds_the_padding_half_of_a_mask_and_keeps_the_input() {
    // A decoder's mask: the causal half And the padding half read from attention_mask. Under
    // `--assume attention_mask=ones` the padding half is true everywhere and goes.
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("mask.onnxtxt");
    std::fs::write(
        &m,
        r#"<ir_version: 8, opset_import: ["" : 13]>
g (bool[b, s, t] causal, int64[b, t] attention_mask, float[b, s, t] scores) => (float[b, s, t] y) {
  ax = Constant <value = int64[1] {1}> ()
  pad = Cast <to = 9> (attention_mask)
  p = Unsqueeze(pad, ax)
  keep = And(causal, p)
  low = Constant <value = float {-1e9}> ()
  y = Where(keep, scores, low)
}"#,
    )
    .unwrap();
    let out = dir.path().join("out.onnx");
    let o = onnx_opt(&[&m, &"-o", &out, &"--assume", &"attention_mask=ones"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("inputs drawn under --assume attention_mask=ones"),
        "{}",
        stdout(&o)
    );
    let text = stdout(&onnx_opt(&[&"print", &out]));
    assert!(
        text.contains("int64[b,t] attention_mask"),
        "the input stays: {text}"
    );
    for op in ["Cast", "Unsqueeze", "And"] {
        assert!(!text.contains(&format!("{op} (")), "{op} folded: {text}");
    }
    std::fs::remove_file(&out).unwrap();
    let o = onnx_opt(&[&m, &"-o", &out, &"--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&onnx_opt(&[&"print", &out]));
    assert!(text.contains("And ("), "without the assumption: {text}");
    std::fs::remove_file(&out).unwrap();
    for (given, why) in [
        (
            "mask=ones",
            "--assume mask: not an input of the model (its inputs: causal, attention_mask, scores)",
        ),
        (
            "attention_mask=ones,attention_mask=ones",
            "unknown assumption",
        ),
    ] {
        let o = onnx_opt(&[&m, &"-o", &out, &"--assume", &given]);
        assert_ne!(o.status.code(), Some(0), "{given}");
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(!out.exists(), "nothing is written");
    }
    let o = onnx_opt(&[
        &m,
        &"-o",
        &out,
        &"--assume",
        &"attention_mask=ones",
        &"--assume",
        &"attention_mask=ones",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--assume attention_mask: named twice"),
        "{}",
        stderr(&o)
    );
    let o = onnx_opt(&[&m, &"-o", &out, &"--assume", &"attention_mask"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    // Below opset 9 there is no ConstantOfShape to write.
    let old = dir.path().join("old.onnxtxt");
    std::fs::write(
        &old,
        r#"<ir_version: 3, opset_import: ["" : 8]>
g (float[n] x, float[n] m) => (float[n] y) { y = Mul(x, m) }"#,
    )
    .unwrap();
    let o = onnx_opt(&[&old, &"-o", &out, &"--assume", &"m=ones"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--assume m: the model's opset (8) has no ConstantOfShape"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists(), "nothing is written");
}
