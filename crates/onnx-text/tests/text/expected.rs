//! Expected printed text: every `tests/data/<name>.txt` is exactly what the printer writes
//! for its model (the backend node test `<name>` in the shared data, or `tests/data/<name>.onnx`),
//! and parses back to that model. The backend cases need the shared data (see onnx-testdata).

use std::path::{Path, PathBuf};

use onnx_text::{parse_model, print_model, PrintOptions};

use crate::util::same_model;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The `tests/data/<name>.txt` files, sorted, as (path, name).
fn printed_files() -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap_or_else(|e| panic!("tests/data: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let name = p.file_stem()?.to_string_lossy().into_owned();
            Some((p, name))
        })
        .collect()
}

/// Whether `name`'s model is `tests/data/<name>.onnx` (else it is a backend node test).
fn is_local(name: &str) -> bool {
    data_dir().join(format!("{name}.onnx")).is_file()
}

/// Checks each file against the printed text of its model, and that it parses back to it;
/// `wanted` must be among them.
fn check_printed(files: &[(PathBuf, String)], source: impl Fn(&str) -> PathBuf, wanted: &[&str]) {
    for wanted in wanted {
        assert!(
            files.iter().any(|(_, n)| n == wanted),
            "tests/data/{wanted}.txt is missing"
        );
    }
    for (file, name) in files {
        let expected = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = onnx_proto::load_model(source(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .model;
        let printed = print_model(&model, &PrintOptions::default());
        assert_eq!(printed, expected, "{name}: the printer's output changed");
        let parsed = parse_model(&expected).unwrap_or_else(|e| panic!("{name}: {}", e.render()));
        assert!(
            same_model(&parsed, &model),
            "{name}: parses back to another model"
        );
    }
}

#[test]
fn printed_files_of_local_models_match_and_parse_back() {
    let files: Vec<_> = printed_files()
        .into_iter()
        .filter(|(_, name)| is_local(name))
        .collect();
    check_printed(
        &files,
        |name| data_dir().join(format!("{name}.onnx")),
        &["float16_initializer", "local_function"],
    );
}

#[test]
fn printed_files_of_backend_models_match_and_parse_back() {
    let shared = onnx_testdata::require_shared!();
    let files: Vec<_> = printed_files()
        .into_iter()
        .filter(|(_, name)| !is_local(name))
        .collect();
    check_printed(
        &files,
        |name| {
            shared
                .join("onnx-backend/node")
                .join(name)
                .join("model.onnx")
        },
        &[
            "test_relu",
            "test_if",
            "test_loop11",
            "test_conv_with_strides_padding",
        ],
    );
}
