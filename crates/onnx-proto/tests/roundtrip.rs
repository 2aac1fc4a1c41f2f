//! Load then save is byte-identical for every model and test-data file under `../shared`
//! (the ONNX backend suite and the development models); skipped without it (see onnx-testdata).

use std::path::{Path, PathBuf};

use onnx_proto::{type_proto, Message, ModelProto};

fn model_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in [
        "onnx-backend/node",
        "onnx-backend/simple",
        "onnx-backend/pytorch-converted",
        "onnx-backend/pytorch-operator",
        "models",
    ] {
        let Ok(rd) = std::fs::read_dir(root.join(sub)) else {
            continue;
        };
        let mut dirs: Vec<_> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join("model.onnx").is_file())
            .collect();
        dirs.sort();
        out.extend(dirs);
    }
    out
}

fn reencode<M: Message + Default>(bytes: &[u8]) -> Option<Vec<u8>> {
    M::decode(bytes).ok().map(|m| m.encode_to_vec())
}

#[test]
fn load_save_is_byte_identical() {
    let root = onnx_testdata::require_shared!();
    let dirs = model_dirs(&root);
    assert!(
        dirs.len() > 1900,
        "expected the whole backend suite, found {}",
        dirs.len()
    );
    let mut failures = Vec::new();
    let mut files = 0;
    for dir in &dirs {
        let path = dir.join("model.onnx");
        let original = std::fs::read(&path).unwrap();
        let loaded = onnx_proto::load_model(&path).unwrap();
        assert_eq!(loaded.unrepresented_bytes, 0, "{}", path.display());
        if loaded.model.encode_to_vec() != original {
            failures.push(path.display().to_string());
        }
        files += 1;
        let graph = loaded.model.graph.clone().unwrap_or_default();
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for ds in rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
        {
            for f in std::fs::read_dir(&ds)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.path())
            {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                let Some(stem) = name.strip_suffix(".pb") else {
                    continue;
                };
                let (kind, idx) = stem.split_once('_').unwrap();
                let idx: usize = idx.parse().unwrap();
                let vi = if kind == "input" {
                    graph.input.get(idx)
                } else {
                    graph.output.get(idx)
                };
                let ty = vi
                    .and_then(|v| v.r#type.as_ref())
                    .and_then(|t| t.value.as_ref());
                let bytes = std::fs::read(&f).unwrap();
                let again = match ty {
                    Some(type_proto::Value::SequenceType(_)) => {
                        reencode::<onnx_proto::SequenceProto>(&bytes)
                    }
                    Some(type_proto::Value::OptionalType(_)) => {
                        reencode::<onnx_proto::OptionalProto>(&bytes)
                    }
                    Some(type_proto::Value::MapType(_)) => reencode::<onnx_proto::MapProto>(&bytes),
                    _ => reencode::<onnx_proto::TensorProto>(&bytes),
                };
                if again.as_deref() != Some(&bytes[..]) {
                    failures.push(f.display().to_string());
                }
                files += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {files} files do not round trip: {:?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
    let _ = ModelProto::default();
}
