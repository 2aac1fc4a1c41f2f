//! Shared helpers: locating `../shared`, loading a test directory (model + test_data_set_N),
//! running it through a `Session`, and comparing outputs with tolerances.

use std::path::{Path, PathBuf};

use onnx_proto::{
    type_proto, MapProto, ModelProto, OptionalProto, SequenceProto, TensorProto, ValueInfoProto,
};
use onnx_ref::{Session, Tensor, Value};

/// The shared test-data directory (`ONNX_OPT_SHARED` or `../shared` beside the repo).
pub fn shared_dir() -> PathBuf {
    let dir = std::env::var_os("ONNX_OPT_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared")).to_path_buf()
        });
    assert!(
        dir.join("onnx-backend").is_dir() && dir.join("models").is_dir(),
        "test data not found at {}: set ONNX_OPT_SHARED to the shared directory",
        dir.display()
    );
    dir
}

/// Subdirectories of `dir` holding a `model.onnx`, sorted.
pub fn test_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("model.onnx").is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Loads a model with its external data inlined.
pub fn load_model(path: &Path) -> Result<ModelProto, String> {
    let loaded = onnx_proto::load_model(path).map_err(|e| e.to_string())?;
    let mut model = loaded.model;
    onnx_proto::inline_external_data(&mut model, &loaded.dir, &loaded.path)
        .map_err(|e| e.to_string())?;
    Ok(model)
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Tensor,
    Sequence,
    Optional,
    Map,
}

