//! Differential fuzzing of the whole optimizer: random valid models ([`generate_case`], built
//! from the operator schemas by the prover's generator), and the oracle ([`check_case`]) that
//! optimizes one with a given [`Optimizer`](onnx_opt::Optimizer) and checks the result: it passes
//! the checker, keeps the interface, computes the same outputs in the reference interpreter,
//! is the same bytes when optimized twice, and an optimizer error is a clean `Err` (never a
//! panic).
//!
//! ```
//! use onnx_prove::fuzz::{check_case, generate_case, GenOptions, Generated, Verdict};
//!
//! let opts = GenOptions::default();
//! let mut passed = 0;
//! for seed in 0..20 {
//!     if let Generated::Case(case) = generate_case(seed, &opts) {
//!         let optimizer = onnx_opt::Optimizer::new().check(0);
//!         match check_case(&case, &optimizer) {
//!             Verdict::Failed(f) => panic!("seed {seed}: {f}\n{}", case.text()),
//!             _ => passed += 1,
//!         }
//!     }
//! }
//! assert!(passed > 0);
//! ```

mod coverage;
mod minimize;
mod oracle;

use std::collections::BTreeMap;

use onnx_ir::Model;
use onnx_proto::ModelProto;
use onnx_ref::{Session, Value};

use crate::choice::SplitMix;
use crate::gen::dag;
use crate::Error;

pub use coverage::{default_domain_ops, Coverage, Nesting};
pub use minimize::minimize;
pub use oracle::{check_case, FailedCheck, Failure, Verdict};

/// How models are generated.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Operator nodes per model, at most (constants included).
    pub max_nodes: usize,
    /// Random inputs each model is run on (the first is the data it was built with).
    pub trials: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            max_nodes: 8,
            trials: 3,
        }
    }
}

/// A model to optimize, with the inputs it is run on.
#[derive(Debug, Clone)]
pub struct FuzzCase {
    /// The seed it was generated from (0 for a model read from a file).
    pub seed: u64,
    /// The model.
    pub model: Model,
    proto: ModelProto,
    /// Graph inputs per trial; the first trial runs (checked when the case is made).
    trials: Vec<Vec<(String, Value)>>,
}

/// What became of one seed.
#[derive(Debug)]
pub enum Generated {
    /// A valid model that runs in the interpreter.
    Case(Box<FuzzCase>),
    /// The generator could not build a model (not a failure).
    Rejected(String),
    /// A model that fails the checker: a generator bug (counted against the acceptance rate).
    CheckerRejected {
        /// The model as ONNX text.
        text: String,
        /// The checker's first errors.
        errors: Vec<String>,
    },
    /// A valid model the interpreter cannot run (counted against the acceptance rate).
    NotRunnable {
        /// The model as ONNX text.
        text: String,
        /// Why.
        error: Error,
    },
}

/// Number of `u32` draws per model.
const DRAWS: usize = 4096;

fn choices(seed: u64) -> Vec<u32> {
    let mut rng = SplitMix::new(seed ^ 0xf022_f022);
    (0..DRAWS).map(|_| rng.next_u64() as u32).collect()
}

/// Generates the model of `seed`: checked by `onnx_ir::check_model` and run once in the
/// interpreter before it is returned as a case.
pub fn generate_case(seed: u64, opts: &GenOptions) -> Generated {
    let built = std::panic::catch_unwind(|| dag::generate_model(&choices(seed), opts.max_nodes));
    let built = match built {
        Ok(Ok(m)) => m,
        Ok(Err(r)) => return Generated::Rejected(r.0),
        Err(_) => return Generated::Rejected("the generator panicked".into()),
    };
    let text = print(&built.model);
    let model = match Model::from_proto(built.model.clone()) {
        Ok(m) => m,
        Err(e) => {
            return Generated::CheckerRejected {
                text,
                errors: vec![e.to_string()],
            }
        }
    };
    if let Err(errors) = onnx_ir::check_model(&model) {
        return Generated::CheckerRejected {
            text,
            errors: errors.iter().take(3).map(|e| e.to_string()).collect(),
        };
    }
    let trials: Vec<Vec<(String, Value)>> = (0..opts.trials.max(1))
        .map(|t| built.instance.trial_inputs(t))
        .collect();
    let case = FuzzCase {
        seed,
        model,
        proto: built.model,
        trials,
    };
    match case.runs() {
        Ok(()) => Generated::Case(Box::new(case)),
        Err(error) => Generated::NotRunnable { text, error },
    }
}

