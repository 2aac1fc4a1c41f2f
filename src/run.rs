//! `onnx-opt run`: run a model in the reference interpreter on inputs read from files (or seeded
//! random inputs), write each output as a test-data file, print a summary per output, and time
//! repeated inference. Input files are test-data `.pb` files or NumPy `.npy` files ([`npy`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use onnx_proto::{type_proto, ModelProto, TypeProto};
use onnx_ref::{DType, Profile, Session, Tensor, Value};

use crate::Error;

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct RunConfig {
    /// `NAME=FILE.pb` pairs.
    pub inputs: Vec<(String, PathBuf)>,
    /// Fill inputs not given with seeded random values.
    pub random_inputs: bool,
    /// Values of symbolic dims for random inputs.
    pub dims: BTreeMap<String, i64>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Write `output_i.pb` files here.
    pub output_dir: Option<PathBuf>,
    /// Run inference this many times and report the median (0 or 1: once).
    pub repeat: usize,
    /// Time every node and report the totals per operator type.
    pub profile: bool,
}

/// One output's summary.
#[derive(Debug, Clone)]
pub struct OutputSummary {
    /// Output name.
    pub name: String,
    /// Kind and type (`float[2, 4]`, `sequence`, ...).
    pub kind: String,
    /// Min, max and mean of a tensor.
    pub stats: String,
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Each output, in the graph's order.
    pub outputs: Vec<OutputSummary>,
    /// Median inference time over the repeats, when repeated.
    pub median_ms: Option<f64>,
    /// Time per operator type over all runs, when profiling was asked for.
    pub profile: Option<Profile>,
}

fn run_err(model: &Path, message: String) -> Error {
    Error::Run {
        path: model.to_path_buf(),
        message,
    }
}

/// Runs `model_path` as configured.
pub fn run_file(model_path: &Path, cfg: &RunConfig) -> Result<RunOutcome, Error> {
    let loaded = crate::model::load_ir(model_path)?;
    let model = &loaded.proto.model;
    let session = Session::new(model).map_err(|e| run_err(model_path, e.to_string()))?;
    let inputs = read_inputs(model_path, model, cfg)?;
    let mut profile = cfg.profile.then(Profile::default);
    let run_once = |profile: Option<&mut Profile>| {
        let result = match profile {
            Some(p) => session.run_profiled(inputs.clone(), p),
            None => session.run(inputs.clone()),
        };
        result.map_err(|e| run_err(model_path, e.to_string()))
    };
    let start = Instant::now();
    let outputs = run_once(profile.as_mut())?;
    let mut times = vec![start.elapsed().as_secs_f64() * 1e3];
    for _ in 1..cfg.repeat.max(1) {
        let t = Instant::now();
        run_once(profile.as_mut())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let median_ms = (cfg.repeat > 1).then(|| median(&mut times));
    if let Some(dir) = &cfg.output_dir {
        std::fs::create_dir_all(dir).map_err(|source| onnx_proto::Error::Io {
            path: dir.clone(),
            source,
        })?;
        for (i, (name, value)) in outputs.iter().enumerate() {
            write_value(&dir.join(format!("output_{i}.pb")), name, value)?;
        }
    }
    Ok(RunOutcome {
        outputs: outputs
            .iter()
            .map(|(name, v)| OutputSummary {
                name: name.clone(),
                kind: describe(v),
                stats: stats(v),
            })
            .collect(),
        median_ms,
        profile,
    })
}

/// The profile as a table: operator, node runs, total ms, share of the total.
pub fn render_profile(profile: &Profile) -> String {
    let total = profile.total().as_secs_f64();
    let mut out = format!(
        "{:<32} {:>8} {:>12} {:>7}\n",
        "op", "runs", "total ms", "share"
    );
    for (domain, op, runs, time) in profile.by_op() {
        let name = if domain.is_empty() {
            op.to_string()
        } else {
            format!("{domain}::{op}")
        };
        let secs = time.as_secs_f64();
        let share = if total > 0.0 {
            100.0 * secs / total
        } else {
            0.0
        };
        out.push_str(&format!(
            "{name:<32} {runs:>8} {:>12.3} {share:>6.1}%\n",
            secs * 1e3
        ));
    }
    out
}

/// The median of a non-empty list (the mean of the two middle values for an even count).
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    // The two middle values: the same one for an odd count.
    let lower = times.len().saturating_sub(1) / 2;
    match (times.get(lower), times.get(times.len() / 2)) {
        (Some(a), Some(b)) => (a + b) / 2.0,
        _ => f64::NAN,
    }
}

