//! `onnx_opt._native`: the Python package's native module, a thin PyO3 layer over the
//! onnx-opt library. The public API is `python/onnx_opt/__init__.py`, which takes models as
//! `onnx.ModelProto`, bytes or paths and turns errors into its exception classes; this module
//! takes a path or bytes, releases the GIL while the library works, and raises `NativeError`
//! with `(kind, message, fields)`, where `kind` names the Python class (`mismatch`, `rule`,
//! `model`, `option`, `error`) and `fields` is a dict of that class's attributes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use onnx_opt::{Error, Loaded, Optimizer, Pipeline};
use prost::Message;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};

create_exception!(
    _native,
    NativeError,
    PyException,
    "An error of the native layer: args are (kind, message, fields)."
);

/// Protobuf's limit on one message: a model larger than this cannot be returned as bytes or
/// a `ModelProto`, only saved with external data.
const PROTOBUF_LIMIT: usize = (1 << 31) - 1;

/// A model given to the native layer: a file, or the bytes of one.
enum Source {
    Path(PathBuf),
    Bytes {
        /// The bytes of a Python `bytes` object, not copied.
        data: Bytes,
        /// Where the model's external data files are, when it has some.
        base_dir: Option<PathBuf>,
    },
}

impl Source {
    fn new(
        path: Option<PathBuf>,
        data: Option<PyBackedBytes>,
        base_dir: Option<PathBuf>,
    ) -> PyResult<Source> {
        match (path, data) {
            (Some(p), None) => Ok(Source::Path(p)),
            (None, Some(data)) => Ok(Source::Bytes {
                data: Bytes::from_owner(data),
                base_dir,
            }),
            _ => Err(NativeError::new_err((
                "option",
                "give the model as exactly one of a path or bytes".to_string(),
                (),
            ))),
        }
    }

    /// The model's name in messages.
    fn origin(&self) -> PathBuf {
        match self {
            Source::Path(p) => p.clone(),
            Source::Bytes { .. } => PathBuf::from("<bytes>"),
        }
    }

    fn load(&self) -> Result<Loaded, Error> {
        match self {
            Source::Path(p) => onnx_opt::load_ir(p),
            Source::Bytes { data, base_dir } => {
                onnx_opt::load_ir_bytes(data.clone(), Path::new("<bytes>"), base_dir.as_deref())
            }
        }
    }
}

/// A library error as a `NativeError` whose kind and fields the Python layer turns into its
/// exception classes.
fn to_py(err: Error) -> PyErr {
    let mut message = render(&err);
    // The library names these options as the command line spells them.
    for (flag, argument) in [
        ("--skip ", "skip_rules: "),
        ("--input-shape ", "input_shapes: "),
        ("--same-dim ", "same_dims: "),
        ("--assume ", "assume: "),
        ("--outputs ", "outputs: "),
    ] {
        if let Some(rest) = message.strip_prefix(flag) {
            message = format!("{argument}{rest}");
        }
    }
    Python::attach(|py| {
        let fields = PyDict::new(py);
        let kind = fill_fields(&err, &fields).unwrap_or("error");
        NativeError::new_err((kind, message, fields.unbind()))
    })
}

/// The error and its sources, one per line, as the command line prints them.
fn render(err: &Error) -> String {
    let mut s = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        s.push_str(&format!("\n  caused by: {e}"));
        source = e.source();
    }
    s
}

