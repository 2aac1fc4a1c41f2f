//! Agreement with onnx's parser: each `tests/data/onnx_parser/<name>.txt` is hand-written text
//! in the syntax, and `<name>.pb` is what `onnx.parser.parse_model` (onnx 1.23.2) made of it
//! (regenerate with `make_expected.py` there). This crate's parser must give the same proto,
//! byte for byte, and print it back in a form that parses to the same proto again.

use std::path::Path;

use onnx_proto::{Message, ModelProto};
use onnx_text::{parse_model, print_model, PrintOptions};

#[test]
fn hand_written_texts_parse_as_onnx_parses_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx_parser");
    let mut texts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    texts.sort();
    assert!(
        texts.len() >= 3,
        "expected the onnx_parser cases in {}",
        dir.display()
    );
    for txt in texts {
        let name = txt.display();
        let text = std::fs::read_to_string(&txt).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected: ModelProto = onnx_proto::decode_file(txt.with_extension("pb"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = parse_model(&text).unwrap_or_else(|e| panic!("{name}: {}", e.render()));
        assert_eq!(
            ours.encode_to_vec(),
            expected.encode_to_vec(),
            "{name}: differs from onnx.parser\nours: {ours:#?}\nonnx: {expected:#?}"
        );
        let again = parse_model(&print_model(&ours, &PrintOptions::default()))
            .unwrap_or_else(|e| panic!("{name}: reprinted: {}", e.render()));
        assert_eq!(
            again.encode_to_vec(),
            ours.encode_to_vec(),
            "{name}: reprint changed it"
        );
    }
}
