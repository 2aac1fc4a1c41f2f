//! Integration tests of onnx-opt: one binary, one module per area. The tests that read the
//! shared test data (`../shared`, or `ONNX_OPT_SHARED`) find it with
//! `onnx_testdata::require_shared!`, which skips them when it is absent.

mod check;
mod convert;
mod dev_models;
mod functions;
mod fuzz;
mod pipelines;
mod rules;
mod save;

/// Runs a generator script of `scripts/` with `--check` (it needs only Python's standard
/// library) and fails with its output when the committed files are not what it writes.
fn generated_files_are_current(script: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("python3")
        .arg(root.join("scripts").join(script))
        .arg("--check")
        .current_dir(root)
        .output()
        .expect("python3 runs (the generator's check needs it)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
