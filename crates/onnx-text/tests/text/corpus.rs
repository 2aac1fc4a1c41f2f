//! The round trip over every shared model: `parse(print(m))` is bit-exactly `m`, and
//! `normalize_for_text` changes nothing in any of them. Two tests (the backend suites and
//! the development models) so that the harness runs them side by side; run with `--release`
//! (the development models print to about 400 MB of text).

use std::path::PathBuf;

use onnx_text::{normalize_for_text, parse_model, print_model, PrintOptions};

use crate::util::{backend_models, development_models, same_model};

fn check_round_trips(models: &[PathBuf]) {
    let mut failures = Vec::new();
    for path in models {
        let model = match onnx_proto::load_model(path) {
            Ok(loaded) => loaded.model,
            Err(e) => panic!("{e}"),
        };
        if !same_model(&normalize_for_text(&model), &model) {
            failures.push(format!("{}: normalize_for_text changed it", path.display()));
            continue;
        }
        let text = print_model(&model, &PrintOptions::default());
        match parse_model(&text) {
            Ok(back) if same_model(&back, &model) => {}
            Ok(_) => failures.push(format!("{}: parsed back differently", path.display())),
            Err(e) => failures.push(format!("{}: {}", path.display(), e.render())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} models failed:\n{}",
        failures.len(),
        models.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn backend_test_models_round_trip_exactly() {
    let shared = onnx_testdata::require_shared!();
    let models = backend_models(&shared);
    assert!(
        models.len() >= 2000,
        "found {} backend models",
        models.len()
    );
    check_round_trips(&models);
}

#[test]
fn development_models_round_trip_exactly() {
    let shared = onnx_testdata::require_shared!();
    let models = development_models(&shared);
    assert!(
        models.len() >= 15,
        "found {} development models",
        models.len()
    );
    check_round_trips(&models);
}
