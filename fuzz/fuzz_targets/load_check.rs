//! Fuzz target `load_check`: arbitrary bytes decoded as a `ModelProto`, converted to the IR,
//! checked (structural and schema rules), sorted, checked again, and written back. Nothing may
//! panic, and the IR -> proto conversion must reproduce the decoded message byte for byte.

#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let Ok(loaded) =
        onnx_proto::load_model_bytes(bytes, Path::new("fuzz.onnx"), PathBuf::from("."))
    else {
        return;
    };
    let encoded = loaded.model.encode_to_vec();
    let Ok(model) = onnx_ir::Model::from_proto(loaded.model) else {
        return;
    };
    let verdict = onnx_ir::check_model(&model);
    if let Err(errors) = &verdict {
        // Rendering every message must not panic either.
        for error in errors {
            let _ = error.to_string();
        }
    }
    let again = model.to_proto().encode_to_vec();
    assert!(again == encoded, "IR -> proto is not lossless");
    let mut sorted = model.clone();
    if sorted.graph.sort_topologically().is_ok() {
        let _ = onnx_ir::check_model(&sorted);
    }
});
