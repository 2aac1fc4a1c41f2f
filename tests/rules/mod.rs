//! Every built-in rule has a case under `tests/rule_cases/NAME.onnxtxt`: a small model in the
//! ONNX text syntax on which the rule fires. The case is optimized with all the built-in rules
//! (unsafe ones included), the rule must have fired without any refused union, the result must
//! compute the same as the original in the reference interpreter, and the printed result is an
//! insta snapshot (`tests/rule_cases/snapshots/`), so a change to any rule shows as a diff.
//! [`rust_rules`]: the proof of rules written in Rust.

mod rust_rules;

use std::collections::BTreeMap;
use std::path::PathBuf;

use onnx_opt::rules::RuleSelection;
use onnx_opt::verify::{compare_models, Tolerance};

fn cases_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/rule_cases"))
}

fn all_rules() -> RuleSelection {
    RuleSelection {
        float_unsafe: true,
        ..Default::default()
    }
}

#[test]
fn every_builtin_rule_fires_on_its_case_and_keeps_the_result() {
    let files = onnx_opt::rules::load_files(&all_rules()).expect("built-in rules check");
    let phases = || onnx_opt::optimize::rule_phases(&all_rules()).unwrap();
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    for rule in files.iter().flat_map(|f| &f.rules) {
        seen.push(format!("{}.onnxtxt", rule.name));
        let path = cases_dir().join(format!("{}.onnxtxt", rule.name));
        let Ok(text) = std::fs::read_to_string(&path) else {
            failures.push(format!("{}: no case file {}", rule.name, path.display()));
            continue;
        };
        let proto = match onnx_text::parse_model(&text) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {}", rule.name, e.render()));
                continue;
            }
        };
        let model = onnx_ir::Model::from_proto(proto.clone()).expect("case converts to the IR");
        let options = onnx_egraph::OptimizeOptions {
            phases: phases(),
            ..Default::default()
        };
        let (out, report) = match onnx_egraph::optimize_model(&model, options) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{}: {e}", rule.name));
                continue;
            }
        };
        let phase = &report.main.phases[0];
        if !phase.firings.contains_key(&rule.name) {
            failures.push(format!(
                "{}: did not fire on its case (fired: {:?})",
                rule.name, phase.firings
            ));
        }
        if !phase.refusals.is_empty() {
            failures.push(format!(
                "{}: refused unions {:?}",
                rule.name, phase.refusals
            ));
        }
        let optimized = out.to_proto();
        match compare_models(
            &proto,
            &optimized,
            3,
            &BTreeMap::new(),
            Tolerance::default(),
        ) {
            Ok(None) => {}
            Ok(Some(m)) => failures.push(format!("{}: outputs differ: {m:?}", rule.name)),
            Err(e) => failures.push(format!("{}: {e:#}", rule.name)),
        }
        let printed = onnx_text::print_model(&optimized, &Default::default());
        insta::with_settings!({
            snapshot_path => cases_dir().join("snapshots"),
            prepend_module_to_snapshot => false,
            description => format!("{} after the built-in rules", path.display()),
        }, {
            insta::assert_snapshot!(rule.name.as_str(), printed);
        });
    }
    // No stale case files.
    for entry in std::fs::read_dir(cases_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".onnxtxt") && !seen.contains(&name) {
            failures.push(format!(
                "{name}: a case file for a rule that does not exist"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `onnx-opt rules check` on the built-in rules: every rule, every epoch, proven on random
/// instances in the reference interpreter (the same proof CI runs).
#[test]
fn every_builtin_rule_is_proven_on_random_instances() {
    let files = onnx_opt::rules::load_files(&all_rules()).expect("built-in rules check");
    let opts = onnx_opt::prove::ProveOptions::default();
    let guards = onnx_egraph::GuardRegistry::default();
    let verdicts: Vec<_> = files
        .iter()
        .flat_map(|f| &f.rules)
        .map(|r| onnx_opt::prove::prove_rule(r, &guards, &opts))
        .collect();
    let failed: Vec<&str> = verdicts
        .iter()
        .filter(|v| !v.passed(&opts))
        .map(|v| v.rule.as_str())
        .collect();
    assert!(
        failed.is_empty(),
        "{}",
        onnx_opt::prove::render_verdicts(&verdicts, &opts)
    );
}
