//! Saving tensors that were loaded from files: bytes still mapped from an input file are
//! copied by the kernel and land exactly as the write path puts them; with
//! `reuse_external_data` they keep referring to the input's data files, only new or changed
//! tensors go to the new data file, and every refusal comes before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use onnx_proto::{
    check_external_reuse, external_data_info, inline_external_data, is_external, load_model,
    save_model, tensor_proto::DataType, Error, ExternalDataOptions, GraphProto, ModelProto,
    SaveOptions, StringStringEntryProto, TensorProto,
};

fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 131 + seed * 7) % 253) as u8).collect()
}

fn tensor(name: &str, data: Vec<u8>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![data.len() as i64],
        data_type: Some(DataType::Uint8 as i32),
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

fn entry(k: &str, v: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    }
}

/// Writes `dir/name` whose tensors (name, bytes, offset) live in `dir/location` at those
/// offsets (any alignment), plus `inline` stored in the model file.
fn write_input(
    dir: &Path,
    name: &str,
    location: &str,
    external: &[(&str, Vec<u8>, u64)],
    inline: Vec<TensorProto>,
) -> PathBuf {
    let mut data = Vec::new();
    let mut tensors = Vec::new();
    for (tname, bytes, offset) in external {
        let offset = *offset as usize;
        if data.len() < offset + bytes.len() {
            data.resize(offset + bytes.len(), 0xee);
        }
        data[offset..offset + bytes.len()].copy_from_slice(bytes);
        let mut t = tensor(tname, bytes.clone());
        t.raw_data = None;
        t.data_location = Some(1);
        t.external_data = vec![
            entry("location", location),
            entry("offset", &offset.to_string()),
            entry("length", &bytes.len().to_string()),
        ];
        tensors.push(t);
    }
    tensors.extend(inline);
    std::fs::write(dir.join(location), data).unwrap();
    let path = dir.join(name);
    save_model(&model(tensors), None, &path, &SaveOptions::default()).unwrap();
    path
}

/// The model at `path` with its external data mapped in, as the optimizer holds it.
fn load_inlined(path: &Path) -> ModelProto {
    let loaded = load_model(path).unwrap();
    let mut m = loaded.model;
    inline_external_data(&mut m, &loaded.dir, &loaded.path).unwrap();
    m
}

/// Each initializer's bytes, read back from the file.
fn contents(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let m = load_inlined(path);
    m.graph
        .unwrap()
        .initializer
        .into_iter()
        .map(|t| (t.name.unwrap(), t.raw_data.unwrap().to_vec()))
        .collect()
}

/// Each initializer's (location, offset, length), `None` when stored inline.
fn places(path: &Path) -> BTreeMap<String, Option<(String, u64, Option<u64>)>> {
    let m = load_model(path).unwrap().model;
    m.graph
        .unwrap()
        .initializer
        .iter()
        .map(|t| {
            let info = external_data_info(t, path).unwrap();
            let place = info.map(|i| (i.location, i.offset, i.length));
            (t.name.clone().unwrap(), place)
        })
        .collect()
}

