//! The ONNX backend conformance suite (`../shared/onnx-backend/{node,simple,pytorch-converted,
//! pytorch-operator}`), tracked by `tests/manifest.txt`: one passing test per line, known
//! failures as `# suite/test: reason`. A test listed as passing that fails is a regression and
//! fails this test; a newly passing test is printed with a hint. `ONNX_OPT_UPDATE_MANIFEST=1`
//! rewrites the manifest from the current results. `ONNX_OPT_CONFORMANCE_FILTER=a,b` runs only
//! the tests whose name contains one of the comma-separated substrings, prints every result, and
//! checks only those against the manifest (it never rewrites the manifest).

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{run_test_dir, test_dirs};

const SUITES: [&str; 4] = ["node", "simple", "pytorch-converted", "pytorch-operator"];
const MANIFEST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/manifest.txt");

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

/// The manifest's pass list and known failures.
fn read_manifest() -> (Vec<String>, BTreeMap<String, String>) {
    let text = std::fs::read_to_string(MANIFEST).unwrap_or_default();
    let mut pass = Vec::new();
    let mut known = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some((name, reason)) = rest.split_once(": ") {
                if name.contains('/') {
                    known.insert(name.to_string(), reason.to_string());
                }
            }
        } else if !line.starts_with('#') {
            pass.push(line.to_string());
        }
    }
    (pass, known)
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
        let (pass, _known) = read_manifest();
        let regressions: Vec<&String> = pass
            .iter()
            .filter(|n| matches!(results.get(*n), Some(Err(_))))
            .collect();
        assert!(
            regressions.is_empty(),
            "manifest tests no longer pass: {regressions:?}"
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

    if std::env::var_os("ONNX_OPT_UPDATE_MANIFEST").is_some_and(|v| v == "1") {
        let mut out = String::from(
            "# onnx-ref conformance manifest: one passing backend test per line; known failures as\n\
             # `# suite/test: reason`. Regenerate with ONNX_OPT_UPDATE_MANIFEST=1 cargo test --release -p onnx-ref --test interpreter conformance\n",
        );
        for (name, r) in &results {
            match r {
                Ok(()) => out.push_str(&format!("{name}\n")),
                Err(e) => out.push_str(&format!("# {name}: {}\n", one_line(e))),
            }
        }
        if let Err(e) = std::fs::write(MANIFEST, out) {
            panic!("cannot write {MANIFEST}: {e}");
        }
        println!("rewrote {MANIFEST}");
        return;
    }

    let (pass, _known) = read_manifest();
    assert!(
        !pass.is_empty(),
        "{MANIFEST} lists no passing tests: regenerate it with ONNX_OPT_UPDATE_MANIFEST=1"
    );
    let mut regressions = Vec::new();
    for name in &pass {
        match results.get(name) {
            Some(Ok(())) => {}
            Some(Err(e)) => regressions.push(format!("{name}: {}", one_line(e))),
            None => regressions.push(format!("{name}: test directory not found")),
        }
    }
    let newly: Vec<&String> = results
        .iter()
        .filter(|(name, r)| r.is_ok() && !pass.contains(name))
        .map(|(name, _)| name)
        .collect();
    if !newly.is_empty() {
        println!(
            "{} tests pass that the manifest does not list (add them, or rerun with ONNX_OPT_UPDATE_MANIFEST=1):",
            newly.len()
        );
        for n in &newly {
            println!("  {n}");
        }
    }
    assert!(
        regressions.is_empty(),
        "{} manifest tests no longer pass:\n{}",
        regressions.len(),
        regressions.join("\n")
    );
}
