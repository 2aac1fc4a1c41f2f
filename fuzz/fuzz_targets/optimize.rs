//! Fuzz target `optimize`: arbitrary bytes loaded as a model (binary protobuf, or the text
//! syntax when they start with `<`) and optimized end to end with the default pipeline, every
//! built-in rule on and the result checked in the interpreter. Nothing may panic: a model the
//! loader or the optimizer refuses is a clean `Err`, and an optimized model must pass the
//! checker when saved.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = onnx_opt::load_bytes(data) else {
        return;
    };
    // Bound the work per input: libFuzzer's inputs are small, but a dim can still be large.
    let optimizer = onnx_opt::Optimizer::new().check(1);
    let Ok(out) = optimizer.optimize(&model) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("onnx-opt-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("out.onnx");
    if let Err(e) = onnx_opt::save(&out.model, &path) {
        panic!("the optimized model does not save: {e}");
    }
});