fn reuse(out: &Path) -> SaveOptions {
    SaveOptions {
        external: Some(ExternalDataOptions::for_model(out, 1024)),
        reuse_external_data: true,
        ..Default::default()
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Three external tensors (two large, one not page-aligned in its file, one small) and a large
/// inline one (inside the protobuf, at whatever offset the encoding puts it).
fn mixed_input(dir: &Path) -> (PathBuf, BTreeMap<String, Vec<u8>>) {
    let (a, b, s, i) = (
        pattern(200_000, 1),
        pattern(100_001, 2),
        pattern(100, 3),
        pattern(150_000, 4),
    );
    let path = write_input(
        dir,
        "in.onnx",
        "in.bin",
        &[
            ("a", a.clone(), 0),
            ("b", b.clone(), 200_013),
            ("s", s.clone(), 300_100),
        ],
        vec![tensor("i", i.clone())],
    );
    let expected = [("a", a), ("b", b), ("s", s), ("i", i)]
        .into_iter()
        .map(|(n, d)| (n.to_string(), d))
        .collect();
    (path, expected)
}

#[test]
fn kernel_copies_write_the_same_bytes_as_the_write_path() {
    let input = tempfile::tempdir().unwrap();
    let (in_path, expected) = mixed_input(input.path());
    let mapped = load_inlined(&in_path);
    // The same model with every tensor copied to the heap: written from memory, as before.
    let mut heap = mapped.clone();
    for t in &mut heap.graph.as_mut().unwrap().initializer {
        t.raw_data = t.raw_data.as_ref().map(|r| Bytes::copy_from_slice(r));
    }
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (m, dir) in [(&mapped, a.path()), (&heap, b.path())] {
        let out = dir.join("out.onnx");
        let options = SaveOptions {
            external: Some(ExternalDataOptions::for_model(&out, 1024)),
            ..Default::default()
        };
        save_model(m, None, &out, &options).unwrap();
        assert_eq!(contents(&out), expected);
    }
    for name in ["out.onnx", "out.onnx.data"] {
        let (x, y) = (a.path().join(name), b.path().join(name));
        assert!(
            std::fs::read(&x).unwrap() == std::fs::read(&y).unwrap(),
            "{name} differs between the kernel copy and the write path"
        );
    }
    let data_len = std::fs::metadata(a.path().join("out.onnx.data"))
        .unwrap()
        .len();
    // a at 0, b at 200_704, i at 303_104 (4 KiB-aligned); s stays inline.
    assert_eq!(data_len, 303_104 + 150_000);
}

#[test]
fn saving_in_place_without_reuse_rewrites_the_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (pattern(300_000, 5), pattern(70_000, 6));
    let src = dir.path().join("m.onnx");
    let options = SaveOptions {
        external: Some(ExternalDataOptions::for_model(&src, 1024)),
        ..Default::default()
    };
    let original = model(vec![tensor("a", a.clone()), tensor("b", b.clone())]);
    save_model(&original, None, &src, &options).unwrap();
    // Loaded (the data file mapped), then saved over itself: the new data file is copied from
    // the old one before the rename replaces it.
    let mut m = load_inlined(&src);
    m.graph.as_mut().unwrap().initializer.reverse();
    save_model(&m, None, &src, &options).unwrap();
    let expected: BTreeMap<String, Vec<u8>> = [("a".to_string(), a), ("b".to_string(), b)].into();
    assert_eq!(contents(&src), expected);
    assert_eq!(
        places(&src)["b"],
        Some(("m.onnx.data".into(), 0, Some(70_000)))
    );
}

#[test]
fn reuse_keeps_the_input_locations_and_loads_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let (in_path, expected) = mixed_input(dir.path());
    let out = dir.path().join("out.onnx");
    save_model(&load_inlined(&in_path), None, &out, &reuse(&out)).unwrap();
    assert_eq!(contents(&out), expected);
    let p = places(&out);
    assert_eq!(p["a"], Some(("in.bin".into(), 0, Some(200_000))));
    assert_eq!(p["b"], Some(("in.bin".into(), 200_013, Some(100_001))));
    assert_eq!(p["s"], Some(("in.bin".into(), 300_100, Some(100))));
    // The one tensor that was inside the input's protobuf is the only one copied.
    assert_eq!(p["i"], Some(("out.onnx.data".into(), 0, Some(150_000))));
    assert_eq!(
        std::fs::metadata(dir.path().join("out.onnx.data"))
            .unwrap()
            .len(),
        150_000
    );
}

#[test]
fn reuse_finds_input_data_below_the_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let (in_path, expected) = mixed_input(&sub);
    let out = dir.path().join("out.onnx");
    save_model(&load_inlined(&in_path), None, &out, &reuse(&out)).unwrap();
    assert_eq!(contents(&out), expected);
    assert_eq!(
        places(&out)["b"],
        Some(("sub/in.bin".into(), 200_013, Some(100_001)))
    );
}

#[test]
fn reuse_refuses_a_data_file_outside_the_output_directory_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (input, elsewhere, sibling) = (
        dir.path().join("in"),
        tempfile::tempdir().unwrap(),
        dir.path().join("sibling"),
    );
    std::fs::create_dir(&input).unwrap();
    std::fs::create_dir(&sibling).unwrap();
    let (in_path, _) = mixed_input(&input);
    let m = load_inlined(&in_path);
    for out_dir in [elsewhere.path(), &sibling] {
        let out = out_dir.join("out.onnx");
        for err in [
            check_external_reuse(&m, &out).unwrap_err(),
            save_model(&m, None, &out, &reuse(&out)).unwrap_err(),
        ] {
            match &err {
                Error::ReuseOutside { path, file } => {
                    assert_eq!(path, &out);
                    assert_eq!(file.file_name().unwrap(), "in.bin");
                }
                other => panic!("expected ReuseOutside, got {other}"),
            }
            let msg = err.to_string();
            assert!(
                msg.contains("in.bin") && msg.contains("not inside"),
                "{msg}"
            );
        }
        assert!(
            files_in(out_dir).is_empty(),
            "nothing written in {out_dir:?}"
        );
    }
    // A model whose bytes are all in memory has nothing to refer to.
    let heap = model(vec![tensor("a", pattern(5000, 1))]);
    check_external_reuse(&heap, elsewhere.path().join("x.onnx")).unwrap();
}

