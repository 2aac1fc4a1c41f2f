//! The kernel interface: what a kernel is ([`KernelFn`]), what it reads its node through
//! ([`KernelCtx`]), and the table kernels register into ([`KernelRegistry`], keyed by
//! (domain, op_type) and an opset version range). Layer: above tensors, values and numerics;
//! below the kernels (`kernels/`), the built-in registry (`registry`) and planning.

use std::collections::BTreeMap;

use onnx_proto::{AttributeProto, GraphProto, NodeProto};

use crate::error::{NodeRef, RefError, Result};
use crate::tensor::Tensor;
use crate::value::Value;

/// A kernel: computes a node's outputs from its inputs (`None` for an absent optional input).
/// It returns one value per output it computes, in order; outputs past those it returns must
/// not be requested by the node.
pub type KernelFn = fn(&KernelCtx, &[Option<&Value>]) -> Result<Vec<Value>>;

/// Opset version meaning "no upper bound" in [`KernelRegistry::register`].
pub const LATEST: i64 = i64::MAX;

#[derive(Debug, Clone, Copy)]
struct KernelEntry {
    since: i64,
    until: i64,
    kernel: KernelFn,
}

/// Kernels by (domain, op_type), each valid for a range of the model's opset version of that
/// domain. The default domain is `""` (`"ai.onnx"` is normalized to it).
#[derive(Debug, Default)]
pub struct KernelRegistry {
    kernels: BTreeMap<(String, String), Vec<KernelEntry>>,
}

/// `"ai.onnx"` and `""` are the same domain.
pub fn normalize_domain(domain: &str) -> &str {
    if domain == "ai.onnx" {
        ""
    } else {
        domain
    }
}

impl KernelRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `kernel` for opset versions `since..=until` of `domain` (use [`LATEST`] for
    /// an open range). A later registration overlapping an earlier one takes precedence.
    pub fn register(&mut self, domain: &str, op: &str, since: i64, until: i64, kernel: KernelFn) {
        self.kernels
            .entry((normalize_domain(domain).to_string(), op.to_string()))
            .or_default()
            .push(KernelEntry {
                since,
                until,
                kernel,
            });
    }

    /// The kernel for `op` at opset `version` of `domain`.
    pub fn lookup(&self, domain: &str, op: &str, version: i64) -> Option<KernelFn> {
        let entries = self
            .kernels
            .get(&(normalize_domain(domain).to_string(), op.to_string()))?;
        entries
            .iter()
            .rev()
            .find(|e| e.since <= version && version <= e.until)
            .map(|e| e.kernel)
    }

    /// Every registered (domain, op, since, until), sorted.
    pub fn entries(&self) -> Vec<(String, String, i64, i64)> {
        let mut out = Vec::new();
        for ((domain, op), list) in &self.kernels {
            for e in list {
                out.push((domain.clone(), op.clone(), e.since, e.until));
            }
        }
        out
    }
}

/// What a kernel knows about the node it runs: attributes, opset version, and identity for
/// error messages.
#[derive(Debug, Clone, Copy)]
pub struct KernelCtx<'a> {
    /// The node being evaluated.
    pub node: &'a NodeProto,
    /// Its index in the graph, when it runs inside a graph.
    pub index: Option<usize>,
    /// The model's opset version for the node's domain.
    pub opset: i64,
}

impl<'a> KernelCtx<'a> {
    /// The node's identity for error messages.
    pub fn node_ref(&self) -> NodeRef {
        NodeRef {
            index: self.index,
            name: self.node.name.clone().unwrap_or_default(),
            domain: self.node.domain.clone().unwrap_or_default(),
            op: self.node.op_type.clone().unwrap_or_default(),
        }
    }

    /// An error about this node: `reason` is a message or a typed helper error (its Display).
    pub fn err(&self, reason: impl std::fmt::Display) -> RefError {
        RefError::Kernel {
            node: self.node_ref(),
            reason: reason.to_string(),
        }
    }

    /// The op_type.
    pub fn op(&self) -> &str {
        self.node.op_type.as_deref().unwrap_or("")
    }

    /// The attribute called `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }

