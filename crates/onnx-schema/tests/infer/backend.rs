//! Every ONNX backend test model (`../shared/onnx-backend/{node,simple,pytorch-converted,
//! pytorch-operator}/*/model.onnx`): infer the graph and compare each graph output with its
//! declared type. No output may contradict its declaration, no model may fail, and coverage may
//! not drop below the committed numbers. `INFER_REPORT=1` lists the outputs not fully inferred;
//! `INFER_DEBUG=<test name>` prints one model's inferred and declared output types.

use std::collections::BTreeMap;
use std::path::Path;

use onnx_schema::infer::{infer_graph, opset_imports};

use crate::compare::{compare, Verdict};

/// Per suite: (directory, models expected, outputs inferred fully at the last committed run,
/// outputs inferred at least partly). The test fails when coverage drops below these.
const SUITES: [(&str, usize, usize, usize); 4] = [
    ("node", 1884, 2005, 2321),
    ("simple", 23, 11, 23),
    ("pytorch-converted", 82, 82, 82),
    ("pytorch-operator", 35, 38, 38),
];

#[derive(Default, Debug)]
struct Coverage {
    models: usize,
    outputs: usize,
    full: usize,
    partial: usize,
    nothing: usize,
    mismatches: Vec<String>,
    errors: Vec<String>,
    not_full: BTreeMap<String, Vec<String>>,
}

fn run_backend(shared: &Path, suite: &str) -> Coverage {
    let root = shared.join("onnx-backend").join(suite);
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    dirs.sort();
    let mut cov = Coverage::default();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let loaded = onnx_proto::load_model(dir.join("model.onnx"))
            .unwrap_or_else(|e| panic!("{name}: cannot load: {e}"));
        let model = &loaded.model;
        let Some(graph) = model.graph.as_ref() else {
            continue;
        };
        cov.models += 1;
        let opsets = opset_imports(&model.opset_import);
        let types = match infer_graph(graph, &opsets) {
            Ok(t) => t,
            Err(e) => {
                cov.errors.push(format!("{name}: {e}"));
                continue;
            }
        };
        for out in &graph.output {
            let (Some(out_name), Some(declared)) = (out.name.as_deref(), out.r#type.as_ref())
            else {
                continue;
            };
            cov.outputs += 1;
            if std::env::var("INFER_DEBUG").is_ok_and(|d| d == name) {
                println!(
                    "{name}: {out_name}: inferred {:?}\n  declared {:?}",
                    types.get(out_name),
                    declared
                );
            }
            match compare(declared, types.get(out_name)) {
                Verdict::Full => cov.full += 1,
                Verdict::Partial => {
                    cov.partial += 1;
                    cov.not_full
                        .entry(name.clone())
                        .or_default()
                        .push(format!("{out_name}: partial"));
                }
                Verdict::Nothing => {
                    cov.nothing += 1;
                    cov.not_full
                        .entry(name.clone())
                        .or_default()
                        .push(format!("{out_name}: nothing"));
                }
                Verdict::Mismatch(m) => cov.mismatches.push(format!("{name}: {out_name}: {m}")),
            }
        }
    }
    cov
}

#[test]
fn backend_models_infer_without_contradiction() {
    let shared = onnx_testdata::require_shared!();
    let mut failures = Vec::new();
    for (suite, models, min_full, min_inferred) in SUITES {
        let cov = run_backend(&shared, suite);
        println!(
            "backend {suite}: {} models, {} outputs: {} full, {} partial, {} nothing, {} mismatches, {} errors",
            cov.models,
            cov.outputs,
            cov.full,
            cov.partial,
            cov.nothing,
            cov.mismatches.len(),
            cov.errors.len()
        );
        if std::env::var_os("INFER_REPORT").is_some() {
            for (model, outs) in &cov.not_full {
                println!("not full: {model}: {}", outs.join(", "));
            }
        }
        if cov.models != models {
            failures.push(format!(
                "{suite}: expected {models} models, found {}",
                cov.models
            ));
        }
        failures.extend(
            cov.mismatches
                .iter()
                .map(|m| format!("{suite}: mismatch: {m}")),
        );
        failures.extend(
            cov.errors
                .iter()
                .map(|e| format!("{suite}: inference failed on a valid model: {e}")),
        );
        if cov.full < min_full {
            failures.push(format!(
                "{suite}: full coverage dropped: {} < {min_full}",
                cov.full
            ));
        }
        if cov.full + cov.partial < min_inferred {
            failures.push(format!(
                "{suite}: coverage dropped: {} < {min_inferred}",
                cov.full + cov.partial
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
