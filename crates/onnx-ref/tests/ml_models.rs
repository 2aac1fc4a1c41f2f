//! The `ai.onnx.ml` classifiers, SVMs and map ops against onnxruntime: every case under
//! `tests/data/ml/test_*` (written by `tests/data/ml/gen.py` from onnxruntime 1.23.2) runs
//! through the public `Session` API and must reproduce the stored outputs: floats within
//! rtol 1e-4 / atol 1e-5, labels, strings and map keys exactly.

use std::path::{Path, PathBuf};

use onnx_proto::{type_proto, MapProto, ModelProto, SequenceProto, TensorProto, ValueInfoProto};
use onnx_ref::{Session, Tensor, Value};

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn data_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ml")).to_path_buf()
}

/// The case directories, sorted.
fn cases() -> Vec<PathBuf> {
    let dir = data_dir();
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    out.sort();
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Tensor,
    Map,
    Sequence,
}

fn kind_of(vi: &ValueInfoProto) -> Kind {
    match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::MapType(_)) => Kind::Map,
        Some(type_proto::Value::SequenceType(_)) => Kind::Sequence,
        _ => Kind::Tensor,
    }
}

fn load(path: &Path, kind: Kind) -> Result<Value, String> {
    let err = |e: String| format!("{}: {e}", path.display());
    match kind {
        Kind::Tensor => {
            let t: TensorProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            Tensor::from_proto(&t)
                .map(Value::Tensor)
                .map_err(|e| err(e.to_string()))
        }
        Kind::Map => {
            let m: MapProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            Value::from_map_proto(&m).map_err(|e| err(e.to_string()))
        }
        Kind::Sequence => {
            let s: SequenceProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            Value::from_sequence_proto(&s).map_err(|e| err(e.to_string()))
        }
    }
}

fn close(want: f64, got: f64) -> bool {
    (want.is_nan() && got.is_nan()) || (want - got).abs() <= ATOL + RTOL * want.abs()
}

/// Compares two tensors: same dtype and shape, floats with tolerance, the rest exactly.
fn compare_tensors(what: &str, want: &Tensor, got: &Tensor) -> Result<(), String> {
    if want.dtype() != got.dtype() || want.shape() != got.shape() {
        return Err(format!(
            "{what}: expected {}{:?}, got {}{:?}",
            want.dtype(),
            want.shape(),
            got.dtype(),
            got.shape()
        ));
    }
    if want.dtype().is_float() {
        let (w, g) = (
            want.to_f64_vec().map_err(|e| e.to_string())?,
            got.to_f64_vec().map_err(|e| e.to_string())?,
        );
        if let Some(i) = (0..w.len()).find(|&i| !close(w[i], g[i])) {
            return Err(format!(
                "{what}: element {i} is {} instead of {} (expected {w:?}, got {g:?})",
                g[i], w[i]
            ));
        }
        Ok(())
    } else if want == got {
        Ok(())
    } else {
        Err(format!("{what}: expected {want:?}, got {got:?}"))
    }
}

/// Compares values: maps by keys exactly and values (scalars, any rank) with tolerance.
fn compare(what: &str, want: &Value, got: &Value) -> Result<(), String> {
    match (want, got) {
        (Value::Tensor(w), Value::Tensor(g)) => compare_tensors(what, w, g),
        (Value::Sequence(w), Value::Sequence(g)) => {
            if w.items.len() != g.items.len() {
                return Err(format!(
                    "{what}: expected {} items, got {}",
                    w.items.len(),
                    g.items.len()
                ));
            }
            for (i, (a, b)) in w.items.iter().zip(&g.items).enumerate() {
                compare(&format!("{what}[{i}]"), a, b)?;
            }
            Ok(())
        }
        (Value::Map(w), Value::Map(g)) => {
            compare_tensors(&format!("{what} keys"), &w.keys, &g.keys)?;
            for (i, (a, b)) in w.values.iter().zip(&g.values).enumerate() {
                let flat = |v: &Value| -> Result<Tensor, String> {
                    let t = v.as_tensor().map_err(|e| e.to_string())?;
                    t.reshaped(&[t.len()]).map_err(|e| e.to_string())
                };
                compare_tensors(&format!("{what} value {i}"), &flat(a)?, &flat(b)?)?;
            }
            Ok(())
        }
        (w, g) => Err(format!("{what}: expected {}, got {}", w.kind(), g.kind())),
    }
}

fn run_case(dir: &Path) -> Result<(), String> {
    let path = dir.join("model.onnx");
    let model: ModelProto = onnx_proto::decode_file(&path).map_err(|e| e.to_string())?;
    let graph = model.graph.as_ref().ok_or("the model has no graph")?;
    let data = dir.join("test_data_set_0");
    let mut feeds = Vec::new();
    for (i, vi) in graph.input.iter().enumerate() {
        let v = load(&data.join(format!("input_{i}.pb")), kind_of(vi))?;
        feeds.push((vi.name.clone().unwrap_or_default(), v));
    }
    let session = Session::new(&model).map_err(|e| e.to_string())?;
    let outputs = session.run(feeds).map_err(|e| e.to_string())?;
    if outputs.len() != graph.output.len() {
        return Err(format!(
            "{} outputs instead of {}",
            outputs.len(),
            graph.output.len()
        ));
    }
    for (i, (vi, (name, got))) in graph.output.iter().zip(&outputs).enumerate() {
        let want = load(&data.join(format!("output_{i}.pb")), kind_of(vi))?;
        compare(&format!("output '{name}'"), &want, got)?;
    }
    Ok(())
}

#[test]
fn ml_models_match_onnxruntime() {
    let cases = cases();
    assert!(
        cases.len() >= 50,
        "only {} cases found under {}: run tests/data/ml/gen.py",
        cases.len(),
        data_dir().display()
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|dir| {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            run_case(dir)
                .err()
                .map(|e| format!("{}: {e}", name.unwrap_or_default()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from onnxruntime:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn every_ml_op_of_the_brief_has_a_case() {
    let names: Vec<String> = cases()
        .iter()
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for prefix in [
        "test_linear_classifier_",
        "test_svm_classifier_",
        "test_svm_regressor_",
        "test_tree_classifier_",
        "test_zipmap_",
        "test_category_mapper_",
        "test_dict_vectorizer_",
        "test_cast_map_",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no case starts with {prefix}"
        );
    }
}
