//! Saving an optimized model with external data: without `reuse_external_data` the output gets
//! a data file of its own with the same tensor bytes; with it, the tensors the optimizer left
//! unchanged keep referring to the input's data file, a folded tensor lands in the new one,
//! and an output that would replace the input or could not refer to its data is refused
//! before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use onnx_opt::proto::{self, external_data_info, ExternalDataOptions, SaveOptions};
use onnx_opt::{optimize_file, Optimizer, OutputOptions};

const MODEL: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 256] x) => (float[4, 256] y) <float[1] w = {0.0}, float[1] a = {0.0}, float[1] b = {0.0}> {
    m = MatMul (x, w)
    c = Add (a, b)
    y = Add (m, c)
}"#;

fn floats(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i % 97) as f32 * 0.01 + seed).sin())
        .collect()
}

fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// `dir/in.onnx`, with `w` (256 KiB), `a` and `b` (4 KiB each) in `in.onnx.data`; returns
/// the path and the bytes of `w` and of the folded `a + b`.
fn write_input(dir: &Path) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let mut m = onnx_text::parse_model(MODEL).unwrap();
    let (w, a, b) = (
        floats(256 * 256, 0.1),
        floats(4 * 256, 0.2),
        floats(4 * 256, 0.3),
    );
    let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    for t in &mut m.graph.as_mut().unwrap().initializer {
        let (dims, data) = match t.name.as_deref().unwrap() {
            "w" => (vec![256, 256], &w),
            "a" => (vec![4, 256], &a),
            _ => (vec![4, 256], &b),
        };
        t.dims = dims;
        t.float_data.clear();
        t.raw_data = Some(le_bytes(data).into());
    }
    let path = dir.join("in.onnx");
    let options = SaveOptions {
        external: Some(ExternalDataOptions::for_model(&path, 1024)),
        ..Default::default()
    };
    proto::save_model(&m, None, &path, &options).unwrap();
    (path, le_bytes(&w), le_bytes(&sum))
}

/// Each initializer of a saved model: its bytes (read back) and its (location, offset).
fn initializers(path: &Path) -> BTreeMap<Vec<u8>, (String, u64)> {
    let loaded = proto::load_model(path).unwrap();
    let places: Vec<(String, u64)> = loaded
        .model
        .graph
        .as_ref()
        .unwrap()
        .initializer
        .iter()
        .map(|t| {
            let info = external_data_info(t, path).unwrap();
            info.map_or((String::new(), 0), |i| (i.location, i.offset))
        })
        .collect();
    let mut m = loaded.model.clone();
    proto::inline_external_data(&mut m, &loaded.dir, &loaded.path).unwrap();
    let bytes = m.graph.unwrap().initializer.into_iter();
    bytes
        .map(|t| t.raw_data.unwrap().to_vec())
        .zip(places)
        .collect()
}

fn optimize(
    input: &Path,
    output: &Path,
    reuse: bool,
) -> Result<onnx_opt::Outcome, onnx_opt::Error> {
    let options = OutputOptions {
        reuse_external_data: reuse,
        ..Default::default()
    };
    optimize_file(input, output, &Optimizer::new().check(1), &options, &|_| {})
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn reuse_leaves_unchanged_tensors_in_the_input_data_and_writes_the_folded_one() {
    let dir = tempfile::tempdir().unwrap();
    let (input, w, sum) = write_input(dir.path());
    let w_offset = initializers(&input)[&w].1;
    let out = dir.path().join("out.onnx");
    optimize(&input, &out, true).unwrap();
    let saved = initializers(&out);
    assert_eq!(
        saved.get(&w),
        Some(&("in.onnx.data".to_string(), w_offset)),
        "w is unchanged: it stays in the input's data file at its offset"
    );
    assert_eq!(
        saved.get(&sum),
        Some(&("out.onnx.data".to_string(), 0)),
        "a + b is folded: a new tensor in the new data file"
    );
    assert_eq!(saved.len(), 2, "a and b are gone: {:?}", saved.values());
    assert_eq!(
        std::fs::metadata(dir.path().join("out.onnx.data"))
            .unwrap()
            .len(),
        sum.len() as u64
    );
    // The output loads (its data mapped from both files) and passes the checker.
    let loaded = onnx_opt::load(&out).unwrap();
    onnx_opt::check_ir(&out, &loaded).unwrap();
}

#[test]
fn without_reuse_the_output_data_holds_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (input, w, sum) = write_input(dir.path());
    let other = tempfile::tempdir().unwrap();
    let out = other.path().join("out.onnx");
    optimize(&input, &out, false).unwrap();
    let saved = initializers(&out);
    let (w_at, sum_at) = (&saved[&w], &saved[&sum]);
    assert_eq!(
        (w_at.0.as_str(), sum_at.0.as_str()),
        ("out.onnx.data", "out.onnx.data")
    );
    assert_eq!((w_at.1 % 4096, sum_at.1 % 4096), (0, 0), "aligned to 4 KiB");
    assert_eq!(saved.len(), 2);
}

#[test]
fn reuse_is_refused_over_the_input_and_away_from_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _, _) = write_input(dir.path());
    let before = std::fs::read(&input).unwrap();
    let err = optimize(&input, &input, true).unwrap_err();
    assert!(
        matches!(&err, onnx_opt::Error::Proto(proto::Error::ReuseInPlace { path }) if path == &input),
        "{err}"
    );
    assert!(err.to_string().contains("replace the input model"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), before);
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let other = tempfile::tempdir().unwrap();
    for out_dir in [&sub, other.path()] {
        let err = optimize(&input, &out_dir.join("out.onnx"), true).unwrap_err();
        assert!(
            matches!(&err, onnx_opt::Error::Proto(proto::Error::ReuseOutside { file, .. }) if file.ends_with("in.onnx.data")),
            "{err}"
        );
        assert!(files_in(out_dir).is_empty());
    }
    assert_eq!(files_in(dir.path()), ["in.onnx", "in.onnx.data", "sub"]);
}
