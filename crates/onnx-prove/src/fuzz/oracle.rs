//! The oracle: optimize a case and check the result.
//!
//! 1. The optimization runs under `catch_unwind`: a panic is a failure; an `Err` is a failure
//!    too, except `NotExpressible` under a target opset and `Unsupported` (a conversion the
//!    optimizer documents it does not do, such as a model with local functions to another
//!    opset), and `Check` (the input fails the checker: a model read from a file; generated
//!    models that do pass it never become cases): refusals the user is told about.
//! 2. The result passes `onnx_ir::check_model`.
//! 3. Graph inputs (initializers aside) and outputs keep their names, order and types (element
//!    types; for a sequence or an optional, its kind and element type).
//! 4. On every trial where the original runs, the optimized model runs and its outputs equal
//!    the original's: floats within the default [`Tolerance`] (wider for 16-bit floats),
//!    everything else exactly. Outputs computed from a random op (RandomNormal, ...) are
//!    compared by element type and shape only, or by element type alone when a value-dependent
//!    shape sits on the way.
//! 5. Optimizing again gives the same bytes.

use std::collections::BTreeSet;
use std::fmt;

use onnx_egraph::EGraphError;
use onnx_proto::{Message, ModelProto};
use onnx_ref::{DType, Session, Value};

use super::FuzzCase;
use crate::gen::dag::RANDOM_OPS;
use onnx_opt::{compare_values, Tolerance};
use onnx_opt::{Error, Optimizer};

/// The check a case failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailedCheck {
    /// The optimizer panicked.
    Panic,
    /// The optimizer returned an error other than a refusal to convert.
    Error,
    /// The optimized model fails the checker.
    Checker,
    /// Graph input or output names, order or element types changed.
    Interface,
    /// The optimized model fails to run where the original runs.
    OptimizedRun,
    /// An output differs.
    Values,
    /// Two runs of the optimizer gave different bytes.
    Determinism,
}

/// A failed check and what was seen.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which check.
    pub check: FailedCheck,
    /// What went wrong.
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.check, self.detail)
    }
}

/// The oracle's verdict on one case.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Every check held; `trials` random inputs were compared.
    Passed {
        /// Trials compared (those where the original runs).
        trials: usize,
    },
    /// The optimizer refused cleanly: no equivalent at the target opset, a documented
    /// unsupported conversion, or an input model that fails the checker.
    Refused(String),
    /// A check failed.
    Failed(Failure),
}

fn fail(check: FailedCheck, detail: impl Into<String>) -> Verdict {
    Verdict::Failed(Failure {
        check,
        detail: detail.into(),
    })
}

/// Optimizes `case` with `optimizer` (run its check off: the oracle compares) and checks it.
pub fn check_case(case: &FuzzCase, optimizer: &Optimizer) -> Verdict {
    let first = match optimize_caught(case, optimizer) {
        Ok(m) => m,
        Err(v) => return v,
    };
    if let Err(errors) = onnx_ir::check_model(&first) {
        let errors: Vec<String> = errors.iter().take(3).map(|e| e.to_string()).collect();
        return fail(FailedCheck::Checker, errors.join("; "));
    }
    let proto = first.to_proto();
    if let Some(why) = interface_differs(case.proto(), &proto) {
        return fail(FailedCheck::Interface, why);
    }
    let trials = match compare_outputs(case, &proto) {
        Ok(n) => n,
        Err(v) => return v,
    };
    match optimize_caught(case, optimizer) {
        Ok(second) if second.to_proto().encode_to_vec() == proto.encode_to_vec() => {}
        Ok(_) => {
            return fail(
                FailedCheck::Determinism,
                "a second optimization gave different bytes",
            )
        }
        Err(_) => {
            return fail(
                FailedCheck::Determinism,
                "a second optimization failed where the first succeeded",
            )
        }
    }
    Verdict::Passed { trials }
}

