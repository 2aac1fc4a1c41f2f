//! The pattern matcher of compiled rules: a backtracking search over e-nodes that binds
//! variables to e-classes. It reads attributes and logical parameters by role (through
//! `onnx_rules::params`), requires every attribute a pattern does not name to equal its default,
//! tries both orders of commutative operands, and, unless the rule is `exact`, matches chains of
//! an associative op in any association (the pattern's chain and the e-graph's are flattened to
//! the same number of operands, then operands are matched in every order).

use egg::Id;
use onnx_rules::ir::{AttrPat, InputPat, Literal, OpHead, OpPat, OpRef, Pat, PatId, Rule};
use onnx_rules::params::{logical_param, ParamLoc};

use crate::analysis::OnnxEGraph;
use crate::build::Roles;
use crate::lang::{NodeKind, ONode, OpId};
use crate::tables::{AttrValue, OpInfo};
use crate::value::{attr_equals_literal, const_equals_literal};

/// What a variable is bound to.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    Class(Id),
    /// An absent optional input, or an absent attribute / logical parameter.
    Absent,
    List(Vec<Id>),
    /// Attribute name -> attribute class, of the attributes a pattern did not name.
    Rest(Vec<(String, Id)>),
    /// An op variable: the op and its attribute classes.
    Op(OpId, Vec<Id>),
}

/// Bindings by variable index.
pub type Env = Vec<Option<Bound>>;

/// Largest number of bindings one root class may produce (guards against blowups).
pub const MAX_MATCHES_PER_CLASS: usize = 256;

pub(crate) struct Matcher<'a> {
    pub eg: &'a OnnxEGraph,
    pub rule: &'a Rule,
    /// The model's default-domain opset (ops named without a range bind there).
    pub opset: i64,
    /// Match associative chains in any association.
    pub ac: bool,
    /// When set (by `explain`), why pattern nodes failed to match.
    pub trace: Option<std::cell::RefCell<Vec<(PatId, String)>>>,
    /// since_version each named op binds at the model's opset (memo of schema lookups).
    pub bound: std::cell::RefCell<Vec<(String, String, Option<i64>)>>,
}

impl<'a> Matcher<'a> {
    fn fail(&self, p: PatId, why: impl FnOnce() -> String) {
        if let Some(t) = &self.trace {
            t.borrow_mut().push((p, why()));
        }
    }

    fn find(&self, c: Id) -> Id {
        self.eg.find(c)
    }

    fn is_none(&self, c: Id) -> bool {
        self.eg[c].nodes.iter().any(|n| n.kind == NodeKind::None)
    }

    /// All bindings of pattern `p` at class `class` extending `env`.
    pub fn pat(&self, p: PatId, class: Id, env: &Env) -> Vec<Env> {
        let class = self.find(class);
        let out = self.pat_inner(p, class, env);
        if out.is_empty() && self.trace.is_some() {
            let why = match self.rule.pat(p) {
                Pat::Var(_) if self.is_none(class) => "the input is absent".to_string(),
                Pat::Var(_) => "a repeated variable is bound to a different value".to_string(),
                Pat::Absent => "the input is present".to_string(),
                Pat::Literal(l) => format!("not a constant equal to {l:?}"),
                Pat::Proj { index, .. } => format!("not output {index} of a matching op"),
                Pat::Op(op) => self.describe_miss(op, class),
                Pat::Wildcard => "the input is absent".to_string(),
            };
            self.fail(p, || why);
        }
        out
    }

    fn describe_miss(&self, op: &OpPat, class: Id) -> String {
        let want = match &op.head {
            OpHead::Named(r) => r.op_type.clone(),
            OpHead::Var { .. } => "an op of the class".to_string(),
        };
        let here: Vec<String> = self.eg[class]
            .nodes
            .iter()
            .filter_map(|n| match n.kind {
                NodeKind::Op(o) => {
                    let i = self.eg.analysis.ops.get(o);
                    Some(format!("{}-{}", i.op_type, i.since_version))
                }
                NodeKind::Out(k) => Some(format!("output {k} of a multi-output op")),
                NodeKind::Input(_) => Some("a graph input".into()),
                NodeKind::Const(_) => Some("a constant".into()),
                _ => None,
            })
            .collect();
        let found =
            self.op_nodes(class, op.outputs.is_some())
                .iter()
                .any(|n| match (n.kind, &op.head) {
                    (NodeKind::Op(o), OpHead::Named(r)) => {
                        self.op_ref_matches(r, self.eg.analysis.ops.get(o))
                    }
                    _ => false,
                });
        if found {
            format!("{want} found, but its attributes or inputs do not match")
        } else {
            format!("expected {want}, found {}", here.join(", "))
        }
    }