    /// An int attribute, or `None` when absent.
    pub fn attr_opt_int(&self, name: &str) -> Result<Option<i64>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                a.i.map(Some)
                    .ok_or_else(|| self.err(format!("attribute '{name}' is not an int")))
            }
        }
    }

    /// An int attribute with a default.
    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.attr_opt_int(name)?.unwrap_or(default))
    }

    /// A float attribute, or `None` when absent.
    pub fn attr_opt_float(&self, name: &str) -> Result<Option<f32>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                a.f.or(a.i.map(|i| i as f32))
                    .map(Some)
                    .ok_or_else(|| self.err(format!("attribute '{name}' is not a float")))
            }
        }
    }

    /// A float attribute with a default.
    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self.attr_opt_float(name)?.unwrap_or(default))
    }

    /// A string attribute, or `None` when absent.
    pub fn attr_opt_string(&self, name: &str) -> Result<Option<String>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                a.s.as_ref()
                    .map(|s| Some(String::from_utf8_lossy(s).into_owned()))
                    .ok_or_else(|| self.err(format!("attribute '{name}' is not a string")))
            }
        }
    }

    /// A string attribute with a default.
    pub fn attr_string(&self, name: &str, default: &str) -> Result<String> {
        Ok(self
            .attr_opt_string(name)?
            .unwrap_or_else(|| default.to_string()))
    }

    /// An ints attribute, or `None` when absent.
    pub fn attr_ints(&self, name: &str) -> Option<&'a [i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }

    /// A floats attribute, or `None` when absent.
    pub fn attr_floats(&self, name: &str) -> Option<&'a [f32]> {
        self.attr(name).map(|a| a.floats.as_slice())
    }

    /// A strings attribute, or `None` when absent.
    pub fn attr_strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name).map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }

    /// A tensor attribute, decoded, or `None` when absent.
    pub fn attr_tensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => match &a.t {
                Some(t) => Tensor::from_proto(t)
                    .map(Some)
                    .map_err(|e| e.in_node(&self.node_ref())),
                None => Err(self.err(format!("attribute '{name}' is not a tensor"))),
            },
        }
    }

    /// A graph attribute, or `None` when absent.
    pub fn attr_graph(&self, name: &str) -> Option<&'a GraphProto> {
        self.attr(name).and_then(|a| a.g.as_ref())
    }

    /// Number of outputs the node declares (including empty names for skipped outputs).
    pub fn num_outputs(&self) -> usize {
        self.node.output.len()
    }

    /// True when output `i` is declared with a non-empty name.
    pub fn wants_output(&self, i: usize) -> bool {
        self.node.output.get(i).is_some_and(|n| !n.is_empty())
    }

    /// Input `i` as a tensor; an error when absent or not a tensor.
    pub fn input<'v>(&self, inputs: &[Option<&'v Value>], i: usize) -> Result<&'v Tensor> {
        match inputs.get(i).copied().flatten() {
            Some(Value::Tensor(t)) => Ok(t),
            Some(other) => Err(self.err(format!(
                "input {i} must be a tensor, found {}",
                other.kind()
            ))),
            None => Err(self.err(format!("required input {i} is missing"))),
        }
    }

    /// Optional input `i` as a tensor (`None` when absent or empty-named).
    pub fn opt_input<'v>(
        &self,
        inputs: &[Option<&'v Value>],
        i: usize,
    ) -> Result<Option<&'v Tensor>> {
        match inputs.get(i).copied().flatten() {
            Some(Value::Tensor(t)) => Ok(Some(t)),
            Some(other) => Err(self.err(format!(
                "input {i} must be a tensor, found {}",
                other.kind()
            ))),
            None => Ok(None),
        }
    }
}

/// Calls a kernel, attaching the node to context-free errors and checking the output count.
pub(crate) fn run_kernel(
    kernel: KernelFn,
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
) -> Result<Vec<Value>> {
    run_as_kernel(ctx, inputs, kernel)
}

/// Calls `compute` as [`run_kernel`] calls a kernel (a planning step that computes like one,
/// FlexAttention, runs through this too).
pub(crate) fn run_as_kernel(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    compute: impl FnOnce(&KernelCtx, &[Option<&Value>]) -> Result<Vec<Value>>,
) -> Result<Vec<Value>> {
    let outputs = compute(ctx, inputs).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let wanted = (0..ctx.num_outputs())
        .rev()
        .find(|&i| ctx.wants_output(i))
        .map_or(0, |i| i + 1);
    if outputs.len() < wanted {
        return Err(ctx.err(format!(
            "kernel produced {} outputs but the node requests {wanted}",
            outputs.len()
        )));
    }
    Ok(outputs)
}
