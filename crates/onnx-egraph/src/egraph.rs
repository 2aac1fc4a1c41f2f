//! The e-graph type of onnx-opt ([`OnnxEGraph`]) and the data it carries: per class
//! [`ClassData`] (type, constant, attribute value, names), and the state shared by all classes
//! ([`OnnxAnalysis`]: interned tables, folding settings, decoded constants, merge conflicts and
//! refusals). Layer: below `fold` and `analysis` (the e-class analysis, which implements egg's
//! `Analysis` on [`OnnxAnalysis`]); imports only `lang` and `tables`.

use std::collections::BTreeSet;
use std::sync::Arc;

use egg::EGraph;
use onnx_proto::{TensorProto, TypeProto};

use crate::lang::{AttrId, ConstId, ONode};
use crate::tables::{AttrTable, ConstStore, OpTable};

/// The e-graph type of onnx-opt.
pub type OnnxEGraph = EGraph<ONode, OnnxAnalysis>;

/// How constant folding is bounded.
#[derive(Debug, Clone)]
pub struct FoldOptions {
    /// Fold at all.
    pub enabled: bool,
    /// A result may be as large as its constant inputs together, or this many bytes, whichever
    /// is larger. `None` lifts the budget (folds ConstantOfShape/Tile/Expand of any size).
    pub budget_floor: Option<usize>,
    /// Union integer scalars and vectors whose symbolic values are the same dims (on by
    /// default). The prover turns it off: it would merge a shape rule's two sides before the
    /// rule fires, leaving nothing to prove.
    pub union_equal_dims: bool,
}

impl Default for FoldOptions {
    fn default() -> Self {
        FoldOptions {
            enabled: true,
            budget_floor: Some(1024),
            union_equal_dims: true,
        }
    }
}

/// Decoded constants up to this size stay cached for the next fold that reads them.
const DECODE_CACHE_MAX_BYTES: usize = 64 * 1024;

/// What made two e-classes merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeCause {
    /// A rewrite rule's applier unioned them directly.
    Rule(String),
    /// Congruence closure (rebuild) after an iteration in which these rules changed the graph.
    Congruence(Vec<String>),
    /// Lifting or folding, outside any rule.
    Lifting,
}

impl std::fmt::Display for MergeCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MergeCause::Rule(r) => write!(f, "rule '{r}'"),
            MergeCause::Congruence(rules) => write!(
                f,
                "congruence closure after rules {}",
                rules
                    .iter()
                    .map(|r| format!("'{r}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            MergeCause::Lifting => write!(f, "lifting"),
        }
    }
}

/// A merge that found two different types, and what caused it.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeConflict {
    pub left: String,
    pub right: String,
    pub cause: MergeCause,
}

/// The analysis state shared by all classes: the interned tables and folding settings.
#[derive(Debug, Clone, Default)]
pub struct OnnxAnalysis {
    pub(crate) ops: OpTable,
    pub(crate) attrs: AttrTable,
    pub(crate) consts: ConstStore,
    pub(crate) fold: FoldOptions,
    /// Decoded constants, by id (filled on first use by folding).
    decoded: Vec<Option<Arc<onnx_ref::Value>>>,
    /// Type conflicts found by merges since the last drain.
    pub(crate) conflicts: Vec<TypeConflict>,
    /// The rule whose applier is running (set by the saturation driver), for attribution.
    pub(crate) current_rule: Option<String>,
    /// Rules that changed the e-graph in the current iteration (congruence attribution).
    pub(crate) rules_this_iteration: Vec<String>,
    /// Fold attempts that failed in the kernel (op, message): not errors, the node stays.
    pub(crate) fold_failures: Vec<(String, String)>,
    /// Folds skipped because the result was over budget.
    pub(crate) over_budget: usize,
    /// The model's opset per (normalized) domain: kernels and inference of an op bound at the
    /// model's opset run at it; ops bound elsewhere (conversion) run at their since_version.
    pub(crate) opsets: std::collections::BTreeMap<String, i64>,
    /// The next discriminator for a nondeterministic op.
    pub(crate) next_unique: u32,
    /// The first output name of each lifted nondeterministic node, by its discriminator: the
    /// interpreter keys an unseeded random op's stream by that name, so emission keeps it.
    pub(crate) unique_names: std::collections::BTreeMap<u32, String>,
    /// Unions refused by rule appliers (different types or different constants).
    pub(crate) refusals: Vec<Refusal>,
    /// For a subgraph: the types of the enclosing scopes' values it may read, by name (what
    /// lifting gives its outer-scope leaves).
    pub(crate) outer_types: std::collections::BTreeMap<String, TypeProto>,
    /// Integer scalars and vectors by their symbolic value (element type, rank, elements), for
    /// values computed from dims that no constant stands for: the class first seen with that
    /// value. `modify` unions a later class with the same key into it.
    pub(crate) sym_classes: std::collections::BTreeMap<SymKey, egg::Id>,
}

