//! Expected printed text: what the printer writes for each case model is the insta snapshot
//! `snapshots/text__expected__<name>.snap`, and parses back to that model. The cases are the
//! hand-made models `tests/data/<name>.onnx` and a few backend node tests `<name>` of the shared
//! data (those need it, see onnx-testdata). `INSTA_UPDATE=always` rewrites the snapshots.

use std::path::{Path, PathBuf};

use onnx_text::{parse_model, print_model, PrintOptions};

use crate::util::same_model;

/// The backend node tests whose printed text is snapshotted.
const BACKEND_CASES: [&str; 4] = [
    "test_conv_with_strides_padding",
    "test_if",
    "test_loop11",
    "test_relu",
];

/// The hand-made models every run must find in `tests/data`.
const REQUIRED_LOCAL_CASES: [&str; 2] = ["float16_initializer", "local_function"];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/text/snapshots")
}

/// The hand-made models `tests/data/<name>.onnx`, sorted, as (name, path).
fn local_cases() -> Vec<(String, PathBuf)> {
    let mut cases: Vec<(String, PathBuf)> = std::fs::read_dir(data_dir())
        .unwrap_or_else(|e| panic!("tests/data: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p)))
        .collect();
    cases.sort();
    cases
}

/// Snapshots the printed text of each case's model, and checks that it parses back to it.
fn check_printed(cases: &[(String, PathBuf)]) {
    for (name, path) in cases {
        let model = onnx_proto::load_model(path)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .model;
        let printed = print_model(&model, &PrintOptions::default());
        insta::with_settings!({ input_file => path, omit_expression => true }, {
            insta::assert_snapshot!(name.as_str(), printed);
        });
        let parsed = parse_model(&printed).unwrap_or_else(|e| panic!("{name}: {}", e.render()));
        assert!(
            same_model(&parsed, &model),
            "{name}: parses back to another model"
        );
    }
}

#[test]
fn printed_local_models_match_their_snapshots_and_parse_back() {
    let cases = local_cases();
    for wanted in REQUIRED_LOCAL_CASES {
        assert!(
            cases.iter().any(|(n, _)| n == wanted),
            "tests/data/{wanted}.onnx is missing"
        );
    }
    check_printed(&cases);
}

#[test]
fn printed_backend_models_match_their_snapshots_and_parse_back() {
    let shared = onnx_testdata::require_shared!();
    let cases: Vec<(String, PathBuf)> = BACKEND_CASES
        .iter()
        .map(|name| {
            let path = shared
                .join("onnx-backend/node")
                .join(name)
                .join("model.onnx");
            (name.to_string(), path)
        })
        .collect();
    check_printed(&cases);
}

#[test]
fn every_snapshot_belongs_to_a_case() {
    let local: Vec<String> = local_cases().into_iter().map(|(n, _)| n).collect();
    let orphans: Vec<String> = std::fs::read_dir(snapshot_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", snapshot_dir().display()))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|file| {
            file.strip_prefix("text__expected__")
                .and_then(|rest| rest.strip_suffix(".snap"))
                .is_some_and(|name| {
                    !local.iter().any(|n| n == name) && !BACKEND_CASES.contains(&name)
                })
        })
        .collect();
    assert!(
        orphans.is_empty(),
        "snapshots of no case (neither tests/data/NAME.onnx nor in BACKEND_CASES): {orphans:?}"
    );
}