impl FuzzCase {
    /// A case of a model read from a file: `trials` random inputs (seeded by `seed`); a
    /// symbolic dim named `n<k>` has size k (the generator's convention), any other size 2. A
    /// sequence input holds tensors of its declared element shape, as many as the first of
    /// 3, 2, 1, 0 at which the model runs; an optional input holds a value.
    pub fn from_model(model: Model, seed: u64, trials: usize) -> Result<FuzzCase, Error> {
        let proto = model.to_proto();
        let named = negative_dims_named(&proto);
        let dims = symbolic_dims(&named);
        let (tensor_inputs, containers) = split_container_inputs(&named);
        let lengths: &[usize] = if containers.is_empty() {
            &[0]
        } else {
            &[3, 2, 1, 0]
        };
        let mut last = None;
        for &len in lengths {
            let mut all = Vec::new();
            for t in 0..trials.max(1) {
                let trial_seed = seed.wrapping_add(t as u64);
                let mut feeds = onnx_ref::random_inputs(&tensor_inputs, trial_seed, &dims)?;
                let mut rng = SplitMix::new(trial_seed);
                for (name, ty) in &containers {
                    feeds.push((name.clone(), random_value(ty, len, &mut rng, &dims)?));
                }
                all.push(feeds);
            }
            let case = FuzzCase {
                seed,
                model: model.clone(),
                proto: proto.clone(),
                trials: all,
            };
            match case.runs() {
                Ok(()) => return Ok(case),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("`lengths` is not empty, so the loop ran"))
    }

    /// The model in the ONNX text syntax.
    pub fn text(&self) -> String {
        print(&self.proto)
    }

    /// The model as a proto.
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// The graph inputs of each trial.
    pub fn trials(&self) -> &[Vec<(String, Value)>] {
        &self.trials
    }

    /// Runs the first trial in the interpreter.
    fn runs(&self) -> Result<(), Error> {
        let run = std::panic::catch_unwind(|| {
            Session::new(&self.proto)
                .and_then(|s| s.run(self.trials[0].clone()))
                .map(|_| ())
        });
        match run {
            Ok(r) => Ok(r?),
            Err(_) => Err(Error::RunPanicked),
        }
    }
}

/// A copy of `proto` whose graph inputs declare a dim of -1 (unknown, as some exporters write
/// it) as the symbolic dim `n2`, so that random inputs can be drawn for it.
fn negative_dims_named(proto: &ModelProto) -> ModelProto {
    use onnx_proto::tensor_shape_proto::dimension::Value as Dim;
    let mut p = proto.clone();
    for vi in p.graph.iter_mut().flat_map(|g| g.input.iter_mut()) {
        let Some(onnx_proto::type_proto::Value::TensorType(t)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
            if matches!(d.value, Some(Dim::DimValue(v)) if v < 0) {
                d.value = Some(Dim::DimParam("n2".into()));
            }
        }
    }
    p
}

/// Sizes of the symbolic dims of the graph inputs (tensors, and the elements of sequences and
/// optionals): `n<k>` is k, others 2.
fn symbolic_dims(proto: &ModelProto) -> BTreeMap<String, i64> {
    use onnx_proto::tensor_shape_proto::dimension::Value as Dim;
    let mut dims = BTreeMap::new();
    let Some(g) = &proto.graph else { return dims };
    for vi in &g.input {
        let Some(ty) = &vi.r#type else { continue };
        for t in tensor_types(ty) {
            for d in t.shape.iter().flat_map(|s| &s.dim) {
                if let Some(Dim::DimParam(p)) = &d.value {
                    let k = p
                        .strip_prefix('n')
                        .and_then(|k| k.parse::<i64>().ok())
                        .unwrap_or(2);
                    dims.insert(p.clone(), k);
                }
            }
        }
    }
    dims
}

/// The tensor types in a type: itself, or the elements of a sequence or an optional.
fn tensor_types(ty: &onnx_proto::TypeProto) -> Vec<&onnx_proto::type_proto::Tensor> {
    use onnx_proto::type_proto::Value as V;
    match &ty.value {
        Some(V::TensorType(t)) => Some(vec![t]),
        Some(V::SequenceType(s)) => s.elem_type.as_deref().map(tensor_types),
        Some(V::OptionalType(o)) => o.elem_type.as_deref().map(tensor_types),
        _ => None,
    }
    .unwrap_or_default()
}

/// `proto` without its sequence and optional graph inputs, and those inputs with their types.
fn split_container_inputs(
    proto: &ModelProto,
) -> (ModelProto, Vec<(String, onnx_proto::TypeProto)>) {
    use onnx_proto::type_proto::Value as V;
    let mut p = proto.clone();
    let mut containers = Vec::new();
    if let Some(g) = p.graph.as_mut() {
        g.input.retain(
            |vi| match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(V::SequenceType(_) | V::OptionalType(_)) => {
                    let ty = vi.r#type.clone().unwrap_or_default();
                    containers.push((vi.name.clone().unwrap_or_default(), ty));
                    false
                }
                _ => true,
            },
        );
    }
    (p, containers)
}