/// The key of [`OnnxAnalysis::sym_classes`]: element type, rank (0 or 1) and elements.
pub(crate) type SymKey = (i32, usize, Vec<onnx_schema::infer::SymDim>);

/// A union a rule asked for and the engine refused, because it would have merged values of
/// different types or two different constants. The run goes on without it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Refusal {
    pub rule: String,
    /// A value name the matched class had in the input model (or `class N`).
    pub site: String,
    pub reason: String,
}

/// Type and symbolic value of one output of a tuple.
pub(crate) type OutputType = (Option<TypeProto>, Option<Vec<onnx_schema::infer::SymDim>>);

/// What the analysis knows of one e-class.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassData {
    /// Type of the value (None: unknown, or a tuple/attribute class).
    pub(crate) ty: Option<TypeProto>,
    /// The constant the value equals.
    pub(crate) constant: Option<ConstId>,
    /// A one-element constant every element of the value equals, where the value itself is
    /// not a known constant (its shape may be symbolic): `ConstantOfShape(Shape(x))`, and what
    /// only moves or repeats its elements (Reshape, Expand, Gather, Slice, ...). Literal
    /// patterns and `all_equal` see it.
    pub(crate) splat: Option<ConstId>,
    /// For tuple classes whose op folded: the constant of each output.
    pub(crate) tuple_constants: Option<Vec<Option<ConstId>>>,
    /// For int64 shape vectors/scalars: the value with symbolic dims (`Shape(x)` of
    /// `float[batch,16]` is `[batch, 16]`).
    pub(crate) sym: Option<Vec<onnx_schema::infer::SymDim>>,
    /// For tuple classes: type and symbolic value of each output.
    pub(crate) tuple_types: Option<Vec<OutputType>>,
    /// For attribute classes: the attribute value.
    pub(crate) attr: Option<AttrId>,
    /// Value names this class had in the input model.
    pub(crate) names: BTreeSet<String>,
    /// The value does not depend on any graph input (a constant subgraph, computable when a
    /// runtime loads the model), though it may not be folded.
    pub(crate) input_free: bool,
}

impl ClassData {
    /// The value's type (None: unknown, or a tuple or attribute class).
    pub fn ty(&self) -> Option<&TypeProto> {
        self.ty.as_ref()
    }
    /// The constant the value is known to equal.
    pub fn constant(&self) -> Option<ConstId> {
        self.constant
    }
    /// The value names the class had in the input model.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }
    /// Whether the value depends on no graph input.
    pub fn input_free(&self) -> bool {
        self.input_free
    }
}

impl OnnxAnalysis {
    /// The version rules bind ops of a non-default `domain` at: the model's import of it, or
    /// where the model imports none yet, the newest version the schemas know (a right side
    /// writes such an op there, and the emitted model then imports it; a left side matches an
    /// op an earlier rule of the phase wrote).
    pub(crate) fn domain_opset(&self, domain: &str) -> Option<i64> {
        self.opsets
            .get(domain)
            .copied()
            .or_else(|| onnx_schema::registry().max_opset(domain))
    }

    /// The interned op descriptions (`NodeKind::Op(id)` names one).
    pub fn ops(&self) -> &OpTable {
        &self.ops
    }
    /// The interned attribute values.
    pub fn attrs(&self) -> &AttrTable {
        &self.attrs
    }
    /// The content-addressed constants.
    pub fn consts(&self) -> &ConstStore {
        &self.consts
    }

    pub fn new(fold: FoldOptions) -> Self {
        OnnxAnalysis {
            fold,
            ..Default::default()
        }
    }