fn read_inputs(
    model_path: &Path,
    model: &ModelProto,
    cfg: &RunConfig,
) -> Result<Vec<(String, Value)>, Error> {
    let graph = model.graph.clone().unwrap_or_default();
    let declared: BTreeMap<&str, Option<&TypeProto>> = fed_inputs(&graph)
        .into_iter()
        .map(|v| (v.name(), v.r#type.as_ref()))
        .collect();
    let mut given = BTreeMap::new();
    for (name, file) in &cfg.inputs {
        let Some(ty) = declared.get(name.as_str()) else {
            return Err(run_err(
                model_path,
                format!("the model has no input named '{name}'"),
            ));
        };
        given.insert(name.clone(), read_input(name, file, *ty)?);
    }
    let random = if cfg.random_inputs {
        onnx_ref::random_inputs(model, cfg.seed, &cfg.dims)
            .map_err(|e| run_err(model_path, e.to_string()))?
    } else {
        Vec::new()
    };
    let mut inputs = Vec::new();
    for &name in declared.keys() {
        if let Some(v) = given.remove(name) {
            inputs.push((name.to_string(), v));
        } else if let Some((_, v)) = random.iter().find(|(n, _)| n == name) {
            inputs.push((name.to_string(), v.clone()));
        } else {
            return Err(run_err(
                model_path,
                format!(
                    "no value for input '{name}': give --input {name}=FILE.pb (or FILE.npy) or --random-inputs"
                ),
            ));
        }
    }
    Ok(inputs)
}

/// The graph inputs a caller feeds: those that are not initializers (below IR 4 initializers
/// are also listed as inputs).
fn fed_inputs(graph: &onnx_proto::GraphProto) -> Vec<&onnx_proto::ValueInfoProto> {
    let init: std::collections::BTreeSet<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    graph
        .input
        .iter()
        .filter(|v| !init.contains(v.name()))
        .collect()
}

/// Reads the value of graph input `name` from `file`. A `.npy` file must hold the element type
/// the input declares (the error names the input, the file and the file's `descr`).
fn read_input(name: &str, file: &Path, ty: Option<&TypeProto>) -> Result<Value, Error> {
    if !npy::is_npy_path(file) {
        return read_value(file, ty);
    }
    let bad = |message: String| Error::Run {
        path: file.to_path_buf(),
        message,
    };
    let declared = match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t.elem_type.and_then(DType::from_code),
        None => None,
        Some(_) => {
            return Err(bad(format!(
                "input '{name}' is not a tensor; a .npy file holds one tensor"
            )))
        }
    };
    let npy = npy::read_npy(file)?;
    if let Some(want) = declared {
        let got = npy.tensor.dtype();
        if got != want {
            return Err(bad(format!(
                "input '{name}' is declared {}, but the file holds {} (descr '{}')",
                want.name().to_ascii_lowercase(),
                got.name().to_ascii_lowercase(),
                npy.descr
            )));
        }
    }
    Ok(Value::Tensor(npy.tensor))
}

/// Reads a test-data file as the declared type requires (TensorProto, SequenceProto or
/// OptionalProto), or a `.npy` file as a tensor.
pub fn read_value(path: &Path, ty: Option<&TypeProto>) -> Result<Value, Error> {
    let bad = |message: String| Error::Run {
        path: path.to_path_buf(),
        message,
    };
    if npy::is_npy_path(path) {
        return Ok(Value::Tensor(npy::read_npy(path)?.tensor));
    }
    match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::SequenceType(_)) => {
            let p: onnx_proto::SequenceProto = onnx_proto::decode_file(path)?;
            Value::from_sequence_proto(&p).map_err(|e| bad(e.to_string()))
        }
        Some(type_proto::Value::OptionalType(_)) => {
            let p: onnx_proto::OptionalProto = onnx_proto::decode_file(path)?;
            Value::from_optional_proto(&p).map_err(|e| bad(e.to_string()))
        }
        _ => {
            let p: onnx_proto::TensorProto = onnx_proto::decode_file(path)?;
            Ok(Value::Tensor(
                Tensor::from_proto(&p).map_err(|e| bad(e.to_string()))?,
            ))
        }
    }
}