/// Sets the fields of the Python exception for `err`; returns its kind.
fn fill_fields(err: &Error, f: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match err {
        Error::Mismatch(m) => {
            f.set_item("output", &m.mismatch.output)?;
            f.set_item("max_difference", m.mismatch.max_difference)?;
            f.set_item("culprit", m.culprit.as_deref())?;
            f.set_item("trial", m.mismatch.trial)?;
            f.set_item("on_data_set", m.mismatch.data_set)?;
            f.set_item("detail", &m.mismatch.detail)?;
            "mismatch"
        }
        Error::Rules(errors) => {
            let mut all = Vec::new();
            for e in errors {
                for d in e.diagnostics().iter() {
                    all.push((
                        e.path().to_string(),
                        d.span.line,
                        d.span.col,
                        d.message.clone(),
                    ));
                }
            }
            let first = all.first().cloned();
            f.set_item("file", first.as_ref().map(|d| d.0.clone()))?;
            f.set_item("line", first.as_ref().map(|d| d.1))?;
            f.set_item("column", first.as_ref().map(|d| d.2))?;
            f.set_item("reason", first.as_ref().map(|d| d.3.clone()))?;
            f.set_item("errors", all)?;
            "rule"
        }
        Error::RuleFile { path, source } => {
            f.set_item("file", path.display().to_string())?;
            f.set_item("line", None::<usize>)?;
            f.set_item("column", None::<usize>)?;
            f.set_item("reason", source.to_string())?;
            f.set_item("errors", Vec::<(String, usize, usize, String)>::new())?;
            "rule"
        }
        Error::RustRule { rule, source } => {
            f.set_item("file", format!("rust rule {rule}"))?;
            f.set_item("line", None::<usize>)?;
            f.set_item("column", None::<usize>)?;
            f.set_item("reason", source.to_string())?;
            f.set_item("errors", Vec::<(String, usize, usize, String)>::new())?;
            "rule"
        }
        Error::Check { path, errors } => {
            let first = errors.first();
            let node = first.and_then(|e| e.node());
            f.set_item("file", path.display().to_string())?;
            f.set_item(
                "node",
                node.and_then(|n| n.name.as_ref().map(|s| s.to_string())),
            )?;
            f.set_item("node_index", node.map(|n| n.index))?;
            f.set_item("op", node.map(|n| n.op_type.to_string()))?;
            f.set_item("reason", first.map(|e| e.innermost().to_string()))?;
            let problems: Vec<String> = errors.iter().map(ToString::to_string).collect();
            f.set_item("problems", problems)?;
            "model"
        }
        // Refusals of `reuse_external_data` for this output path: a choice of the caller's.
        Error::Proto(
            onnx_opt::proto::Error::ReuseOutside { .. }
            | onnx_opt::proto::Error::ReuseInPlace { .. }
            | onnx_opt::proto::Error::DataFileInUse { .. },
        ) => "option",
        Error::Proto(_) | Error::Text { .. } | Error::Ir { .. } | Error::Run { .. } => {
            let file = match err {
                Error::Text { path, .. } | Error::Ir { path, .. } | Error::Run { path, .. } => {
                    Some(path.display().to_string())
                }
                _ => None,
            };
            f.set_item("file", file)?;
            f.set_item("node", None::<String>)?;
            f.set_item("node_index", None::<usize>)?;
            f.set_item("op", None::<String>)?;
            f.set_item("reason", render(err))?;
            f.set_item("problems", vec![render(err)])?;
            "model"
        }
        Error::BadInputShape { .. }
        | Error::BadDim { .. }
        | Error::BadAssumption { .. }
        | Error::BadOutput { .. }
        | Error::UnknownSkip { .. }
        | Error::Pipeline { .. } => "option",
        _ => "error",
    })
}

fn option_error(message: String) -> PyErr {
    NativeError::new_err(("option", message, ()))
}

/// What `optimize` and `convert` take besides the model (`convert` reads only `check`,
/// `require_check`, `skip` and `dims`; the default is used for the rest).
#[derive(Default)]
struct Options {
    pipeline: String,
    check: usize,
    require_check: bool,
    rules: Vec<PathBuf>,
    rules_text: Vec<(String, String)>,
    builtin_rules: bool,
    target_opset: Option<i64>,
    target: Option<String>,
    input_shapes: Vec<(String, Vec<i64>)>,
    same_dims: Vec<(String, String)>,
    assume: Vec<(String, String)>,
    skip: Vec<String>,
    outputs: Vec<String>,
    cost: Option<String>,
    fold: bool,
    unsafe_rules: bool,
    dims: Vec<(String, i64)>,
}