fn optimize_caught(case: &FuzzCase, optimizer: &Optimizer) -> Result<onnx_ir::Model, Verdict> {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        optimizer.optimize(&case.model)
    }));
    match run {
        Ok(Ok(out)) => Ok(out.model),
        Ok(Err(Error::Optimize {
            source: e @ (EGraphError::NotExpressible { .. } | EGraphError::Unsupported(_)),
            ..
        })) => Err(Verdict::Refused(e.to_string())),
        Ok(Err(e @ Error::Check { .. })) => Err(Verdict::Refused(e.to_string())),
        Ok(Err(e)) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                src = s.source();
            }
            Err(fail(FailedCheck::Error, msg))
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(fail(FailedCheck::Panic, msg))
        }
    }
}

/// (name, type) of graph values: a tensor's element type code, or `seq(..)` / `optional(..)`
/// of their element's (shapes aside).
type Signature = Vec<(String, String)>;

/// The type of a declaration without its shapes.
fn type_key(ty: Option<&onnx_proto::TypeProto>) -> String {
    use onnx_proto::type_proto::Value as V;
    match ty.and_then(|t| t.value.as_ref()) {
        Some(V::TensorType(t)) => t.elem_type.unwrap_or(0).to_string(),
        Some(V::SequenceType(s)) => format!("seq({})", type_key(s.elem_type.as_deref())),
        Some(V::OptionalType(o)) => format!("optional({})", type_key(o.elem_type.as_deref())),
        _ => "-1".into(),
    }
}

/// The graph inputs that are not initializers, and the outputs.
fn interface(m: &ModelProto) -> (Signature, Signature) {
    let Some(g) = &m.graph else {
        return Default::default();
    };
    let inits: BTreeSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let elem = |vi: &onnx_proto::ValueInfoProto| type_key(vi.r#type.as_ref());
    let name = |vi: &onnx_proto::ValueInfoProto| vi.name.clone().unwrap_or_default();
    (
        g.input
            .iter()
            .filter(|vi| !inits.contains(vi.name.as_deref().unwrap_or("")))
            .map(|vi| (name(vi), elem(vi)))
            .collect(),
        g.output.iter().map(|vi| (name(vi), elem(vi))).collect(),
    )
}

fn interface_differs(a: &ModelProto, b: &ModelProto) -> Option<String> {
    let (ia, oa) = interface(a);
    let (ib, ob) = interface(b);
    if ia != ib {
        return Some(format!("graph inputs {ia:?} became {ib:?}"));
    }
    if oa != ob {
        return Some(format!("graph outputs {oa:?} became {ob:?}"));
    }
    None
}

/// How much of an output can be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Taint {
    /// Deterministic: values.
    Clean,
    /// Computed from a random op: element type and shape.
    Values,
    /// Its shape depends on random values: element type only.
    Shape,
}

/// Ops whose output shape depends on their first input's values.
const VALUE_SHAPED: &[&str] = &["NonZero", "Unique", "Compress", "ConstantOfShape", "Range"];

/// True when `n` draws random numbers: a random op, or a node whose subgraphs or model-local
/// function body hold one (a conversion may write a random op as its schema's body, which draws
/// another stream).
fn draws_random(n: &onnx_proto::NodeProto, m: &ModelProto, depth: usize) -> bool {
    let op = n.op_type.as_deref().unwrap_or("");
    if RANDOM_OPS.contains(&op) {
        return true;
    }
    if depth > 16 {
        return false;
    }
    let in_subgraphs = n.attribute.iter().any(|a| {
        a.g.iter()
            .chain(&a.graphs)
            .any(|g| g.node.iter().any(|b| draws_random(b, m, depth + 1)))
    });
    let domain = n.domain.as_deref().unwrap_or("");
    let in_function = m.functions.iter().any(|f| {
        f.name.as_deref() == Some(op)
            && f.domain.as_deref().unwrap_or("") == domain
            && f.node.iter().any(|b| draws_random(b, m, depth + 1))
    });
    in_subgraphs || in_function
}

