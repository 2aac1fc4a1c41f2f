//! The ONNX backend conformance suite (`../shared/onnx-backend/{node,simple,pytorch-converted,
//! pytorch-operator}`), tracked by the manifest, the insta snapshot
//! `snapshots/interpreter__conformance__manifest.snap`: one passing test per line, failures as
//! `# suite/test: reason` (the reason is the harness's error, on one line). Any change fails this
//! test: a listed test that fails (a regression), a test that newly passes, or a failure whose
//! reason changed. `INSTA_UPDATE=always` rewrites the manifest from the current results.
//!
//! `ONNX_OPT_CONFORMANCE_FILTER=a,b` runs only the tests whose name contains one of the
//! comma-separated substrings, prints every result, and compares only their lines with the
//! committed manifest's (it never rewrites the manifest).

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{run_test_dir, test_dirs};

const SUITES: [&str; 4] = ["node", "simple", "pytorch-converted", "pytorch-operator"];
/// The committed manifest (read back only in filtered runs; `insta` compares the whole one).
const MANIFEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/interpreter/snapshots/interpreter__conformance__manifest.snap"
);

/// Tests that need their own (rtol, atol), with the reason. Everything else uses the suite's
/// rtol 1e-3, atol 1e-7.
const TOLERANCES: &[(&str, f64, f64, &str)] = &[(
    "test_dft_inverse",
    1e-3,
    1e-6,
    "the expected values come from numpy's float32 FFT, whose exact zeros carry rounding noise \
     of ~2e-7; the interpreter's f64 FFT is closer to 0 than atol 1e-7 allows",
)];

/// The (rtol, atol) for a test directory.
fn tolerance(dir: &Path) -> (f64, f64) {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    TOLERANCES
        .iter()
        .find(|(prefix, ..)| name.starts_with(prefix))
        .map_or((1e-3, 1e-7), |&(_, r, a, _)| (r, a))
}

/// Runs one test directory, turning a panic into a failure that says so.
fn run_one(dir: &Path) -> Result<(), String> {
    let (rtol, atol) = tolerance(dir);
    match std::panic::catch_unwind(|| run_test_dir(dir, rtol, atol)) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("PANIC (interpreter bug): {msg}"))
        }
    }
}

fn one_line(reason: &str) -> String {
    let flat: String = reason
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.chars().count() > 160 {
        format!("{}...", flat.chars().take(160).collect::<String>())
    } else {
        flat
    }
}

/// The manifest's line for one test.
fn manifest_line(name: &str, result: &Result<(), String>) -> String {
    match result {
        Ok(()) => name.to_string(),
        Err(e) => format!("# {name}: {}", one_line(e)),
    }
}

/// The manifest of `results`: one line per test, in name order.
fn manifest(results: &BTreeMap<String, Result<(), String>>) -> String {
    results
        .iter()
        .map(|(name, r)| manifest_line(name, r) + "\n")
        .collect()
}

/// The test a manifest line is about, and whether it passed.
fn parse_line(line: &str) -> Option<(&str, bool)> {
    match line.strip_prefix("# ") {
        Some(failure) => failure.split_once(": ").map(|(name, _)| (name, false)),
        None => Some((line, true)),
    }
}

/// The committed manifest, line by line, by test name.
fn committed_manifest() -> Result<BTreeMap<String, String>, String> {
    let snapshot = insta::Snapshot::from_file(std::path::Path::new(MANIFEST))
        .map_err(|e| format!("cannot read {MANIFEST}: {e}"))?;
    let text = snapshot
        .as_text()
        .ok_or_else(|| format!("{MANIFEST} is not a text snapshot"))?
        .to_string();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match parse_line(l) {
            Some((name, _)) => Ok((name.to_string(), l.to_string())),
            None => Err(format!("{MANIFEST}: bad line {l}")),
        })
        .collect()
}

/// A summary of how `results` differ from the committed manifest: regressions, newly passing
/// tests and changed reasons, one per line (empty when they agree).
fn differences(
    results: &BTreeMap<String, Result<(), String>>,
    committed: &BTreeMap<String, String>,
    filtered: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, r) in results {
        let now = manifest_line(name, r);
        match committed.get(name) {
            Some(before) if *before == now => {}
            Some(before) => {
                let kind = match (parse_line(before).is_some_and(|(_, p)| p), r.is_ok()) {
                    (true, false) => "regression",
                    (false, true) => "newly passing",
                    _ => "reason changed",
                };
                out.push(format!("{kind}: {name}\n  was: {before}\n  now: {now}"));
            }
            None => out.push(format!("not in the manifest: {now}")),
        }
    }
    if !filtered {
        for (name, line) in committed {
            if !results.contains_key(name) {
                out.push(format!("test directory not found: {line}"));
            }
        }
    }
    out
}

#[test]
fn backend_suite_matches_manifest() {
    let root = onnx_testdata::require_shared!().join("onnx-backend");
    let mut results: BTreeMap<String, Result<(), String>> = BTreeMap::new();
    let start = std::time::Instant::now();
    let filter: Option<Vec<String>> = std::env::var("ONNX_OPT_CONFORMANCE_FILTER")
        .ok()
        .map(|f| f.split(',').map(str::to_string).collect());
    for suite in SUITES {
        for dir in test_dirs(&root.join(suite)) {
            let name = format!(
                "{suite}/{}",
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            );
            if let Some(f) = &filter {
                if !f.iter().any(|s| name.contains(s.as_str())) {
                    continue;
                }
                let r = run_one(&dir);
                match &r {
                    Ok(()) => println!("PASS {name}"),
                    Err(e) => println!("FAIL {name}: {}", one_line(e)),
                }
                results.insert(name, r);
            } else {
                results.insert(name, run_one(&dir));
            }
        }
    }
    if filter.is_some() {
        let passed = results.values().filter(|r| r.is_ok()).count();
        println!("filtered: {passed} of {} pass", results.len());
        let committed = committed_manifest().unwrap_or_else(|e| panic!("{e}"));
        let diff = differences(&results, &committed, true);
        assert!(
            diff.is_empty(),
            "{} filtered tests differ from the manifest {MANIFEST}:\n{}",
            diff.len(),
            diff.join("\n")
        );
        return;
    }
    assert!(
        results.len() > 1900,
        "expected the whole backend suite, found {} tests",
        results.len()
    );
    let passed = results.values().filter(|r| r.is_ok()).count();
    let panics = results
        .values()
        .filter(|r| matches!(r, Err(e) if e.starts_with("PANIC")))
        .count();
    println!(
        "backend suite: {passed} of {} pass ({panics} panics) in {:.1?}",
        results.len(),
        start.elapsed()
    );
    // A readable summary before insta's diff of the whole manifest.
    if let Ok(committed) = committed_manifest() {
        for line in differences(&results, &committed, false) {
            println!("{line}");
        }
    }
    insta::with_settings!({
        description => "onnx-ref conformance manifest: one passing backend test per line; \
                        failures as `# suite/test: reason`",
        omit_expression => true,
    }, {
        insta::assert_snapshot!("manifest", manifest(&results));
    });
}
