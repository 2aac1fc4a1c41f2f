//! The e-class analysis: per class the value's type (element type and shape, symbolic dims
//! kept), the constant it is known to equal, the attribute value of attribute classes, and the
//! value names the class had in the input model. Constant folding lives here: when every input
//! of an operator is constant, `make` evaluates it with the reference interpreter's kernel
//! (within a size budget) and `modify` adds the resulting `Const` leaf to the class.
//!
//! The data the analysis keeps (the e-graph type, [`ClassData`], [`OnnxAnalysis`]) is defined
//! in the lower module `egraph` and re-exported here. Layer: above `egraph` and `fold`.

use egg::{Analysis, DidMerge, Id};

use crate::lang::{NodeKind, ONode};

pub use crate::egraph::{
    ClassData, FoldOptions, MergeCause, OnnxAnalysis, OnnxEGraph, Refusal, TypeConflict,
};

impl OnnxAnalysis {
    fn merge_cause(&self) -> MergeCause {
        match &self.current_rule {
            Some(r) => MergeCause::Rule(r.clone()),
            None if !self.rules_this_iteration.is_empty() => {
                MergeCause::Congruence(self.rules_this_iteration.clone())
            }
            None => MergeCause::Lifting,
        }
    }
}

impl Analysis<ONode> for OnnxAnalysis {
    type Data = ClassData;

    fn make(egraph: &mut OnnxEGraph, enode: &ONode, _id: Id) -> ClassData {
        match enode.kind {
            NodeKind::Attr(a) => ClassData {
                attr: Some(a),
                input_free: true,
                ..Default::default()
            },
            NodeKind::Const(c) => ClassData {
                constant: Some(c),
                input_free: true,
                ty: Some(crate::types::tensor_type_of(
                    &egraph.analysis.consts.get(c).tensor,
                )),
                ..Default::default()
            },
            NodeKind::Out(i) => {
                let t = &egraph[enode.children[0]].data;
                let constant = t
                    .tuple_constants
                    .as_ref()
                    .and_then(|c| c.get(i as usize).copied().flatten());
                let (ty, sym) = t
                    .tuple_types
                    .as_ref()
                    .and_then(|v| v.get(i as usize).cloned())
                    .unwrap_or_default();
                ClassData {
                    constant,
                    input_free: t.input_free,
                    ty: match constant {
                        Some(c) => Some(crate::types::tensor_type_of(
                            &egraph.analysis.consts.get(c).tensor,
                        )),
                        None => ty,
                    },
                    sym,
                    ..Default::default()
                }
            }
            NodeKind::Op(op) => {
                let mut d = crate::fold::analyze_op(egraph, op, &enode.children);
                d.input_free = d.constant.is_some()
                    || (!egraph.analysis.ops.get(op).nondeterministic
                        && enode.children.iter().all(|&c| egraph[c].data.input_free));
                d
            }
            NodeKind::None => ClassData {
                input_free: true,
                ..Default::default()
            },
            NodeKind::Input(_) | NodeKind::Unique(_) | NodeKind::Root => ClassData::default(),
        }
    }