impl Options {
    fn optimizer(&self, convert_to: Option<i64>) -> Result<Optimizer, PyErr> {
        let mut o = match convert_to {
            Some(opset) => Optimizer::converter(opset),
            None => Optimizer::new()
                .pipeline(Pipeline::by_name_or_file(&self.pipeline).map_err(to_py)?)
                .builtin_rules(self.builtin_rules)
                .unsafe_rules(self.unsafe_rules),
        };
        if let Some(t) = &self.target {
            if self.pipeline != "default" {
                return Err(option_error(format!(
                    "target '{t}' runs its own pipeline: give target or pipeline, not both"
                )));
            }
            o = o.target(t.parse::<onnx_opt::Target>().map_err(to_py)?);
        }
        o = o.check(self.check).require_check(self.require_check);
        for path in &self.rules {
            o = o.rules_file(path).map_err(to_py)?;
        }
        for (origin, text) in &self.rules_text {
            o = o.rules_text(origin, text);
        }
        if let Some(t) = self.target_opset {
            o = o.target_opset(t);
        }
        for (name, other) in &self.same_dims {
            o = o.same_dim(name, other);
        }
        for (name, what) in &self.assume {
            let what: onnx_opt::Assumption = what
                .parse()
                .map_err(|e: String| option_error(format!("assume: {name}: {e}")))?;
            o = o.assume(name, what);
        }
        for (name, dims) in &self.input_shapes {
            o = o.input_shape(name, dims);
        }
        for s in &self.skip {
            o = o.skip(s);
        }
        if !self.outputs.is_empty() {
            let names: Vec<&str> = self.outputs.iter().map(String::as_str).collect();
            o = o.outputs(&names);
        }
        match self.cost.as_deref() {
            None => {}
            Some("latency") => o = o.cost(onnx_opt::CostKind::Latency),
            Some("nodes") => o = o.cost(onnx_opt::CostKind::NodeCount),
            Some(other) => {
                return Err(option_error(format!(
                    "cost '{other}': expected 'latency' or 'nodes'"
                )))
            }
        }
        if !self.fold {
            let mut fold = o.pipeline_spec().fold_options();
            fold.enabled = false;
            o = o.fold(fold);
        }
        for (name, value) in &self.dims {
            o = o.dim(name, *value);
        }
        Ok(o)
    }
}

/// The result of `optimize`/`convert` before it crosses back: the model (when not saved)
/// and the JSON report.
struct Done {
    model: Option<onnx_opt::proto::ModelProto>,
    report: String,
}

fn optimize_source(
    source: &Source,
    output: Option<&Path>,
    optimizer: &Optimizer,
    save: &onnx_opt::OutputOptions,
) -> Result<Done, Error> {
    if let (Source::Path(input), Some(out)) = (source, output) {
        let outcome = onnx_opt::optimize_file(input, out, optimizer, save, &|_| {})?;
        return Ok(Done {
            model: None,
            report: serde_json::to_string(&outcome).map_err(json_error)?,
        });
    }
    let t0 = std::time::Instant::now();
    let mut loaded = source.load()?;
    let origin = source.origin();
    if let (true, Some(out)) = (save.reuse_external_data && loaded.had_external, output) {
        // Refused now rather than after the optimization (the save checks it again).
        onnx_opt::proto::check_external_reuse(&loaded.proto.model, out)?;
    }
    onnx_opt::sort_nodes(&origin, &mut loaded.model)?;
    onnx_opt::check_ir(&origin, &loaded.model)?;
    let optimized = optimizer.optimize(&loaded.model)?;
    let proto = optimized.model.to_proto();
    let mut report = serde_json::to_value(&optimized.report).map_err(json_error)?;
    let size_before = loaded.proto.file_size;
    let Some(out) = output else {
        let obj = report.as_object_mut().expect("a report is a JSON object");
        obj.insert("size_before".into(), size_before.into());
        obj.insert("size_after".into(), (proto.encoded_len() as u64).into());
        obj.insert("time_ms".into(), (t0.elapsed().as_secs_f64() * 1e3).into());
        return Ok(Done {
            model: Some(proto),
            report: report.to_string(),
        });
    };
    let big = proto.encoded_len() > PROTOBUF_LIMIT;
    let threshold = save
        .external_threshold
        .or((loaded.had_external || big).then_some(1024));
    let options = onnx_opt::proto::SaveOptions {
        external: threshold.map(|t| onnx_opt::proto::ExternalDataOptions::for_model(out, t)),
        reuse_external_data: save.reuse_external_data,
        ..Default::default()
    };
    onnx_opt::save_proto(&proto, None, out, &options)?;
    let size_after = std::fs::metadata(out)
        .map_err(|source| onnx_opt::proto::Error::Io {
            path: out.to_path_buf(),
            source,
        })?
        .len();
    let obj = report.as_object_mut().expect("a report is a JSON object");
    obj.insert("input".into(), origin.display().to_string().into());
    obj.insert("output".into(), out.display().to_string().into());
    obj.insert("size_before".into(), size_before.into());
    obj.insert("size_after".into(), size_after.into());
    obj.insert("time_ms".into(), (t0.elapsed().as_secs_f64() * 1e3).into());
    Ok(Done {
        model: None,
        report: report.to_string(),
    })
}