    fn pat_inner(&self, p: PatId, class: Id, env: &Env) -> Vec<Env> {
        match self.rule.pat(p) {
            // A variable or `_` in an input position matches a present value only: an absent
            // optional input is matched by `None` or `x?`.
            Pat::Var(_) | Pat::Wildcard if self.is_none(class) => Vec::new(),
            Pat::Var(v) => bind(env, v.0 as usize, Bound::Class(class), self.eg)
                .into_iter()
                .collect(),
            Pat::Wildcard => vec![env.clone()],
            Pat::Absent => {
                if self.is_none(class) {
                    vec![env.clone()]
                } else {
                    Vec::new()
                }
            }
            Pat::Literal(l) => match self.eg[class].data.constant.or(match l {
                Literal::List(_) => None,
                _ => self.eg[class].data.splat,
            }) {
                Some(k) if const_equals_literal(self.eg, k, l) => vec![env.clone()],
                _ => Vec::new(),
            },
            Pat::Proj { tuple, index } => {
                let mut out = Vec::new();
                for n in &self.eg[class].nodes {
                    if n.kind == NodeKind::Out(*index as u32) {
                        out.extend(self.pat(*tuple, n.children[0], env));
                    }
                }
                out
            }
            Pat::Op(op) => self.op_pat(p, op, class, env),
        }
    }