#[test]
fn reuse_writes_only_changed_and_new_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let (in_path, mut expected) = mixed_input(dir.path());
    let mut m = load_inlined(&in_path);
    let inits = &mut m.graph.as_mut().unwrap().initializer;
    // As a fold leaves them: `b` recomputed, `c` new, `d` a slice of `a`'s mapped bytes.
    let b_new = pattern(100_001, 9);
    let a_bytes = inits[0].raw_data.clone().unwrap();
    inits[1].raw_data = Some(Bytes::from(b_new.clone()));
    inits.push(tensor("c", pattern(5000, 10)));
    let mut d = tensor("d", vec![]);
    d.raw_data = Some(a_bytes.slice(100..5100));
    d.dims = vec![5000];
    inits.push(d);
    let out = dir.path().join("out.onnx");
    save_model(&m, None, &out, &reuse(&out)).unwrap();
    expected.insert("b".into(), b_new);
    expected.insert("c".into(), pattern(5000, 10));
    expected.insert("d".into(), expected["a"][100..5100].to_vec());
    assert_eq!(contents(&out), expected);
    let p = places(&out);
    assert_eq!(p["a"], Some(("in.bin".into(), 0, Some(200_000))));
    assert_eq!(p["d"], Some(("in.bin".into(), 100, Some(5000))));
    assert_eq!(p["s"], Some(("in.bin".into(), 300_100, Some(100))));
    assert_eq!(p["b"], Some(("out.onnx.data".into(), 0, Some(100_001))));
    assert_eq!(
        p["i"],
        Some(("out.onnx.data".into(), 102_400, Some(150_000)))
    );
    assert_eq!(p["c"], Some(("out.onnx.data".into(), 253_952, Some(5000))));
    // The input is untouched and still loads.
    assert_eq!(contents(&in_path)["b"], pattern(100_001, 2));
}

#[test]
fn a_new_data_file_may_not_replace_one_still_referred_to() {
    let dir = tempfile::tempdir().unwrap();
    // The input's data file has the name the output's new data file would get.
    let a = pattern(100_000, 1);
    let in_path = write_input(
        dir.path(),
        "in.onnx",
        "out.onnx.data",
        &[("a", a.clone(), 0)],
        vec![],
    );
    let before = std::fs::read(dir.path().join("out.onnx.data")).unwrap();
    let out = dir.path().join("out.onnx");
    let mut m = load_inlined(&in_path);
    // Nothing new to write: the output refers to the file and writes no data file.
    save_model(&m, None, &out, &reuse(&out)).unwrap();
    assert_eq!(
        places(&out)["a"],
        Some(("out.onnx.data".into(), 0, Some(100_000)))
    );
    std::fs::remove_file(&out).unwrap();
    // A new tensor would have to go to that file: refused, nothing written.
    m.graph
        .as_mut()
        .unwrap()
        .initializer
        .push(tensor("n", pattern(2000, 3)));
    let err = save_model(&m, None, &out, &reuse(&out)).unwrap_err();
    assert!(
        matches!(&err, Error::DataFileInUse { location, .. } if location == "out.onnx.data"),
        "{err}"
    );
    assert!(err.to_string().contains("still refer to"), "{err}");
    assert!(!out.exists());
    assert_eq!(
        std::fs::read(dir.path().join("out.onnx.data")).unwrap(),
        before
    );
    assert_eq!(files_in(dir.path()), ["in.onnx", "out.onnx.data"]);
}

#[test]
fn a_model_kept_external_may_not_have_its_data_file_replaced() {
    // `onnx-opt copy m.onnx -o m.onnx --external-threshold N`: the external tensors stay where
    // they are (same directory), and the newly externalized one would replace their file.
    let dir = tempfile::tempdir().unwrap();
    let a = pattern(10_000, 1);
    let in_path = write_input(
        dir.path(),
        "m.onnx",
        "m.onnx.data",
        &[("a", a, 0)],
        vec![tensor("i", pattern(3000, 2))],
    );
    let loaded = load_model(&in_path).unwrap();
    let options = SaveOptions {
        external: Some(ExternalDataOptions::for_model(&in_path, 1024)),
        ..Default::default()
    };
    let before = std::fs::read(&in_path).unwrap();
    let err = save_model(&loaded.model, Some(&loaded.dir), &in_path, &options).unwrap_err();
    assert!(matches!(err, Error::DataFileInUse { .. }), "{err}");
    assert_eq!(std::fs::read(&in_path).unwrap(), before);
    assert!(is_external(&loaded.model.graph.unwrap().initializer[0]));
}

/// A saved model and its data file get the mode a newly created file gets (the umask applied
/// to 0666, as `File::create` gives), not the temporary file's private 0600.
#[cfg(unix)]
#[test]
fn saved_files_get_the_mode_of_a_new_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::File::create(&plain).unwrap();
    let want = std::fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
    let out = dir.path().join("m.onnx");
    let options = SaveOptions {
        external: Some(ExternalDataOptions::for_model(&out, 16)),
        ..Default::default()
    };
    save_model(
        &model(vec![tensor("t", pattern(64, 1))]),
        None,
        &out,
        &options,
    )
    .unwrap();
    for f in [out.clone(), dir.path().join("m.onnx.data")] {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, want, "{}", f.display());
    }
}
