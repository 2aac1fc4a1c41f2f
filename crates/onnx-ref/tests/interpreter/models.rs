//! Every model under `../shared/models` reproduces its `test_data_set_0` (rtol 1e-3,
//! atol 1e-4). Run in release: `cargo test --release -p onnx-ref --test interpreter models`.

use crate::support::{run_test_dir, test_dirs};

#[test]
fn dev_models_reproduce_reference_outputs() {
    let shared = onnx_testdata::require_shared!();
    let dirs = test_dirs(&shared.join("models"));
    assert!(
        dirs.len() >= 10,
        "expected the development models, found {}",
        dirs.len()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let start = std::time::Instant::now();
        match run_test_dir(dir, 1e-3, 1e-4) {
            Ok(_) => println!("ok   {name} ({:.2?})", start.elapsed()),
            Err(e) => {
                println!("FAIL {name}: {e}");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} models failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}
