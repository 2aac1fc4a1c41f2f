//! onnxruntime's contrib operators, conformance-tested against onnxruntime's own outputs.
//!
//! `scripts/gen_contrib_tests.py` (pinned onnxruntime, `scripts/requirements-peers.txt`) writes
//! one directory per case under `tests/data/contrib/<family>/` in the backend suite's layout
//! (`model.onnx`, `test_data_set_0/{input_i,output_i}.pb`, the outputs onnxruntime computed with
//! its graph optimizations off). Each family has its manifest, an insta snapshot
//! `snapshots/interpreter__contrib__<family>.snap`: one passing case per line, failures as
//! `# case: reason`. A regression, a newly passing case or a changed reason fails the test;
//! `INSTA_UPDATE=always` rewrites the manifests. The data is committed, so these tests run on a
//! bare clone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{run_test_dir, test_dirs};

fn data_dir(family: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/contrib")
        .join(family)
}

/// (rtol, atol) for a case: float16 cases (named `*_f16*`) compare at float16's precision;
/// everything else at float32's, with room for onnxruntime's other summation order.
fn tolerance(name: &str) -> (f64, f64) {
    if name.contains("_f16") || name.contains("_bf16") {
        (1e-2, 1e-2)
    } else {
        (1e-3, 1e-4)
    }
}

fn run_case(dir: &Path) -> Result<(), String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (rtol, atol) = tolerance(&name);
    match std::panic::catch_unwind(|| run_test_dir(dir, rtol, atol)) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("PANIC (interpreter bug)".into()),
    }
}

fn one_line(reason: &str) -> String {
    let flat: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > 160 {
        format!("{}...", flat.chars().take(160).collect::<String>())
    } else {
        flat
    }
}

fn manifest(results: &BTreeMap<String, Result<(), String>>) -> String {
    results
        .iter()
        .map(|(name, r)| match r {
            Ok(()) => format!("{name}\n"),
            Err(e) => format!("# {name}: {}\n", one_line(e)),
        })
        .collect()
}

/// Runs every case of `family` and compares with its manifest.
fn check_family(family: &str) {
    let mut results = BTreeMap::new();
    for dir in test_dirs(&data_dir(family)) {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        results.insert(name, run_case(&dir));
    }
    assert!(
        !results.is_empty(),
        "no case under {}: run scripts/gen_contrib_tests.py",
        data_dir(family).display()
    );
    let passed = results.values().filter(|r| r.is_ok()).count();
    println!("contrib/{family}: {passed} of {} pass", results.len());
    insta::with_settings!({
        description => format!("onnx-ref contrib conformance, family {family}: one passing \
                                case per line; failures as `# case: reason`"),
        omit_expression => true,
    }, {
        insta::assert_snapshot!(family, manifest(&results));
    });
}

#[test]
fn contrib_norm() {
    check_family("norm");
}

#[test]
fn contrib_attention() {
    check_family("attention");
}

#[test]
fn contrib_quant() {
    check_family("quant");
}