    /// Op e-nodes that a pattern can match at a class: tuple ops directly when the pattern
    /// gives an output count, else single-value ops and output 0 of one-output tuple ops.
    fn op_nodes(&self, class: Id, want_tuple: bool) -> Vec<&'a ONode> {
        let mut out = Vec::new();
        for n in &self.eg[class].nodes {
            match n.kind {
                NodeKind::Op(op) if self.eg.analysis.ops.get(op).is_tuple == want_tuple => {
                    out.push(n);
                }
                NodeKind::Out(0) if !want_tuple => {
                    for t in &self.eg[n.children[0]].nodes {
                        if let NodeKind::Op(op) = t.kind {
                            let info = self.eg.analysis.ops.get(op);
                            if info.is_tuple && info.n_outputs == 1 {
                                out.push(t);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn op_pat(&self, p: PatId, op: &OpPat, class: Id, env: &Env) -> Vec<Env> {
        let mut out = Vec::new();
        for node in self.op_nodes(class, op.outputs.is_some()) {
            let NodeKind::Op(id) = node.kind else {
                continue;
            };
            let info = self.eg.analysis.ops.get(id);
            if let Some(n) = op.outputs {
                if info.n_outputs != n {
                    continue;
                }
            }
            for env in self.head(op, id, info, node, env) {
                for env in self.attrs(p, op, info, node, &env) {
                    out.extend(self.inputs(op, info, node, &env));
                    if out.len() >= MAX_MATCHES_PER_CLASS {
                        return out;
                    }
                }
            }
        }
        out
    }

    fn head(&self, op: &OpPat, id: OpId, info: &OpInfo, node: &ONode, env: &Env) -> Vec<Env> {
        match &op.head {
            OpHead::Named(r) => {
                if self.op_ref_matches(r, info) {
                    vec![env.clone()]
                } else {
                    Vec::new()
                }
            }
            OpHead::Var { var, class } => {
                let attrs: Vec<Id> = node.children[..info.attr_names.len()]
                    .iter()
                    .map(|&c| self.find(c))
                    .collect();
                if let Some(c) = class {
                    if !onnx_rules::op_class_members(*c).contains(&info.op_type.as_str())
                        || !info.domain.is_empty()
                    {
                        return Vec::new();
                    }
                }
                bind(env, var.0 as usize, Bound::Op(id, attrs), self.eg)
                    .into_iter()
                    .collect()
            }
        }
    }

    /// True when an interned op is the op a rule names: same domain and op_type, and the
    /// schema version the rule binds (at the model's opset, or within its `@` range).
    pub fn op_ref_matches(&self, r: &OpRef, info: &OpInfo) -> bool {
        if info.op_type != r.op_type || info.domain != r.domain || !info.has_schema {
            return false;
        }
        match r.since {
            Some((lo, hi)) => {
                info.since_version >= lo && hi.is_none_or(|h| info.since_version <= h)
            }
            None => {
                let cached = self
                    .bound
                    .borrow()
                    .iter()
                    .find(|(d, o, _)| *d == r.domain && *o == r.op_type)
                    .map(|x| x.2);
                let since = match cached {
                    Some(s) => s,
                    None => {
                        let opset = if r.domain.is_empty() {
                            Some(self.opset)
                        } else {
                            self.eg.analysis.domain_opset(&r.domain)
                        };
                        let s = opset.and_then(|v| {
                            onnx_schema::registry()
                                .lookup(&r.domain, &r.op_type, v)
                                .map(|s| s.since_version)
                        });
                        self.bound
                            .borrow_mut()
                            .push((r.domain.clone(), r.op_type.clone(), s));
                        s
                    }
                };
                since == Some(info.since_version)
            }
        }
    }

    /// Matches named attributes and logical parameters; the unnamed ones must equal their
    /// defaults (or be absent) unless the pattern has `..rest`.
    fn attrs(&self, p: PatId, op: &OpPat, info: &OpInfo, node: &ONode, env: &Env) -> Vec<Env> {
        let n_attrs = info.attr_names.len();
        let mut envs = vec![env.clone()];
        let mut named_slots: Vec<usize> = Vec::new();
        let mut named_attrs: Vec<&str> = Vec::new();
        for (name, ap) in &op.attrs {
            let (class, is_input) = match self.param_class(info, node, name) {
                Some(x) => x,
                None => {
                    self.fail(p, || format!("{} has no parameter '{name}'", info.op_type));
                    return Vec::new();
                }
            };
            if is_input.is_some() {
                named_slots.extend(is_input);
            } else {
                // The schema's name of the attribute (Pad-1 calls `pads` `paddings`).
                let schema_name = match logical_param(&info.op_type, info.since_version, name) {
                    Some(lp) if info.domain.is_empty() => match lp.loc {
                        ParamLoc::Attr(a) => a,
                        ParamLoc::Input(_) => name.as_str(),
                    },
                    _ => name.as_str(),
                };
                named_attrs.push(schema_name);
            }
            let class = self.find(class);
            let absent = self.is_none(class);
            let mut next = Vec::new();
            for e in envs {
                match ap {
                    AttrPat::Wildcard => next.push(e),
                    AttrPat::Var(v) => {
                        // A logical parameter in an input may be computed (a shape vector);
                        // guards read its value only when it is constant.
                        let b = if absent {
                            Bound::Absent
                        } else {
                            Bound::Class(class)
                        };
                        next.extend(bind(&e, v.0 as usize, b, self.eg));
                    }
                    AttrPat::Literal(l) => {
                        let ok = match (self.eg[class].data.attr, self.eg[class].data.constant) {
                            (Some(a), _) => attr_equals_literal(self.eg.analysis.attrs.get(a), l),
                            (None, Some(k)) => const_equals_literal(self.eg, k, l),
                            _ => false,
                        };
                        if ok {
                            next.push(e);
                        }
                    }
                }
            }
            envs = next;
            if envs.is_empty() {
                self.fail(p, || {
                    format!("parameter '{name}' of {} does not match", info.op_type)
                });
                return envs;
            }
        }
        let schema = match node.kind {
            NodeKind::Op(id) => self.eg.analysis.ops.schema(id),
            _ => None,
        };
        // Logical parameters located in inputs and not named must be absent.
        if info.domain.is_empty() {
            for lp in onnx_rules::params::logical_params(&info.op_type, info.since_version) {
                if let ParamLoc::Input(slot) = lp.loc {
                    if !named_slots.contains(&slot) {
                        let c = node.children[n_attrs + slot];
                        if !self.is_none(c) {
                            self.fail(p, || {
                                format!(
                                    "{} has '{}' given; the pattern needs it absent",
                                    info.op_type,
                                    p_name(&info.op_type, info.since_version, slot)
                                )
                            });
                            return Vec::new();
                        }
                    }
                }
            }
        }
        let mut rest = Vec::new();
        for (i, name) in info.attr_names.iter().enumerate() {
            if named_attrs.contains(&name.as_str()) {
                continue;
            }
            let c = self.find(node.children[i]);
            if op.rest.is_some() {
                rest.push((name.clone(), c));
                continue;
            }
            let default = schema
                .and_then(|s| s.attribute(name))
                .and_then(|a| a.default.clone());
            let ok = match (default, self.eg[c].data.attr) {
                (None, None) => self.is_none(c),
                (Some(d), Some(a)) => {
                    AttrValue::new(d) == AttrValue::new(self.eg.analysis.attrs.get(a).clone())
                }
                _ => false,
            };
            if !ok {
                self.fail(p, || {
                    format!(
                        "attribute '{name}' of {} is not its default (name it in the pattern, or use ..rest)",
                        info.op_type
                    )
                });
                return Vec::new();
            }
        }
        if let Some(r) = op.rest {
            envs = envs
                .into_iter()
                .flat_map(|e| bind(&e, r.0 as usize, Bound::Rest(rest.clone()), self.eg))
                .collect();
        }
        envs
    }

    /// The class of a named attribute or logical parameter, and its input slot when it is an
    /// input.
    fn param_class(&self, info: &OpInfo, node: &ONode, name: &str) -> Option<(Id, Option<usize>)> {
        let roles = Roles::new(info, &node.children);
        if info.domain.is_empty() {
            if let Some(p) = logical_param(&info.op_type, info.since_version, name) {
                return match p.loc {
                    ParamLoc::Input(slot) => Some((roles.input(slot)?, Some(slot))),
                    ParamLoc::Attr(a) => Some((roles.attr(a)?, None)),
                };
            }
        }
        Some((roles.attr(name)?, None))
    }

    /// The input slots a pattern's positional inputs address (logical-parameter inputs are
    /// not positional).
    fn positional_slots(&self, info: &OpInfo) -> Vec<usize> {
        let logical: Vec<usize> = if info.domain.is_empty() {
            onnx_rules::params::logical_input_slots(&info.op_type, info.since_version)
        } else {
            Vec::new()
        };
        (0..info.n_inputs)
            .filter(|s| !logical.contains(s))
            .collect()
    }

    fn inputs(&self, op: &OpPat, info: &OpInfo, node: &ONode, env: &Env) -> Vec<Env> {
        let n_attrs = info.attr_names.len();
        let slots = self.positional_slots(info);
        let classes: Vec<Id> = slots
            .iter()
            .map(|&s| self.find(node.children[n_attrs + s]))
            .collect();
        let variadic = matches!(op.inputs.last(), Some(InputPat::Variadic(_)));
        let fixed = if variadic {
            op.inputs.len() - 1
        } else {
            op.inputs.len()
        };
        if classes.len() < fixed {
            // Missing trailing inputs: only optional patterns may match them (as absent).
            return Vec::new();
        }
        // Unmentioned trailing inputs must be absent.
        if !variadic && classes[fixed..].iter().any(|&c| !self.is_none(c)) {
            return Vec::new();
        }
        let pats = &op.inputs[..fixed];
        if self.ac && fixed == 2 && onnx_rules::is_associative(&info.op_type) && !variadic {
            let flat = self.flatten_pattern(op);
            if flat.len() > 2 {
                return self.ac_inputs(info, node, &flat, env);
            }
        }
        let mut results = self.input_seq(pats, &classes[..fixed], env);
        if op.commutative && fixed == 2 && !variadic {
            let swapped = [classes[1], classes[0]];
            for e in self.input_seq(pats, &swapped, env) {
                if !results.contains(&e) {
                    results.push(e);
                }
            }
        }
        if let Some(InputPat::Variadic(v)) = op.inputs.last() {
            let rest: Vec<Id> = classes[fixed..].to_vec();
            results = results
                .into_iter()
                .flat_map(|e| bind(&e, v.0 as usize, Bound::List(rest.clone()), self.eg))
                .collect();
        }
        results
    }

    fn input_seq(&self, pats: &[InputPat], classes: &[Id], env: &Env) -> Vec<Env> {
        let mut envs = vec![env.clone()];
        for (p, &c) in pats.iter().zip(classes) {
            let mut next = Vec::new();
            for e in &envs {
                match p {
                    InputPat::Pat(p) => next.extend(self.pat(*p, c, e)),
                    InputPat::Optional(v) => {
                        let b = if self.is_none(c) {
                            Bound::Absent
                        } else {
                            Bound::Class(c)
                        };
                        next.extend(bind(e, v.0 as usize, b, self.eg));
                    }
                    InputPat::Variadic(_) => {}
                }
                if next.len() >= MAX_MATCHES_PER_CLASS {
                    break;
                }
            }
            envs = next;
            if envs.is_empty() {
                break;
            }
        }
        envs
    }

    /// The operand patterns of a chain of the same associative op in the pattern.
    fn flatten_pattern(&self, op: &OpPat) -> Vec<PatId> {
        let mut out = Vec::new();
        for i in &op.inputs {
            let InputPat::Pat(p) = i else {
                return Vec::new();
            };
            match self.rule.pat(*p) {
                Pat::Op(inner)
                    if inner.head == op.head
                        && inner.attrs.is_empty()
                        && inner.rest.is_none()
                        && inner.outputs.is_none() =>
                {
                    let sub = self.flatten_pattern(inner);
                    if sub.is_empty() {
                        out.push(*p);
                    } else {
                        out.extend(sub);
                    }
                }
                _ => out.push(*p),
            }
        }
        out
    }

    /// Matches flattened operand patterns against every flattening of the e-graph's chain to
    /// the same number of operands, in every order.
    fn ac_inputs(&self, info: &OpInfo, node: &ONode, flat: &[PatId], env: &Env) -> Vec<Env> {
        let n_attrs = info.attr_names.len();
        let start: Vec<Id> = node.children[n_attrs..n_attrs + 2]
            .iter()
            .map(|&c| self.find(c))
            .collect();
        let mut lists: Vec<Vec<Id>> = Vec::new();
        self.expand(&info.op_type, start, flat.len(), &mut lists, 0);
        let mut out = Vec::new();
        for list in lists {
            for perm in permutations(list.len()) {
                let mut envs = vec![env.clone()];
                for (k, &p) in flat.iter().enumerate() {
                    envs = envs
                        .iter()
                        .flat_map(|e| self.pat(p, list[perm[k]], e))
                        .collect();
                    if envs.is_empty() {
                        break;
                    }
                }
                for e in envs {
                    if !out.contains(&e) {
                        out.push(e);
                    }
                }
                if out.len() >= MAX_MATCHES_PER_CLASS {
                    return out;
                }
            }
        }
        out
    }

    fn expand(&self, op_type: &str, list: Vec<Id>, n: usize, out: &mut Vec<Vec<Id>>, depth: usize) {
        if list.len() == n {
            let mut key = list.clone();
            key.sort();
            if !out.iter().any(|l| {
                let mut s = l.clone();
                s.sort();
                s == key
            }) {
                out.push(list);
            }
            return;
        }
        if list.len() > n || depth > 8 || out.len() > 64 {
            return;
        }
        for i in 0..list.len() {
            for m in &self.eg[list[i]].nodes {
                let NodeKind::Op(op) = m.kind else { continue };
                let inf = self.eg.analysis.ops.get(op);
                if inf.op_type != op_type
                    || !inf.domain.is_empty()
                    || inf.is_tuple
                    || inf.n_inputs != 2
                {
                    continue;
                }
                let a = inf.attr_names.len();
                let mut next = list.clone();
                next.splice(i..=i, m.children[a..a + 2].iter().map(|&c| self.find(c)));
                self.expand(op_type, next, n, out, depth + 1);
            }
        }
    }
}

fn p_name(op: &str, since: i64, slot: usize) -> &'static str {
    onnx_rules::params::logical_params(op, since)
        .into_iter()
        .find(|p| p.loc == ParamLoc::Input(slot))
        .map_or("?", |p| p.name)
}

/// Binds variable `v`; when already bound, the binding must be the same (same class).
pub(crate) fn bind(env: &Env, v: usize, b: Bound, eg: &OnnxEGraph) -> Option<Env> {
    match &env[v] {
        None => {
            let mut e = env.clone();
            e[v] = Some(b);
            Some(e)
        }
        Some(old) => {
            let same = match (old, &b) {
                (Bound::Class(x), Bound::Class(y)) => eg.find(*x) == eg.find(*y),
                (Bound::Op(o, xs), Bound::Op(p, ys)) => {
                    o == p && xs.iter().zip(ys).all(|(x, y)| eg.find(*x) == eg.find(*y))
                }
                (x, y) => x == y,
            };
            same.then(|| env.clone())
        }
    }
}

/// All permutations of 0..n (n is small: at most the length of a flattened chain).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}