fn json_error(e: serde_json::Error) -> Error {
    Error::CheckSkipped {
        reason: format!("the report could not be written as JSON: {e}"),
    }
}

/// Encodes a model into a new Python bytes object, or explains why it cannot be returned.
fn model_bytes<'py>(
    py: Python<'py>,
    model: &onnx_opt::proto::ModelProto,
) -> PyResult<Bound<'py, PyBytes>> {
    let len = model.encoded_len();
    if len > PROTOBUF_LIMIT {
        return Err(NativeError::new_err((
            "error",
            format!(
                "the result is {len} bytes, over protobuf's 2 GiB limit on one message: pass `output=` to save it with its tensors in external data"
            ),
            (),
        )));
    }
    PyBytes::new_with(py, len, |buf| {
        let mut slice: &mut [u8] = buf;
        model
            .encode(&mut slice)
            .map_err(|e| NativeError::new_err(("error", e.to_string(), ())))
    })
}

fn optimize_impl(
    py: Python<'_>,
    source: Source,
    output: Option<PathBuf>,
    convert_to: Option<i64>,
    options: Options,
    save: onnx_opt::OutputOptions,
) -> PyResult<(Option<Py<PyBytes>>, String)> {
    if save.reuse_external_data && output.is_none() {
        return Err(option_error(
            "reuse_external_data: the result is saved only with `output=`; without it there is no data file to reuse".into(),
        ));
    }
    let optimizer = options.optimizer(convert_to)?;
    let done = py
        .detach(|| optimize_source(&source, output.as_deref(), &optimizer, &save))
        .map_err(to_py)?;
    let model = match &done.model {
        Some(m) => Some(model_bytes(py, m)?.unbind()),
        None => None,
    };
    Ok((model, done.report))
}

/// Optimizes a model (a path or bytes); returns `(model bytes or None when saved, report
/// JSON)`.
#[pyfunction]
#[pyo3(signature = (
    path=None, data=None, base_dir=None, output=None, *,
    pipeline="default".to_string(), check=3, require_check=false, rules=vec![],
    rules_text=vec![], builtin_rules=true, target_opset=None, target=None, input_shapes=vec![],
    same_dims=vec![], assume=vec![], skip=vec![], outputs=vec![], cost=None, fold=true,
    unsafe_rules=false, dims=vec![],
    external_threshold=None, reuse_external_data=false
))]
#[allow(clippy::too_many_arguments)]
fn optimize(
    py: Python<'_>,
    path: Option<PathBuf>,
    data: Option<PyBackedBytes>,
    base_dir: Option<PathBuf>,
    output: Option<PathBuf>,
    pipeline: String,
    check: usize,
    require_check: bool,
    rules: Vec<PathBuf>,
    rules_text: Vec<(String, String)>,
    builtin_rules: bool,
    target_opset: Option<i64>,
    target: Option<String>,
    input_shapes: Vec<(String, Vec<i64>)>,
    same_dims: Vec<(String, String)>,
    assume: Vec<(String, String)>,
    skip: Vec<String>,
    outputs: Vec<String>,
    cost: Option<String>,
    fold: bool,
    unsafe_rules: bool,
    dims: Vec<(String, i64)>,
    external_threshold: Option<usize>,
    reuse_external_data: bool,
) -> PyResult<(Option<Py<PyBytes>>, String)> {
    let source = Source::new(path, data, base_dir)?;
    let options = Options {
        pipeline,
        check,
        require_check,
        rules,
        rules_text,
        builtin_rules,
        target_opset,
        target,
        input_shapes,
        same_dims,
        assume,
        skip,
        outputs,
        cost,
        fold,
        unsafe_rules,
        dims,
    };
    let save = onnx_opt::OutputOptions {
        external_threshold,
        reuse_external_data,
    };
    optimize_impl(py, source, output, None, options, save)
}

