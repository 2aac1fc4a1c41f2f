//! Times `Session::run` on development models: the median of 5 runs after one warm-up.
//!
//! `cargo run --release -p onnx-ref --example time_models -- [model dir...]` (defaults to
//! resnet18-opset13 and mobilenet_v2-opset13 under `../shared/models`, or
//! `$ONNX_OPT_SHARED/models`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use onnx_ref::{random_inputs, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let dirs = if args.is_empty() {
        let shared = onnx_testdata::shared_dir_for("the time_models example")
            .ok_or("no shared test data: pass model directories")?;
        vec![
            shared.join("models/resnet18-opset13"),
            shared.join("models/mobilenet_v2-opset13"),
        ]
    } else {
        args
    };
    for dir in dirs {
        let path = dir.join("model.onnx");
        let loaded = onnx_proto::load_model(&path)?;
        let mut model = loaded.model;
        onnx_proto::inline_external_data(&mut model, &loaded.dir, &loaded.path)?;
        let session = Session::new(&model)?;
        let inputs = random_inputs(&model, 0, &BTreeMap::new())?;
        session.run(inputs.clone())?;
        let mut times: Vec<Duration> = (0..5)
            .map(|_| {
                let start = Instant::now();
                let r = session.run(inputs.clone());
                let t = start.elapsed();
                r.map(|_| t)
            })
            .collect::<Result<_, _>>()?;
        times.sort();
        println!(
            "{}: median {:.1} ms (min {:.1}, max {:.1})",
            dir.display(),
            times[2].as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[4].as_secs_f64() * 1e3
        );
    }
    Ok(())
}