/// The taint of each graph output of `m`.
fn output_taints(m: &ModelProto) -> Vec<Taint> {
    let Some(g) = &m.graph else {
        return Vec::new();
    };
    let mut taint: std::collections::BTreeMap<&str, Taint> = Default::default();
    for n in &g.node {
        let op = n.op_type.as_deref().unwrap_or("");
        let mut t = if draws_random(n, m, 0) {
            Taint::Values
        } else {
            Taint::Clean
        };
        for (i, name) in n.input.iter().enumerate() {
            let ti = taint.get(name.as_str()).copied().unwrap_or(Taint::Clean);
            let shaping = ti != Taint::Clean && (i > 0 || VALUE_SHAPED.contains(&op));
            t = t.max(if shaping { Taint::Shape } else { ti });
        }
        for o in &n.output {
            taint.insert(o, t);
        }
    }
    g.output
        .iter()
        .map(|o| {
            taint
                .get(o.name.as_deref().unwrap_or(""))
                .copied()
                .unwrap_or(Taint::Clean)
        })
        .collect()
}

fn tolerance_for(v: &Value) -> Tolerance {
    match v {
        Value::Tensor(t) if matches!(t.dtype(), DType::Float16 | DType::Bfloat16) => Tolerance {
            rtol: 1e-2,
            atol: 1e-2,
        },
        _ => Tolerance::default(),
    }
}

fn compare_outputs(case: &FuzzCase, optimized: &ModelProto) -> Result<usize, Verdict> {
    let caught = |f: &dyn Fn() -> Result<Vec<(String, Value)>, onnx_ref::RefError>| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(r) => Ok(r?),
            Err(_) => Err(crate::Error::RunPanicked),
        }
    };
    // The original checks its declarations: the optimizer may rely on a declared type, so an
    // original that breaks one on an input (a value_info, a graph or subgraph output, a
    // subgraph input) is invalid there, like one that fails to run, and the trial is skipped.
    let a = Session::checking_declarations(case.proto())
        .map_err(|e| fail(FailedCheck::Error, e.to_string()))?;
    let b = match Session::new(optimized) {
        Ok(s) => s,
        Err(e) => {
            return Err(fail(
                FailedCheck::OptimizedRun,
                format!("the interpreter cannot load it: {e}"),
            ))
        }
    };
    let taints = output_taints(case.proto());
    let mut compared = 0;
    for (trial, inputs) in case.trials().iter().enumerate() {
        let Ok(ra) = caught(&|| a.run(inputs.clone())) else {
            continue;
        };
        let rb = match caught(&|| b.run(inputs.clone())) {
            Ok(r) => r,
            Err(e) => {
                return Err(fail(
                    FailedCheck::OptimizedRun,
                    format!("trial {trial}: {e}"),
                ))
            }
        };
        compared += 1;
        for (k, ((name, va), (_, vb))) in ra.iter().zip(&rb).enumerate() {
            let taint = taints.get(k).copied().unwrap_or(Taint::Clean);
            let differs = match (taint, va, vb) {
                (Taint::Clean, _, _) => compare_values(va, vb, tolerance_for(va)),
                (Taint::Values, Value::Tensor(x), Value::Tensor(y)) => (x.dtype() != y.dtype()
                    || x.shape() != y.shape())
                .then(|| format!("{:?} vs {:?}", x.shape(), y.shape())),
                (_, Value::Tensor(x), Value::Tensor(y)) => (x.dtype() != y.dtype())
                    .then(|| format!("{} vs {}", x.dtype().name(), y.dtype().name())),
                _ => None,
            };
            if let Some(d) = differs {
                return Err(fail(
                    FailedCheck::Values,
                    format!("trial {trial}, output '{name}': {d}"),
                ));
            }
        }
    }
    Ok(compared)
}