fn kind_of(vi: Option<&ValueInfoProto>) -> Kind {
    match vi
        .and_then(|v| v.r#type.as_ref())
        .and_then(|t| t.value.as_ref())
    {
        Some(type_proto::Value::SequenceType(_)) => Kind::Sequence,
        Some(type_proto::Value::OptionalType(_)) => Kind::Optional,
        Some(type_proto::Value::MapType(_)) => Kind::Map,
        _ => Kind::Tensor,
    }
}

fn load_value(path: &Path, kind: Kind) -> Result<(Option<String>, Value), String> {
    let err = |e: String| format!("{}: {e}", path.display());
    match kind {
        Kind::Tensor => {
            let t: TensorProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            let name = t.name.clone().filter(|n| !n.is_empty());
            Ok((
                name,
                Value::Tensor(Tensor::from_proto(&t).map_err(|e| err(e.to_string()))?),
            ))
        }
        Kind::Sequence => {
            let s: SequenceProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            let name = s.name.clone().filter(|n| !n.is_empty());
            Ok((
                name,
                Value::from_sequence_proto(&s).map_err(|e| err(e.to_string()))?,
            ))
        }
        Kind::Optional => {
            let o: OptionalProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            let name = o.name.clone().filter(|n| !n.is_empty());
            Ok((
                name,
                Value::from_optional_proto(&o).map_err(|e| err(e.to_string()))?,
            ))
        }
        Kind::Map => {
            let m: MapProto = onnx_proto::decode_file(path).map_err(|e| err(e.to_string()))?;
            let name = m.name.clone().filter(|n| !n.is_empty());
            Ok((
                name,
                Value::from_map_proto(&m).map_err(|e| err(e.to_string()))?,
            ))
        }
    }
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let idx = name
                        .strip_prefix(prefix)?
                        .strip_suffix(".pb")?
                        .parse()
                        .ok()?;
                    Some((idx, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// Values by graph input or output name, in order.
pub type NamedValues = Vec<(String, Value)>;

/// The feeds and expected outputs of one `test_data_set_N`.
pub fn load_data_set(model: &ModelProto, set: &Path) -> Result<(NamedValues, NamedValues), String> {
    let graph = model.graph.as_ref().ok_or("model has no graph")?;
    let inits: Vec<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let free_inputs: Vec<&ValueInfoProto> = graph
        .input
        .iter()
        .filter(|i| !inits.contains(&i.name.as_deref().unwrap_or("")))
        .collect();
    let mut feeds = Vec::new();
    for (i, path) in numbered(set, "input_").into_iter().enumerate() {
        let vi = free_inputs.get(i).copied();
        let (_, value) = load_value(&path, kind_of(vi))?;
        let name = vi
            .and_then(|v| v.name.clone())
            .ok_or_else(|| format!("{}: more input files than graph inputs", path.display()))?;
        feeds.push((name, value));
    }
    let mut expected = Vec::new();
    for (i, path) in numbered(set, "output_").into_iter().enumerate() {
        let vi = graph.output.get(i);
        let (_, value) = load_value(&path, kind_of(vi))?;
        let name = vi.and_then(|v| v.name.clone()).unwrap_or_default();
        expected.push((name, value));
    }
    Ok((feeds, expected))
}

/// Compares two values: same kind, dtype and shape; numbers within `atol + rtol * |expected|`
/// (NaN equals NaN); everything else exactly.
pub fn compare(expected: &Value, actual: &Value, rtol: f64, atol: f64) -> Result<(), String> {
    match (expected, actual) {
        (Value::Tensor(e), Value::Tensor(a)) => compare_tensors(e, a, rtol, atol),
        (Value::Sequence(e), Value::Sequence(a)) => {
            if e.items.len() != a.items.len() {
                return Err(format!(
                    "sequence length {} != expected {}",
                    a.items.len(),
                    e.items.len()
                ));
            }
            for (i, (x, y)) in e.items.iter().zip(&a.items).enumerate() {
                compare(x, y, rtol, atol).map_err(|m| format!("sequence item {i}: {m}"))?;
            }
            Ok(())
        }
        (Value::Optional(e), Value::Optional(a)) => match (e, a) {
            (None, None) => Ok(()),
            (Some(x), Some(y)) => compare(x, y, rtol, atol),
            _ => Err(format!(
                "optional presence differs: expected {}, got {}",
                expected.kind(),
                actual.kind()
            )),
        },
        (Value::Map(e), Value::Map(a)) => {
            compare_tensors(&e.keys, &a.keys, 0.0, 0.0)?;
            for (x, y) in e.values.iter().zip(&a.values) {
                compare(x, y, rtol, atol)?;
            }
            Ok(())
        }
        _ => Err(format!(
            "expected {}, got {}",
            expected.kind(),
            actual.kind()
        )),
    }
}

fn compare_tensors(e: &Tensor, a: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if e.dtype() != a.dtype() {
        return Err(format!("dtype {} != expected {}", a.dtype(), e.dtype()));
    }
    if e.shape() != a.shape() {
        return Err(format!("shape {:?} != expected {:?}", a.shape(), e.shape()));
    }
    match (e, a) {
        (Tensor::Str(x), Tensor::Str(y)) => {
            if let Some((i, (p, q))) = x
                .iter()
                .zip(y.iter())
                .enumerate()
                .find(|(_, (p, q))| p != q)
            {
                return Err(format!("element {i}: {q:?} != expected {p:?}"));
            }
            Ok(())
        }
        (Tensor::C64(x), Tensor::C64(y)) => close_all(
            x.iter().flat_map(|c| [c.re as f64, c.im as f64]),
            y.iter().flat_map(|c| [c.re as f64, c.im as f64]),
            rtol,
            atol,
        ),
        (Tensor::C128(x), Tensor::C128(y)) => close_all(
            x.iter().flat_map(|c| [c.re, c.im]),
            y.iter().flat_map(|c| [c.re, c.im]),
            rtol,
            atol,
        ),
        _ => {
            let x = e.to_f64_vec().map_err(|m| m.to_string())?;
            let y = a.to_f64_vec().map_err(|m| m.to_string())?;
            if e.dtype().is_float() {
                close_all(x.into_iter(), y.into_iter(), rtol, atol)
            } else {
                close_all(x.into_iter(), y.into_iter(), 0.0, 0.0)
            }
        }
    }
}

fn close_all(
    e: impl Iterator<Item = f64>,
    a: impl Iterator<Item = f64>,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    let mut worst: Option<(usize, f64, f64, f64)> = None;
    let mut bad = 0usize;
    for (i, (p, q)) in e.zip(a).enumerate() {
        let ok = (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= atol + rtol * p.abs();
        if !ok {
            bad += 1;
            let err = if q.is_nan() || p.is_nan() {
                f64::INFINITY
            } else {
                (p - q).abs()
            };
            if worst.is_none_or(|w| err > w.3) {
                worst = Some((i, p, q, err));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, p, q, _)) => Err(format!(
            "{bad} elements differ; worst at {i}: {q} vs expected {p}"
        )),
    }
}

/// Runs every data set of a test directory; `Err` has the first failure's reason.
pub fn run_test_dir(dir: &Path, rtol: f64, atol: f64) -> Result<usize, String> {
    let model = load_model(&dir.join("model.onnx"))?;
    let session = Session::new(&model).map_err(|e| format!("session: {e}"))?;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_"))
        })
        .collect();
    sets.sort();
    if sets.is_empty() {
        return Err("no test_data_set_N directories".into());
    }
    for set in &sets {
        let set_name = set
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (feeds, expected) = load_data_set(&model, set)?;
        let outputs = session
            .run(feeds)
            .map_err(|e| format!("{set_name}: run: {e}"))?;
        if outputs.len() < expected.len() {
            return Err(format!(
                "{set_name}: {} outputs, expected {}",
                outputs.len(),
                expected.len()
            ));
        }
        for ((name, want), (_, got)) in expected.iter().zip(&outputs) {
            compare(want, got, rtol, atol)
                .map_err(|m| format!("{set_name}: output '{name}': {m}"))?;
        }
    }
    Ok(sets.len())
}
