//! Prints models to text files: `print_models OUT_DIR MODEL_OR_DIR...`. A directory is
//! searched for `*/model.onnx` (the backend-test layout); each model is written to
//! `OUT_DIR/<name of its directory>.txt`. Used by `tests/check_with_python.py`.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let out_dir = PathBuf::from(
        args.next()
            .ok_or("usage: print_models OUT_DIR MODEL_OR_DIR...")?,
    );
    std::fs::create_dir_all(&out_dir)?;
    let mut models = Vec::new();
    for arg in args {
        let path = PathBuf::from(arg);
        if path.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                let model = entry?.path().join("model.onnx");
                if model.is_file() {
                    models.push(model);
                }
            }
        } else {
            models.push(path);
        }
    }
    models.sort();
    for model in &models {
        let loaded = onnx_proto::load_model(model)?;
        let text = onnx_text::print_model(&loaded.model, &onnx_text::PrintOptions::default());
        let name = model_name(model);
        std::fs::write(out_dir.join(format!("{name}.txt")), text)?;
    }
    println!("printed {} models into {}", models.len(), out_dir.display());
    Ok(())
}

fn model_name(model: &Path) -> String {
    let dir = model.parent().and_then(Path::file_name);
    match (dir, model.file_stem()) {
        (Some(d), Some(stem)) if stem == "model" => d.to_string_lossy().into_owned(),
        (_, Some(stem)) => stem.to_string_lossy().into_owned(),
        _ => "model".to_string(),
    }
}
