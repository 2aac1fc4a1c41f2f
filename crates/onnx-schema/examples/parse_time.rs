//! Measures how long parsing the embedded schema table takes (the first call of `registry()`).
//! Run with `cargo run --release -p onnx-schema --example parse_time`.

use std::time::Instant;

fn main() {
    let start = Instant::now();
    let registry = match onnx_schema::try_registry() {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("the embedded schema table does not parse: {err}");
            std::process::exit(1);
        }
    };
    let elapsed = start.elapsed();
    println!(
        "parsed {} schema versions (onnx {}) in {:.2} ms",
        registry.len(),
        registry.onnx_version(),
        elapsed.as_secs_f64() * 1e3
    );
}