/// Converts a model to another opset; returns like `optimize`.
#[pyfunction]
#[pyo3(signature = (
    opset, path=None, data=None, base_dir=None, output=None, *, check=3, require_check=false,
    skip=vec![], dims=vec![], external_threshold=None, reuse_external_data=false
))]
#[allow(clippy::too_many_arguments)]
fn convert(
    py: Python<'_>,
    opset: i64,
    path: Option<PathBuf>,
    data: Option<PyBackedBytes>,
    base_dir: Option<PathBuf>,
    output: Option<PathBuf>,
    check: usize,
    require_check: bool,
    skip: Vec<String>,
    dims: Vec<(String, i64)>,
    external_threshold: Option<usize>,
    reuse_external_data: bool,
) -> PyResult<(Option<Py<PyBytes>>, String)> {
    let source = Source::new(path, data, base_dir)?;
    let options = Options {
        check,
        require_check,
        skip,
        dims,
        fold: true,
        ..Default::default()
    };
    let save = onnx_opt::OutputOptions {
        external_threshold,
        reuse_external_data,
    };
    optimize_impl(py, source, output, Some(opset), options, save)
}

/// The checker's problems with a model (empty when it is valid), and its warnings.
#[pyfunction]
#[pyo3(signature = (path=None, data=None, base_dir=None))]
fn check(
    py: Python<'_>,
    path: Option<PathBuf>,
    data: Option<PyBackedBytes>,
    base_dir: Option<PathBuf>,
) -> PyResult<(Vec<String>, Vec<String>)> {
    let source = Source::new(path, data, base_dir)?;
    py.detach(|| {
        let loaded = source.load()?;
        let problems = match onnx_ir::check_model(&loaded.model) {
            Ok(()) => Vec::new(),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        };
        Ok((problems, onnx_opt::checker_warnings(&loaded.model)))
    })
    .map_err(to_py)
}