fn write_value(path: &Path, name: &str, value: &Value) -> Result<(), Error> {
    let unsupported = || Error::Run {
        path: path.to_path_buf(),
        message: format!(
            "output '{name}' ({}) cannot be written as a test-data file",
            describe(value)
        ),
    };
    match value {
        Value::Tensor(t) => onnx_proto::encode_to_file(&t.to_proto(name), path)?,
        Value::Sequence(_) => onnx_proto::encode_to_file(
            &value.to_sequence_proto(name).ok_or_else(unsupported)?,
            path,
        )?,
        Value::Optional(_) => onnx_proto::encode_to_file(
            &value.to_optional_proto(name).ok_or_else(unsupported)?,
            path,
        )?,
        Value::Map(_) => return Err(unsupported()),
    }
    Ok(())
}

fn describe(v: &Value) -> String {
    match v {
        Value::Tensor(t) => format!("{}{:?}", t.dtype().name().to_ascii_lowercase(), t.shape()),
        other => other.kind(),
    }
}

fn stats(v: &Value) -> String {
    let Value::Tensor(t) = v else {
        return String::new();
    };
    let Ok(x) = t.to_f64_vec() else {
        return String::new();
    };
    if x.is_empty() {
        return "empty".into();
    }
    let finite: Vec<f64> = x.iter().copied().filter(|v| v.is_finite()).collect();
    let nonfinite = x.len() - finite.len();
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
    let mut s = format!("min {min:.6} max {max:.6} mean {mean:.6}");
    if nonfinite > 0 {
        s.push_str(&format!(" ({nonfinite} NaN/Inf)"));
    }
    s
}

/// NumPy `.npy` input files.
pub mod npy;

/// The input sets of a test-data directory, for a model: `dir` holds `input_0.pb`,
/// `input_1.pb`, ... (one set, the backend suite's `test_data_set_N` layout), or
/// `test_data_set_*` directories holding them (one set each, in name order). The files are
/// the model's graph inputs that are not initializers, in order; each is read as its declared
/// type requires.
pub fn read_data_sets(
    model: &onnx_proto::ModelProto,
    dir: &Path,
) -> Result<Vec<crate::verify::InputSet>, Error> {
    let bad = |message: String| Error::Run {
        path: dir.to_path_buf(),
        message,
    };
    let listing = |d: &Path| -> Result<Vec<std::path::PathBuf>, Error> {
        let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(d)
            .map_err(|e| bad(format!("cannot read the directory: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        v.sort();
        Ok(v)
    };
    let entries = listing(dir)?;
    let is_input = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("input_") && n.ends_with(".pb"))
    };
    let set_dirs: Vec<std::path::PathBuf> = if entries.iter().any(|p| is_input(p)) {
        vec![dir.to_path_buf()]
    } else {
        entries
            .into_iter()
            .filter(|p| {
                p.is_dir()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("test_data_set"))
            })
            .collect()
    };
    if set_dirs.is_empty() {
        return Err(bad(
            "no input_N.pb files and no test_data_set_* directories".into(),
        ));
    }
    let graph = model.graph.clone().unwrap_or_default();
    let real = fed_inputs(&graph);
    let mut sets = Vec::new();
    for d in set_dirs {
        let mut set = Vec::new();
        for (i, vi) in real.iter().enumerate() {
            let file = d.join(format!("input_{i}.pb"));
            if !file.is_file() {
                return Err(Error::Run {
                    path: file,
                    message: format!("missing: the value of graph input '{}'", vi.name()),
                });
            }
            set.push((
                vi.name().to_string(),
                read_value(&file, vi.r#type.as_ref())?,
            ));
        }
        let extra = d.join(format!("input_{}.pb", real.len()));
        if extra.is_file() {
            return Err(Error::Run {
                path: extra,
                message: format!("the model has {} graph inputs", real.len()),
            });
        }
        sets.push(set);
    }
    Ok(sets)
}