    /// The decoded value of a constant (decoded once, then shared).
    pub fn const_value(&mut self, id: ConstId) -> Result<Arc<onnx_ref::Value>, onnx_ref::RefError> {
        let i = id.0 as usize;
        if self.decoded.len() <= i {
            self.decoded.resize(i + 1, None);
        }
        if let Some(v) = &self.decoded[i] {
            return Ok(v.clone());
        }
        let entry = self.consts.get(id);
        let t = onnx_ref::Tensor::from_proto(&entry.tensor)?;
        let v = Arc::new(onnx_ref::Value::Tensor(t));
        // Small constants (shapes, axes, scalars) are read again and again; large ones are
        // decoded per use so that a weight folding reads once is not kept twice in memory.
        if entry.bytes <= DECODE_CACHE_MAX_BYTES {
            self.decoded[i] = Some(v.clone());
        }
        Ok(v)
    }

    /// The opset an op's kernel and inference run at: the model's opset of its domain when the
    /// op binds the same schema there, else its since_version.
    pub fn effective_opset(&self, info: &crate::tables::OpInfo) -> i64 {
        let domain = onnx_schema::normalize_domain(&info.domain);
        match self.opsets.get(domain) {
            Some(&v)
                if v >= info.since_version
                    && onnx_schema::registry()
                        .lookup(domain, &info.op_type, v)
                        .is_none_or(|s| s.since_version == info.since_version) =>
            {
                v
            }
            _ => info.since_version,
        }
    }

    /// True when two constants hold the same elements (same type, shape and bits).
    pub fn same_constant(&mut self, a: ConstId, b: ConstId) -> bool {
        if a == b {
            return true;
        }
        let (ta, tb) = (&self.consts.get(a).tensor, &self.consts.get(b).tensor);
        if ta.data_type != tb.data_type || ta.dims != tb.dims {
            return false;
        }
        match (self.const_value(a), self.const_value(b)) {
            (Ok(x), Ok(y)) => match (&*x, &*y) {
                // Bitwise: NaN equals the same NaN, -0 differs from +0.
                (onnx_ref::Value::Tensor(x), onnx_ref::Value::Tensor(y)) => {
                    x.to_proto("") == y.to_proto("")
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// True when two constants are [`OnnxAnalysis::same_constant`], or are float tensors of
    /// one type and shape whose elements differ only by rounding: NaN where the other is NaN,
    /// an infinity where the other is the same infinity, and finite elements within a relative
    /// 1e-5 (1e-2 for float16, bfloat16 and the 8-bit floats) plus an absolute 1e-6. A rule
    /// tagged `rounding` computes a value another way, so folding its two sides may give two
    /// such constants, which congruence then puts in one class: that is not a conflict.
    pub fn same_constant_up_to_rounding(&mut self, a: ConstId, b: ConstId) -> bool {
        if self.same_constant(a, b) {
            return true;
        }
        let (ta, tb) = (&self.consts.get(a).tensor, &self.consts.get(b).tensor);
        if ta.data_type != tb.data_type || ta.dims != tb.dims {
            return false;
        }
        let (Ok(x), Ok(y)) = (self.const_value(a), self.const_value(b)) else {
            return false;
        };
        let (onnx_ref::Value::Tensor(x), onnx_ref::Value::Tensor(y)) = (&*x, &*y) else {
            return false;
        };
        if !x.dtype().is_float() {
            return false;
        }
        let rtol = match x.dtype().bit_width() {
            w if w <= 16 => 1e-2,
            _ => 1e-5,
        };
        let (Ok(p), Ok(q)) = (x.to_f64_vec(), y.to_f64_vec()) else {
            return false;
        };
        p.iter().zip(&q).all(|(&u, &v)| {
            (u.is_nan() && v.is_nan())
                || u == v
                || (u.is_finite()
                    && v.is_finite()
                    && (u - v).abs() <= 1e-6 + rtol * u.abs().max(v.abs()))
        })
    }

    /// Stores a tensor value computed by folding, returning its id.
    pub fn intern_value(&mut self, value: &onnx_ref::Tensor) -> ConstId {
        let proto: TensorProto = value.to_proto("");
        self.consts.intern(proto)
    }
}