/// An output of `run`: its name, its kind and its proto's bytes.
type EncodedOutput = (String, &'static str, Vec<u8>);

/// Runs a model in the reference interpreter. `inputs` are `(name, TensorProto bytes)`;
/// returns `(name, kind, proto bytes)` per output, `kind` one of `tensor`, `sequence`,
/// `optional` (the bytes of a `TensorProto`, `SequenceProto` or `OptionalProto`).
#[pyfunction]
#[pyo3(signature = (inputs, path=None, data=None, base_dir=None))]
fn run(
    py: Python<'_>,
    inputs: Vec<(String, PyBackedBytes)>,
    path: Option<PathBuf>,
    data: Option<PyBackedBytes>,
    base_dir: Option<PathBuf>,
) -> PyResult<Vec<(String, &'static str, Py<PyBytes>)>> {
    let source = Source::new(path, data, base_dir)?;
    let outputs = py.detach(|| -> Result<Vec<EncodedOutput>, Error> {
        let origin = source.origin();
        let run_error = |message: String| Error::Run {
            path: origin.clone(),
            message,
        };
        let loaded = source.load()?;
        let mut feed = Vec::with_capacity(inputs.len());
        for (name, bytes) in &inputs {
            let proto = onnx_opt::proto::TensorProto::decode(&bytes[..])
                .map_err(|e| run_error(format!("input '{name}': not a TensorProto: {e}")))?;
            let t = onnx_ref::Tensor::from_proto(&proto)
                .map_err(|e| run_error(format!("input '{name}': {e}")))?;
            feed.push((name.clone(), onnx_ref::Value::Tensor(t)));
        }
        let session = onnx_ref::Session::new(&loaded.proto.model)
            .map_err(|e| run_error(format!("the interpreter cannot run the model: {e}")))?;
        let results = session.run(feed).map_err(|e| run_error(e.to_string()))?;
        results
            .into_iter()
            .map(|(name, value)| {
                let encoded = match &value {
                    onnx_ref::Value::Tensor(t) => ("tensor", t.to_proto(&name).encode_to_vec()),
                    onnx_ref::Value::Sequence(_) => match value.to_sequence_proto(&name) {
                        Some(s) => ("sequence", s.encode_to_vec()),
                        None => return Err(run_error(format!("output '{name}': this sequence cannot be written as a SequenceProto"))),
                    },
                    onnx_ref::Value::Optional(_) => match value.to_optional_proto(&name) {
                        Some(o) => ("optional", o.encode_to_vec()),
                        None => return Err(run_error(format!("output '{name}': this optional cannot be written as an OptionalProto"))),
                    },
                    other => {
                        return Err(run_error(format!(
                            "output '{name}': a {} cannot be returned to Python",
                            other.kind()
                        )))
                    }
                };
                Ok((name, encoded.0, encoded.1))
            })
            .collect()
    })
    .map_err(to_py)?;
    Ok(outputs
        .into_iter()
        .map(|(name, kind, bytes)| (name, kind, PyBytes::new(py, &bytes).unbind()))
        .collect())
}

/// Parses, checks and proves the rules of one rule file's text. Returns one
/// `(rule, passed, instances, detail)` per rule.
#[pyfunction]
#[pyo3(signature = (text, origin="<rules>".to_string(), seed=0))]
fn rules_check(
    py: Python<'_>,
    text: String,
    origin: String,
    seed: u64,
) -> PyResult<Vec<(String, bool, usize, String)>> {
    py.detach(|| {
        let file = onnx_rules::parse_rules(&origin, &text, &Default::default())
            .map_err(|e| Error::Rules(vec![e]))?;
        let opts = onnx_prove::ProveOptions {
            seed,
            ..Default::default()
        };
        let guards = onnx_egraph::GuardRegistry::default();
        Ok(file
            .rules
            .iter()
            .map(|r| {
                let v = onnx_prove::prove_rule(r, &guards, &opts);
                let passed = v.passed(&opts);
                let fired = v.checks.iter().map(|c| c.fired).sum();
                let detail = match &v.failure {
                    Some(f) => format!("opset {}: {}\n{}", f.opset, f.detail, f.instance),
                    None if passed => String::new(),
                    None => onnx_prove::render_verdicts(std::slice::from_ref(&v), &opts),
                };
                (v.rule, passed, fired, detail)
            })
            .collect())
    })
    .map_err(to_py)
}

/// For each site where a rule could apply in a model: `(site, verdict)`.
#[pyfunction]
#[pyo3(signature = (rule, path=None, data=None, base_dir=None, rules=vec![], rules_text=vec![]))]
fn rules_explain(
    py: Python<'_>,
    rule: String,
    path: Option<PathBuf>,
    data: Option<PyBackedBytes>,
    base_dir: Option<PathBuf>,
    rules: Vec<PathBuf>,
    rules_text: Vec<(String, String)>,
) -> PyResult<Vec<(String, String)>> {
    let source = Source::new(path, data, base_dir)?;
    py.detach(|| {
        let sel = onnx_opt::RuleSelection {
            no_builtin: false,
            files: rules,
            float_unsafe: true,
            version: true,
            targets: true,
        };
        let mut set = onnx_opt::load_rule_set(&sel)?;
        for (origin, text) in &rules_text {
            set.add_file(
                onnx_rules::parse_rules(origin, text, &Default::default())
                    .map_err(|e| Error::Rules(vec![e]))?,
            );
        }
        if !set.rules().any(|r| r.name == rule) {
            return Ok(Err(format!(
                "no rule named '{rule}' among the built-in rules and those given"
            )));
        }
        let loaded = source.load()?;
        let sites =
            onnx_egraph::explain_rule(&loaded.model, Arc::new(set), &rule).map_err(|e| {
                Error::Optimize {
                    path: source.origin(),
                    source: e,
                }
            })?;
        Ok(Ok(sites
            .iter()
            .map(|s| (s.site.to_string(), s.verdict.to_string()))
            .collect()))
    })
    .map_err(to_py)?
    .map_err(option_error)
}

/// The `onnx-opt` command line on `argv` (the program name first); returns its exit code.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    use std::io::Write;
    onnx_opt_cli::prepare_process();
    let args = argv.into_iter().map(Into::into).collect();
    py.detach(|| {
        let code = onnx_opt_cli::run(args);
        // Rust's stdout is line-buffered and is not flushed when Python exits.
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        code
    })
}

/// The names of the built-in pipelines.
#[pyfunction]
fn pipelines() -> Vec<String> {
    onnx_opt::BUILTIN_PIPELINES
        .iter()
        .map(|(name, _)| name.to_string())
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(optimize, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(rules_check, m)?)?;
    m.add_function(wrap_pyfunction!(rules_explain, m)?)?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(pipelines, m)?)?;
    Ok(())
}