    fn merge(&mut self, a: &mut ClassData, b: ClassData) -> DidMerge {
        let mut changed_a = false;
        let mut changed_b = false;
        match (&a.ty, b.ty) {
            (None, Some(t)) => {
                a.ty = Some(t);
                changed_a = true;
            }
            (Some(_), None) => changed_b = true,
            (Some(ta), Some(tb)) => {
                if !crate::types::compatible(ta, &tb) {
                    let conflict = TypeConflict {
                        left: crate::types::describe(ta),
                        right: crate::types::describe(&tb),
                        cause: self.merge_cause(),
                    };
                    self.conflicts.push(conflict);
                } else if crate::types::more_specific(&tb, ta) {
                    a.ty = Some(tb);
                    changed_a = true;
                } else if ta != &tb {
                    changed_b = true;
                }
            }
            (None, None) => {}
        }
        match (a.constant, b.constant) {
            (None, Some(c)) => {
                a.constant = Some(c);
                changed_a = true;
            }
            (Some(_), None) => changed_b = true,
            (Some(x), Some(y)) if x != y => {
                if !self.same_constant_up_to_rounding(x, y) {
                    let conflict = TypeConflict {
                        left: format!("constant #{}", x.0),
                        right: format!("constant #{}", y.0),
                        cause: self.merge_cause(),
                    };
                    self.conflicts.push(conflict);
                }
                changed_b = true;
            }
            _ => {}
        }
        fn take<T>(a: &mut Option<T>, b: Option<T>, ca: &mut bool, cb: &mut bool) {
            match (a.is_some(), b.is_some()) {
                (false, true) => {
                    *a = b;
                    *ca = true;
                }
                (true, false) => *cb = true,
                _ => {}
            }
        }
        take(
            &mut a.tuple_constants,
            b.tuple_constants,
            &mut changed_a,
            &mut changed_b,
        );
        take(&mut a.sym, b.sym, &mut changed_a, &mut changed_b);
        take(&mut a.splat, b.splat, &mut changed_a, &mut changed_b);
        take(
            &mut a.tuple_types,
            b.tuple_types,
            &mut changed_a,
            &mut changed_b,
        );
        take(&mut a.attr, b.attr, &mut changed_a, &mut changed_b);
        if a.input_free != b.input_free {
            if b.input_free {
                a.input_free = true;
                changed_a = true;
            } else {
                changed_b = true;
            }
        }
        let before = a.names.len();
        let b_len = b.names.len();
        a.names.extend(b.names);
        if a.names.len() != before {
            changed_a = true;
        }
        if a.names.len() != b_len {
            changed_b = true;
        }
        DidMerge(changed_a, changed_b)
    }

    fn modify(egraph: &mut OnnxEGraph, id: Id) {
        if let Some(c) = egraph[id].data.constant {
            let leaf = ONode::leaf(NodeKind::Const(c));
            if !egraph[id].nodes.contains(&leaf) {
                let cid = egraph.add(leaf);
                egraph.union(id, cid);
            }
            return;
        }
        // Two integer values whose elements are the same dims (named dims of the graph's
        // inputs, sums of them, constants) are equal: `Shape(present_key)[2:3]` and the
        // `Unsqueeze(seq + past)` a mask was built from are one value.
        if !egraph.analysis.fold.union_equal_dims {
            return;
        }
        if let Some(key) = sym_key(&egraph[id].data) {
            match egraph.analysis.sym_classes.get(&key) {
                Some(&other) => {
                    let other = egraph.find(other);
                    if other != egraph.find(id) {
                        egraph.union(id, other);
                    }
                }
                None => {
                    egraph.analysis.sym_classes.insert(key, id);
                }
            }
        }
    }
}

/// The [`crate::egraph::SymKey`] of an int64 or int32 scalar or vector whose every element is
/// known as a dim (at least one by name: the others are constants, folded already).
fn sym_key(d: &ClassData) -> Option<crate::egraph::SymKey> {
    use onnx_schema::infer::SymDim;
    let sym = d.sym.as_ref()?;
    let ty = d.ty.as_ref()?;
    let dtype = onnx_schema::infer::elem_type_of(ty)?;
    if dtype != onnx_proto::tensor_proto::DataType::Int64 as i32
        && dtype != onnx_proto::tensor_proto::DataType::Int32 as i32
    {
        return None;
    }
    let shape = onnx_schema::infer::shape_of(ty)?;
    let rank = shape.len();
    let len_ok = match shape.as_slice() {
        [] => sym.len() == 1,
        [SymDim::Known(n)] => *n as usize == sym.len(),
        _ => false,
    };
    let known = sym.iter().all(|s| !matches!(s, SymDim::Unknown));
    let named = sym.iter().any(|s| matches!(s, SymDim::Param(_)));
    (len_ok && known && named).then(|| (dtype, rank, sym.clone()))
}
