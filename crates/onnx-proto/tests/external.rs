//! External data: save with a threshold, load back, resolve, and refuse locations that escape
//! the model directory.

use std::path::Path;

use bytes::Bytes;
use onnx_proto::{
    inline_external_data, is_external, load_model, save_model, tensor_proto::DataType,
    ExternalDataOptions, GraphProto, ModelProto, SaveOptions, StringStringEntryProto, TensorProto,
};

fn tensor(name: &str, n: usize) -> TensorProto {
    let data: Vec<u8> = (0..n * 4).map(|i| (i % 251) as u8).collect();
    TensorProto {
        name: Some(name.into()),
        dims: vec![n as i64],
        data_type: Some(DataType::Float as i32),
        raw_data: Some(Bytes::from(data)),
        ..Default::default()
    }
}

fn model(tensors: Vec<TensorProto>) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto {
            name: Some("g".into()),
            initializer: tensors,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn external(name: &str, location: &str, offset: u64, length: u64) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![(length / 4) as i64],
        data_type: Some(DataType::Float as i32),
        data_location: Some(1),
        external_data: vec![
            entry("location", location),
            entry("offset", &offset.to_string()),
            entry("length", &length.to_string()),
        ],
        ..Default::default()
    }
}

fn entry(k: &str, v: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    }
}

fn inline_err(m: &mut ModelProto, dir: &Path) -> String {
    inline_external_data(m, dir, &dir.join("m.onnx"))
        .expect_err("must be refused")
        .to_string()
}

#[test]
fn threshold_externalizes_large_tensors_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let original = model(vec![tensor("small", 4), tensor("big", 1000)]);
    let out = dir.path().join("m.onnx");
    let opts = SaveOptions {
        external: Some(ExternalDataOptions::for_model(&out, 1024)),
        ..Default::default()
    };
    save_model(&original, None, &out, &opts).unwrap();
    assert!(dir.path().join("m.onnx.data").is_file());
    let loaded = load_model(&out).unwrap();
    let init = &loaded.model.graph.as_ref().unwrap().initializer;
    assert!(!is_external(&init[0]), "small tensor stays inline");
    assert!(is_external(&init[1]), "big tensor goes external");
    let mut inlined = loaded.model.clone();
    inline_external_data(&mut inlined, &loaded.dir, &loaded.path).unwrap();
    assert_eq!(inlined, original);
    // Saving elsewhere carries the external tensors over.
    let other = tempfile::tempdir().unwrap();
    let out2 = other.path().join("copy.onnx");
    save_model(
        &loaded.model,
        Some(&loaded.dir),
        &out2,
        &SaveOptions::default(),
    )
    .unwrap();
    let again = load_model(&out2).unwrap();
    let mut inlined2 = again.model.clone();
    inline_external_data(&mut inlined2, &again.dir, &again.path).unwrap();
    assert_eq!(inlined2, original);
    assert!(other.path().join("copy.onnx.data").is_file());
}

#[test]
fn escaping_locations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("model");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(dir.path().join("secret.bin"), [0u8; 16]).unwrap();
    for loc in ["../secret.bin", "/etc/passwd", "a/../../secret.bin"] {
        let mut m = model(vec![external("w", loc, 0, 16)]);
        let msg = inline_err(&mut m, &inner);
        assert!(msg.contains("escapes the model directory"), "{loc}: {msg}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("secret.bin"), inner.join("link.bin")).unwrap();
        let mut m = model(vec![external("w", "link.bin", 0, 16)]);
        let msg = inline_err(&mut m, &inner);
        assert!(msg.contains("escapes the model directory"), "{msg}");
    }
}

#[test]
fn bad_ranges_and_entries_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.bin"), [0u8; 16]).unwrap();
    let mut m = model(vec![external("w", "w.bin", 8, 16)]);
    assert!(inline_err(&mut m, dir.path()).contains("outside 'w.bin'"));
    let mut m = model(vec![external("w", "w.bin", u64::MAX, 16)]);
    assert!(inline_err(&mut m, dir.path()).contains("outside 'w.bin'"));
    let mut t = external("w", "w.bin", 0, 16);
    t.external_data[1].value = Some("-3".into());
    let mut m = model(vec![t]);
    assert!(inline_err(&mut m, dir.path()).contains("offset '-3'"));
    let mut t = external("w", "w.bin", 0, 16);
    t.external_data.remove(0);
    let mut m = model(vec![t]);
    assert!(inline_err(&mut m, dir.path()).contains("no 'location'"));
    let mut m = model(vec![external("w", "missing.bin", 0, 16)]);
    assert!(inline_err(&mut m, dir.path()).contains("missing.bin"));
}

#[test]
fn malformed_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = model(vec![tensor("w", 100)]);
    let bytes = onnx_proto::Message::encode_to_vec(&good);
    let path = dir.path().join("t.onnx");
    for cut in [1, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let msg = load_model(&path).expect_err("truncated").to_string();
        assert!(
            msg.contains("t.onnx") && msg.contains("malformed or truncated"),
            "{msg}"
        );
    }
    std::fs::write(&path, b"").unwrap();
    assert!(load_model(&path)
        .expect_err("empty")
        .to_string()
        .contains("empty file"));
    // A field with a wrong wire type (graph = 7 as a varint).
    std::fs::write(&path, [0x38, 0x01]).unwrap();
    assert!(load_model(&path).is_err());
}

#[test]
fn failed_save_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing-dir").join("m.onnx");
    assert!(save_model(&model(vec![]), None, &out, &SaveOptions::default()).is_err());
    assert!(!out.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty());
}

#[test]
fn model_over_the_size_limit_is_externalized_automatically() {
    let dir = tempfile::tempdir().unwrap();
    let original = model(vec![tensor("a", 1000), tensor("b", 1000)]);
    let out = dir.path().join("big.onnx");
    let opts = SaveOptions {
        size_limit: Some(5000),
        ..Default::default()
    };
    save_model(&original, None, &out, &opts).unwrap();
    let loaded = load_model(&out).unwrap();
    assert!(loaded.file_size < 5000, "{}", loaded.file_size);
    assert!(loaded
        .model
        .graph
        .as_ref()
        .unwrap()
        .initializer
        .iter()
        .all(is_external));
    let refuse = SaveOptions {
        size_limit: Some(5000),
        no_auto_external: true,
        ..Default::default()
    };
    let err = save_model(&original, None, dir.path().join("no.onnx"), &refuse).unwrap_err();
    assert!(err.to_string().contains("2 GiB"), "{err}");
    assert!(!dir.path().join("no.onnx").exists());
}