/// A random value of type `ty`: a sequence holds `len` tensors, an optional a value; a dim
/// not given is 2, a tensor of unknown rank 1-D.
fn random_value(
    ty: &onnx_proto::TypeProto,
    len: usize,
    rng: &mut SplitMix,
    dims: &BTreeMap<String, i64>,
) -> Result<Value, Error> {
    use onnx_proto::tensor_shape_proto::dimension::Value as Dim;
    use onnx_proto::type_proto::Value as V;
    fn elem(e: &Option<Box<onnx_proto::TypeProto>>) -> Result<&onnx_proto::TypeProto, Error> {
        e.as_deref().ok_or(Error::NoElemType)
    }
    match &ty.value {
        Some(V::TensorType(t)) => {
            let dtype = t
                .elem_type
                .and_then(onnx_ref::DType::from_code)
                .ok_or(Error::UnknownElemType { code: t.elem_type })?;
            let shape: Vec<usize> = match &t.shape {
                Some(s) => s
                    .dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(Dim::DimValue(v)) => (*v).max(0) as usize,
                        Some(Dim::DimParam(p)) => dims.get(p).copied().unwrap_or(2).max(0) as usize,
                        None => 2,
                    })
                    .collect(),
                None => vec![2],
            };
            let opts = crate::choice::DataOpts::default();
            match crate::choice::random_tensor(rng, dtype, &shape, &opts) {
                Some(t) => Ok(Value::Tensor(t)),
                None => Err(Error::CannotDraw { dtype, shape }),
            }
        }
        Some(V::SequenceType(s)) => {
            let e = elem(&s.elem_type)?;
            let items = (0..len)
                .map(|_| random_value(e, len, rng, dims))
                .collect::<Result<Vec<_>, _>>()?;
            let elem_dtype = match &e.value {
                Some(V::TensorType(t)) => t.elem_type.and_then(onnx_ref::DType::from_code),
                _ => None,
            };
            Ok(Value::Sequence(onnx_ref::Sequence { elem_dtype, items }))
        }
        Some(V::OptionalType(o)) => {
            let inner = random_value(elem(&o.elem_type)?, len, rng, dims)?;
            Ok(Value::Optional(Some(Box::new(inner))))
        }
        _ => Err(Error::UnsupportedInputType),
    }
}

fn print(m: &ModelProto) -> String {
    onnx_text::print_model(m, &onnx_text::PrintOptions::default())
}

/// The default-domain opset a model imports (0 when it imports none).
pub fn model_opset(model: &Model) -> i64 {
    model
        .to_proto()
        .opset_import
        .iter()
        .find(|o| {
            o.domain.as_deref().unwrap_or("").is_empty() || o.domain.as_deref() == Some("ai.onnx")
        })
        .and_then(|o| o.version)
        .unwrap_or(0)
}

/// The optimizer configurations a campaign runs on a model of default-domain opset `opset`,
/// each with its check off (the oracle compares): every built-in optimizing pipeline, the
/// default one with folding off, and the default one with a target opset (the next one, or
/// the previous one at the newest opset, and one seven opsets away: down from 14, else up).
pub fn campaign(opset: i64) -> Vec<(String, onnx_opt::Optimizer)> {
    use onnx_opt::{FoldOptions, Optimizer, Pipeline};
    let builtin = |name: &str| {
        Optimizer::new()
            .pipeline(Pipeline::builtin(name).expect("built-in pipelines parse"))
            .check(0)
    };
    let latest = onnx_schema::registry().max_opset("").unwrap_or(opset);
    let target = if opset < latest { opset + 1 } else { opset - 1 };
    let far = if opset >= 14 {
        opset - 7
    } else {
        (opset + 7).min(latest)
    };
    vec![
        ("default".into(), builtin("default")),
        ("fast".into(), builtin("fast")),
        ("aggressive".into(), builtin("aggressive")),
        (
            "default, fold off".into(),
            builtin("default").fold(FoldOptions {
                enabled: false,
                ..FoldOptions::default()
            }),
        ),
        (
            format!("default, target opset {target}"),
            builtin("default").target_opset(target),
        ),
        (
            format!("default, target opset {far}"),
            builtin("default").target_opset(far),
        ),
    ]
}
