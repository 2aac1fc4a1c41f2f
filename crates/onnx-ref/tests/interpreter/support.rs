//! Shared helpers: loading a test directory (model + test_data_set_N),
//! running it through a `Session`, and comparing outputs with tolerances (outputs drawn at
//! random by the model are compared by dtype and shape only, see [`random_outputs`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use onnx_proto::{
    type_proto, FunctionProto, GraphProto, MapProto, ModelProto, NodeProto, OptionalProto,
    SequenceProto, TensorProto, ValueInfoProto,
};
use onnx_ref::{Session, Tensor, Value};
use onnx_schema::NodeDeterminism;

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

/// Compares two values by kind, dtype and shape only (for values drawn at random).
pub fn compare_dtype_and_shape(expected: &Value, actual: &Value) -> Result<(), String> {
    match (expected, actual) {
        (Value::Tensor(e), Value::Tensor(a)) => {
            if e.dtype() != a.dtype() {
                return Err(format!("dtype {} != expected {}", a.dtype(), e.dtype()));
            }
            if e.shape() != a.shape() {
                return Err(format!("shape {:?} != expected {:?}", a.shape(), e.shape()));
            }
            Ok(())
        }
        _ if expected.kind() == actual.kind() => Ok(()),
        _ => Err(format!(
            "expected {}, got {}",
            expected.kind(),
            actual.kind()
        )),
    }
}

/// The graph outputs of `model` whose values depend on a random draw, given the feeds of one
/// data set. The backend test data of random ops was drawn by numpy, so these outputs can
/// only be compared by dtype and shape ([`compare_dtype_and_shape`]); every other output is
/// compared by value.
///
/// A node draws at random when its schema is `NodeDeterminism::NonDeterministic` (RandomNormal,
/// RandomUniform, their `*Like` forms, Bernoulli, Multinomial), except: control flow (a node
/// with graph attributes) draws only if a node of its bodies does; an op with a function body
/// (AffineGrid) draws only if its body does; and Dropout draws only with a `training_mode`
/// input that is true (a feed, initializer or Constant) or whose value is not known here.
/// Ops onnx leaves unclassified (`Unknown`, e.g. DepthToSpace) are treated as deterministic.
/// Randomness propagates: every value computed from a random value is random too.
pub fn random_outputs(model: &ModelProto, feeds: &NamedValues) -> BTreeSet<String> {
    let Some(graph) = model.graph.as_ref() else {
        return BTreeSet::new();
    };
    let opsets: BTreeMap<String, i64> = model
        .opset_import
        .iter()
        .map(|o| {
            let domain = o.domain.as_deref().unwrap_or("");
            (
                onnx_schema::normalize_domain(domain).to_string(),
                o.version.unwrap_or(0),
            )
        })
        .collect();
    let mut known: BTreeMap<String, bool> = BTreeMap::new();
    for (name, value) in feeds {
        if let Some(b) = truth_of(value) {
            known.insert(name.clone(), b);
        }
    }
    for init in &graph.initializer {
        if let (Some(name), Ok(t)) = (init.name.clone(), Tensor::from_proto(init)) {
            if let Some(b) = truth_of(&Value::Tensor(t)) {
                known.insert(name, b);
            }
        }
    }
    for node in &graph.node {
        if node.op_type.as_deref() == Some("Constant") {
            let value = node.attribute.iter().find_map(|a| a.t.as_ref());
            if let (Some(out), Some(Ok(t))) = (node.output.first(), value.map(Tensor::from_proto)) {
                if let Some(b) = truth_of(&Value::Tensor(t)) {
                    known.insert(out.clone(), b);
                }
            }
        }
    }
    let mut tainted: BTreeSet<String> = BTreeSet::new();
    // Iterate to a fixed point: the nodes need not be in topological order.
    loop {
        let before = tainted.len();
        for node in &graph.node {
            let random = node_draws(node, &opsets, &known)
                || node_inputs(node).iter().any(|i| tainted.contains(i));
            if random {
                tainted.extend(node.output.iter().filter(|o| !o.is_empty()).cloned());
            }
        }
        if tainted.len() == before {
            break;
        }
    }
    graph
        .output
        .iter()
        .filter_map(|o| o.name.clone())
        .filter(|n| tainted.contains(n))
        .collect()
}

/// The truth value of a one-element tensor.
fn truth_of(value: &Value) -> Option<bool> {
    match value {
        Value::Tensor(t) if t.len() == 1 => t.to_f64_vec().ok().map(|v| v[0] != 0.0),
        _ => None,
    }
}

/// Every value name a node reads, including those its subgraphs read from outer scopes.
fn node_inputs(node: &NodeProto) -> Vec<String> {
    let mut names: Vec<String> = node
        .input
        .iter()
        .filter(|i| !i.is_empty())
        .cloned()
        .collect();
    for g in subgraphs(node) {
        for n in &g.node {
            names.extend(node_inputs(n));
        }
    }
    names
}

fn subgraphs(node: &NodeProto) -> Vec<&GraphProto> {
    node.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
        .collect()
}

/// Whether a node itself draws random numbers (see [`random_outputs`]).
fn node_draws(
    node: &NodeProto,
    opsets: &BTreeMap<String, i64>,
    known: &BTreeMap<String, bool>,
) -> bool {
    let bodies = subgraphs(node);
    if !bodies.is_empty() {
        return bodies
            .iter()
            .any(|g| g.node.iter().any(|n| node_draws(n, opsets, known)));
    }
    let domain = onnx_schema::normalize_domain(node.domain.as_deref().unwrap_or(""));
    let op = node.op_type.as_deref().unwrap_or("");
    if domain.is_empty() && op == "Dropout" {
        return match node.input.get(2).filter(|n| !n.is_empty()) {
            None => false,
            Some(mode) => known.get(mode).copied().unwrap_or(true),
        };
    }
    let Some(version) = opsets.get(domain).copied() else {
        return false;
    };
    let Some(schema) = onnx_schema::registry().lookup(domain, op, version) else {
        return false;
    };
    if schema.node_determinism != NodeDeterminism::NonDeterministic {
        return false;
    }
    match schema.function_body(version) {
        Some(body) => function_draws(&body, known),
        None => true,
    }
}

fn function_draws(body: &FunctionProto, known: &BTreeMap<String, bool>) -> bool {
    let opsets: BTreeMap<String, i64> = body
        .opset_import
        .iter()
        .map(|o| {
            let domain = o.domain.as_deref().unwrap_or("");
            (
                onnx_schema::normalize_domain(domain).to_string(),
                o.version.unwrap_or(0),
            )
        })
        .collect();
    body.node.iter().any(|n| node_draws(n, &opsets, known))
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
        let random = random_outputs(&model, &feeds);
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
            let checked = if random.contains(name) {
                compare_dtype_and_shape(want, got)
            } else {
                compare(want, got, rtol, atol)
            };
            checked.map_err(|m| format!("{set_name}: output '{name}': {m}"))?;
        }
    }
    Ok(sets.len())
}
