//! Fuzz target `text_parse`: arbitrary bytes parsed as a model in the ONNX text syntax. Parsing
//! must never panic; a model that parses must print, and its print must parse again to the
//! same model (the printer and the parser agree).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(model) = onnx_text::parse_model(text) else {
        return;
    };
    let printed = onnx_text::print_model(&model, &onnx_text::PrintOptions::default());
    let again = onnx_text::parse_model(&printed)
        .unwrap_or_else(|e| panic!("the printed model does not parse: {e}\n{printed}"));
    let reprinted = onnx_text::print_model(&again, &onnx_text::PrintOptions::default());
    assert_eq!(printed, reprinted, "print -> parse -> print is not stable");
});
