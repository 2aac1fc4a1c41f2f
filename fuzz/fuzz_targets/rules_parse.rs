//! Fuzz target `rules_parse`: arbitrary bytes parsed and checked as a rule file. Parsing and
//! checking must never panic, and every error must render (with its source line). A file that
//! is accepted is then run: its rules alone optimize a small fixed model (an MLP with a shape
//! subgraph), so guards and right sides built from arbitrary text are applied. That must not
//! panic either; a rule that changes the result is refused by the check as a clean `Err`.

#![no_main]

use libfuzzer_sys::fuzz_target;

const MODEL: &str = include_str!("../../examples/models/mlp.onnxtxt");

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match onnx_rules::parse_rules("fuzz.rules", text, &Default::default()) {
        Ok(_) => {
            let model = onnx_opt::parse_text(MODEL).expect("the fixed model parses");
            let optimizer = onnx_opt::Optimizer::new()
                .builtin_rules(false)
                .unsafe_rules(true)
                .rules_text("fuzz.rules", text)
                .check(1);
            if let Err(e) = optimizer.optimize(&model) {
                let _ = e.to_string();
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
