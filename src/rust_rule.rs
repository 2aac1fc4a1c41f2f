//! Rules written in Rust, for embedders: a left side in the rule language (so it is parsed,
//! checked against the operator schemas at every opset epoch, traced by `explain`, and proven by
//! the prover like any rule), an optional guard, and a right side built by a closure with the op
//! builder, by op name.

use std::sync::Arc;

use egg::Id;
use onnx_egraph::{RhsError, RustApplier, RustGuard, RustMatch, RustRhs};

/// A rule whose left side is rule text and whose guard and right side are Rust.
///
/// ```
/// use onnx_opt::{Optimizer, RustRule};
///
/// // (-a) * (-b) == a * b: the right side is built in Rust.
/// let rule = RustRule::new("neg_times_neg", "Mul(Neg(a), Neg(b))", |rhs| {
///     let (a, b) = (rhs.var("a").unwrap(), rhs.var("b").unwrap());
///     rhs.op("Mul").inputs(&[a, b]).build().map(Some)
/// })
/// .tags("exact");
/// let model = onnx_opt::parse_text(
///     r#"<ir_version: 8, opset_import: ["" : 13]>
///        g (float[2] a, float[2] b) => (float[2] y) { m = Neg(a)  n = Neg(b)  y = Mul(m, n) }"#,
/// )?;
/// let out = Optimizer::new().rust_rule(rule).optimize(&model)?;
/// assert_eq!(out.report.ops_after.get("Mul"), Some(&1));
/// assert_eq!(out.report.nodes_after, 1);
/// # Ok::<(), onnx_opt::Error>(())
/// ```
#[derive(Clone)]
pub struct RustRule {
    pub(crate) name: String,
    pub(crate) pattern: String,
    pub(crate) tags: String,
    pub(crate) guard: Option<RustGuard>,
    pub(crate) applier: RustApplier,
}

impl RustRule {
    /// A rule named `name` (unique among all loaded rules) whose left side is `pattern` — rule
    /// text: a pattern, optionally followed by `where`, `let` and `hint` clauses, and preceded
    /// by `#` comment lines (its identity) — and whose right side `applier` builds: it returns
    /// the class that replaces the matched value, `Ok(None)` to decline, or `Err` to refuse:
    /// an [`RhsError`] (what the op builder returns), or a message (`Err("...".into())`),
    /// reported with the rule's name; the run goes on.
    pub fn new<E: Into<RhsError>>(
        name: &str,
        pattern: &str,
        applier: impl Fn(&mut RustRhs<'_>) -> Result<Option<Id>, E> + Send + Sync + 'static,
    ) -> Self {
        RustRule {
            name: name.to_string(),
            pattern: pattern.to_string(),
            tags: String::new(),
            guard: None,
            applier: Arc::new(move |rhs: &mut RustRhs<'_>| applier(rhs).map_err(Into::into)),
        }
    }

    /// Tags, as between the brackets of a text rule: `exact`, `tol 1e-3`, `unsafe`,
    /// `opset 13..`, labels.
    pub fn tags(mut self, tags: &str) -> Self {
        self.tags = tags.to_string();
        self
    }

    /// A guard evaluated after the pattern's `where` clause: `Some(true)` lets the rule fire;
    /// `Some(false)` and `None` (unknown) do not.
    pub fn guard(
        mut self,
        guard: impl Fn(&RustMatch<'_>) -> Option<bool> + Send + Sync + 'static,
    ) -> Self {
        self.guard = Some(Arc::new(guard));
        self
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for RustRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RustRule")
            .field("name", &self.name)
            .field("pattern", &self.pattern)
            .field("tags", &self.tags)
            .field("guard", &self.guard.is_some())
            .finish()
    }
}
