//! Expected printed text: every `tests/data/<name>.txt` is exactly what the printer writes
//! for its model (the backend node test `<name>` in the shared data, or `tests/data/<name>.onnx`),
//! and parses back to that model.

use std::path::{Path, PathBuf};

use onnx_text::{parse_model, print_model, PrintOptions};

use crate::util::{same_model, shared_dir};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn source_model(name: &str) -> PathBuf {
    let local = data_dir().join(format!("{name}.onnx"));
    if local.is_file() {
        local
    } else {
        shared_dir()
            .join("onnx-backend/node")
            .join(name)
            .join("model.onnx")
    }
}

#[test]
fn printed_files_match_and_parse_back() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap_or_else(|e| panic!("tests/data: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    for wanted in [
        "test_relu",
        "test_if",
        "test_loop11",
        "test_conv_with_strides_padding",
        "float16_initializer",
        "local_function",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "tests/data/{wanted}.txt is missing"
        );
    }
    for (file, name) in files.iter().zip(&names) {
        let expected = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = onnx_proto::load_model(source_model(name))
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
