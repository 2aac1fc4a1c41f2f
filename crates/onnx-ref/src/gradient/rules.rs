//! Vector-Jacobian product rules, one per default-domain op: given a forward node and the
//! gradients of its outputs, emit the nodes that compute the gradients of its inputs.
//!
//! Conventions: `g` is the gradient of output 0, `y` output 0, `x`/`a`/`b` the inputs. The
//! gradient of an operand that numpy-broadcasting may have expanded goes through
//! `SumToShapeOf`. A rule only computes the inputs the caller wants (those that depend on an
//! `xs` entry). Ops whose outputs are piecewise constant or not real-valued (Shape, Equal,
//! ArgMax, Floor, ...) pass no gradient.

use std::f64::consts::PI;

use onnx_proto::{AttributeProto, NodeProto};

use super::emit::{int_attr, ints_attr, Emitter};
use crate::dtype::DType;
use crate::kernel::normalize_domain;

/// Why a rule produced no gradients.
#[derive(Debug)]
pub(crate) enum RuleError {
    /// No rule exists for this op.
    NoRule,
    /// The node cannot be differentiated as written (bad attribute, opset too old...).
    Invalid(String),
}

type Grads = Vec<Option<String>>;

fn attr<'n>(node: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    node.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
}

fn int_of(node: &NodeProto, name: &str, default: i64) -> Result<i64, RuleError> {
    match attr(node, name) {
        None => Ok(default),
        Some(a) => {
            a.i.ok_or_else(|| RuleError::Invalid(format!("attribute '{name}' is not an int")))
        }
    }
}

fn float_of(node: &NodeProto, name: &str, default: f64) -> Result<f64, RuleError> {
    match attr(node, name) {
        None => Ok(default),
        Some(a) => {
            a.f.map(f64::from)
                .ok_or_else(|| RuleError::Invalid(format!("attribute '{name}' is not a float")))
        }
    }
}

fn require(e: &Emitter, min: i64, op: &str) -> Result<(), RuleError> {
    if e.opset < min {
        return Err(RuleError::Invalid(format!(
            "the derivative of '{op}' needs default-domain opset {min} or later, the model has {}",
            e.opset
        )));
    }
    Ok(())
}

/// Emits the gradients of `node`'s inputs from the gradients of its outputs (`gy[k]`, `None`
/// when no gradient reaches output k). `wants[i]` says whether input i needs one. Returns one
/// entry per input.
pub(crate) fn vjp(
    e: &mut Emitter,
    node: &NodeProto,
    gy: &[Option<String>],
    wants: &[bool],
) -> Result<Grads, RuleError> {
    if !normalize_domain(node.domain.as_deref().unwrap_or("")).is_empty() {
        return Err(RuleError::NoRule);
    }
    let op = node.op_type.as_deref().unwrap_or("");
    let n_in = node.input.len();
    let mut out: Grads = vec![None; n_in];
    if n_in == 0 {
        return Ok(out);
    }
    let input = |i: usize| node.input.get(i).cloned().unwrap_or_default();
    let want = |i: usize| wants.get(i).copied().unwrap_or(false) && !input(i).is_empty();
    let y = node.output.first().cloned().unwrap_or_default();

    // Multi-output ops and ops with no gradient first.
    match op {
        "Shape" | "Size" | "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual"
        | "Not" | "And" | "Or" | "Xor" | "ArgMax" | "ArgMin" | "Floor" | "Ceil" | "Round"
        | "Sign" | "IsNaN" | "IsInf" | "NonZero" | "ConstantOfShape" | "EyeLike" => return Ok(out),
        "Split" => return split(e, node, gy, want(0), out),
        _ => {}
    }
    let Some(g) = gy.first().cloned().flatten() else {
        return Ok(out);
    };
    let g = g.as_str();
    let (a, b) = (input(0), input(1));
    match op {
        "Identity" => out[0] = Some(g.to_string()),
        "Add" | "Sub" => {
            if want(0) {
                out[0] = Some(e.sum_to(g, &a));
            }
            if want(1) {
                let gb = if op == "Sub" { e.neg(g) } else { g.to_string() };
                out[1] = Some(e.sum_to(&gb, &b));
            }
        }
        "Mul" => {
            if want(0) {
                let t = e.mul(g, &b);
                out[0] = Some(e.sum_to(&t, &a));
            }
            if want(1) {
                let t = e.mul(g, &a);
                out[1] = Some(e.sum_to(&t, &b));
            }
        }
        "Div" => {
            if want(0) {
                let t = e.div(g, &b);
                out[0] = Some(e.sum_to(&t, &a));
            }
            if want(1) {
                // d(a/b)/db = -y/b
                let gy_ = e.mul(g, &y);
                let t = e.div(&gy_, &b);
                let t = e.neg(&t);
                out[1] = Some(e.sum_to(&t, &b));
            }
        }
        "Sum" | "Mean" => {
            let gi = if op == "Mean" {
                let n = e.scalar_like(g, n_in as f64);
                e.div(g, &n)
            } else {
                g.to_string()
            };
            for (i, slot) in out.iter_mut().enumerate() {
                if want(i) {
                    *slot = Some(e.sum_to(&gi, &input(i)));
                }
            }
        }
        "Neg" => out[0] = Some(e.neg(g)),
        "Relu" | "LeakyRelu" => {
            let zero = e.scalar_like(&a, 0.0);
            let pos = e.op("Greater", &[&a, &zero]);
            let other = if op == "Relu" {
                e.scalar_like(g, 0.0)
            } else {
                let alpha = float_of(node, "alpha", 0.01)?;
                let s = e.scalar_like(g, alpha);
                e.mul(g, &s)
            };
            out[0] = Some(e.where_(&pos, g, &other));
        }
        "Sigmoid" => {
            let one = e.scalar_like(&y, 1.0);
            let c = e.sub(&one, &y);
            let d = e.mul(&y, &c);
            out[0] = Some(e.mul(g, &d));
        }
        "Tanh" => {
            let one = e.scalar_like(&y, 1.0);
            let sq = e.mul(&y, &y);
            let d = e.sub(&one, &sq);
            out[0] = Some(e.mul(g, &d));
        }
        "Exp" => out[0] = Some(e.mul(g, &y)),
        "Log" => out[0] = Some(e.div(g, &a)),
        "Sqrt" => {
            let twice = e.add(&y, &y);
            out[0] = Some(e.div(g, &twice));
        }
        "Reciprocal" => {
            let sq = e.mul(&y, &y);
            let t = e.mul(g, &sq);
            out[0] = Some(e.neg(&t));
        }
        "Abs" => {
            let s = e.op("Sign", &[&a]);
            out[0] = Some(e.mul(g, &s));
        }
        "Sin" => {
            let c = e.op("Cos", &[&a]);
            out[0] = Some(e.mul(g, &c));
        }
        "Cos" => {
            let s = e.op("Sin", &[&a]);
            let t = e.mul(g, &s);
            out[0] = Some(e.neg(&t));
        }
        "Erf" => {
            // d erf(x) = 2/sqrt(pi) exp(-x^2)
            let sq = e.mul(&a, &a);
            let n = e.neg(&sq);
            let ex = e.op("Exp", &[&n]);
            let c = e.scalar_like(&a, 2.0 / PI.sqrt());
            let d = e.mul(&c, &ex);
            out[0] = Some(e.mul(g, &d));
        }
        "Softplus" => {
            let s = e.op("Sigmoid", &[&a]);
            out[0] = Some(e.mul(g, &s));
        }
        "Pow" => {
            let bf = e.cast_like(&b, &a);
            if want(0) {
                // d a^b / da = b a^(b-1)
                let one = e.scalar_like(&bf, 1.0);
                let bm1 = e.sub(&bf, &one);
                let p = e.op("Pow", &[&a, &bm1]);
                let d = e.mul(&bf, &p);
                let t = e.mul(g, &d);
                out[0] = Some(e.sum_to(&t, &a));
            }
            if want(1) {
                // d a^b / db = a^b ln a
                let ln = e.op("Log", &[&a]);
                let d = e.mul(&y, &ln);
                let t = e.mul(g, &d);
                let t = e.cast_like(&t, &b);
                out[1] = Some(e.sum_to(&t, &b));
            }
        }
        "Clip" => clip(e, node, g, &mut out, &want)?,
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => {
            if want(0) {
                out[0] = Some(e.reshape_like(g, &a));
            }
        }
        "Expand" => {
            if want(0) {
                out[0] = Some(e.sum_to(g, &a));
            }
        }
        "Transpose" => out[0] = Some(transpose(e, node, g)?),
        "Cast" => {
            let to = int_of(node, "to", 0)?;
            if i32::try_from(to)
                .ok()
                .and_then(DType::from_code)
                .is_some_and(DType::is_float)
            {
                out[0] = Some(e.cast_like(g, &a));
            }
        }
        "Where" => {
            let zero = e.scalar_like(g, 0.0);
            if want(1) {
                let t = e.where_(&a, g, &zero);
                out[1] = Some(e.sum_to(&t, &b));
            }
            if want(2) {
                let t = e.where_(&a, &zero, g);
                out[2] = Some(e.sum_to(&t, &input(2)));
            }
        }
        "MatMul" => matmul(e, g, &a, &b, &mut out, &want),
        "Gemm" => gemm(e, node, g, &mut out, &want)?,
        "ReduceSum" | "ReduceMean" | "ReduceSumSquare" | "ReduceL1" | "ReduceL2"
        | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceMax" | "ReduceMin" => {
            if want(0) {
                out[0] = Some(reduce(e, node, op, g)?);
            }
        }
        "Softmax" | "LogSoftmax" => out[0] = Some(softmax(e, node, op, g)?),
        "Concat" => concat(e, node, g, &mut out, &want)?,
        _ => return Err(RuleError::NoRule),
    }
    Ok(out)
}

/// Clip: the gradient passes where `min <= x <= max`; the bounds (inputs from opset 11) get
/// it where they clipped.
fn clip(
    e: &mut Emitter,
    node: &NodeProto,
    g: &str,
    out: &mut Grads,
    want: &dyn Fn(usize) -> bool,
) -> Result<(), RuleError> {
    let x = node.input.first().cloned().unwrap_or_default();
    let bound = |e: &mut Emitter, i: usize, attr_name: &str| -> Result<Option<String>, RuleError> {
        if e.opset >= 11 {
            Ok(node.input.get(i).filter(|n| !n.is_empty()).cloned())
        } else {
            match attr(node, attr_name) {
                None => Ok(None),
                Some(_) => {
                    let v = float_of(node, attr_name, 0.0)?;
                    Ok(Some(e.scalar_like(&x, v)))
                }
            }
        }
    };
    let lo = bound(e, 1, "min")?;
    let hi = bound(e, 2, "max")?;
    let zero = e.scalar_like(g, 0.0);
    let below = lo.as_ref().map(|lo| e.op("Less", &[&x, lo]));
    let above = hi.as_ref().map(|hi| e.op("Greater", &[&x, hi]));
    if want(0) {
        let mut gx = g.to_string();
        if let Some(c) = &below {
            gx = e.where_(c, &zero, &gx);
        }
        if let Some(c) = &above {
            gx = e.where_(c, &zero, &gx);
        }
        out[0] = Some(gx);
    }
    if e.opset >= 11 {
        for (i, cond, bound) in [(1, &below, &lo), (2, &above, &hi)] {
            if let (true, Some(c), Some(bd)) = (want(i), cond, bound) {
                let t = e.where_(c, g, &zero);
                out[i] = Some(e.sum_to(&t, bd));
            }
        }
    }
    Ok(())
}

/// Transpose: the inverse permutation (the default reversal is its own inverse).
fn transpose(e: &mut Emitter, node: &NodeProto, g: &str) -> Result<String, RuleError> {
    let Some(perm) = attr(node, "perm").map(|a| a.ints.clone()) else {
        return Ok(e.op("Transpose", &[g]));
    };
    let mut inverse = vec![-1i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        let slot = usize::try_from(p)
            .ok()
            .and_then(|p| inverse.get_mut(p))
            .filter(|s| **s < 0)
            .ok_or_else(|| RuleError::Invalid(format!("perm {perm:?} is not a permutation")))?;
        *slot = i as i64;
    }
    Ok(e.op_with("Transpose", &[g], vec![ints_attr("perm", &inverse)]))
}

/// MatMul (any ranks, numpy semantics): rank-1 operands are promoted to matrices, the batch
/// dimensions summed back where an operand was broadcast.
fn matmul(
    e: &mut Emitter,
    g: &str,
    a: &str,
    b: &str,
    out: &mut Grads,
    want: &dyn Fn(usize) -> bool,
) {
    let a2 = e.internal("PromoteMatMulOperand", &[a], vec![int_attr("side", 0)]);
    let b2 = e.internal("PromoteMatMulOperand", &[b], vec![int_attr("side", 1)]);
    let g2 = e.internal("PromoteMatMulResult", &[g, a, b], Vec::new());
    if want(0) {
        let bt = e.internal("SwapLastAxes", &[&b2], Vec::new());
        let da = e.op("MatMul", &[&g2, &bt]);
        let da = e.sum_to(&da, &a2);
        out[0] = Some(e.reshape_like(&da, a));
    }
    if want(1) {
        let at = e.internal("SwapLastAxes", &[&a2], Vec::new());
        let db = e.op("MatMul", &[&at, &g2]);
        let db = e.sum_to(&db, &b2);
        out[1] = Some(e.reshape_like(&db, b));
    }
}

/// Gemm: `Y = alpha op(A) op(B) + beta C`.
fn gemm(
    e: &mut Emitter,
    node: &NodeProto,
    g: &str,
    out: &mut Grads,
    want: &dyn Fn(usize) -> bool,
) -> Result<(), RuleError> {
    let a = node.input.first().cloned().unwrap_or_default();
    let b = node.input.get(1).cloned().unwrap_or_default();
    let alpha = float_of(node, "alpha", 1.0)?;
    let beta = float_of(node, "beta", 1.0)?;
    let trans_a = int_of(node, "transA", 0)? != 0;
    let trans_b = int_of(node, "transB", 0)? != 0;
    let scaled = |e: &mut Emitter, factor: f64| {
        if factor == 1.0 {
            g.to_string()
        } else {
            let s = e.scalar_like(g, factor);
            e.mul(g, &s)
        }
    };
    let ga = scaled(e, alpha);
    let t = |e: &mut Emitter, v: &str| e.op("Transpose", &[v]);
    if want(0) {
        out[0] = Some(if !trans_a {
            let bt = if trans_b { b.clone() } else { t(e, &b) };
            e.op("MatMul", &[&ga, &bt])
        } else {
            let ob = if trans_b { t(e, &b) } else { b.clone() };
            let gt = t(e, &ga);
            e.op("MatMul", &[&ob, &gt])
        });
    }
    if want(1) {
        out[1] = Some(if !trans_b {
            let at = if trans_a { a.clone() } else { t(e, &a) };
            e.op("MatMul", &[&at, &ga])
        } else {
            let oa = if trans_a { t(e, &a) } else { a.clone() };
            let gt = t(e, &ga);
            e.op("MatMul", &[&gt, &oa])
        });
    }
    if want(2) {
        let c = node.input.get(2).cloned().unwrap_or_default();
        let gc = scaled(e, beta);
        out[2] = Some(e.sum_to(&gc, &c));
    }
    Ok(())
}

/// Reductions: the output gradient is broadcast back over the reduced axes. With
/// `keepdims = 0` the reduced shape comes from a copy of the forward node with `keepdims = 1`
/// (same axes, attribute or input, whatever the opset), so no axis arithmetic is needed.
fn reduce(e: &mut Emitter, node: &NodeProto, op: &str, g: &str) -> Result<String, RuleError> {
    let x = node.input.first().cloned().unwrap_or_default();
    let y = node.output.first().cloned().unwrap_or_default();
    let keep = int_of(node, "keepdims", 1)? != 0;
    let kept_shape = if keep {
        None
    } else {
        let mut copy = node.clone();
        copy.attribute
            .retain(|a| a.name.as_deref() != Some("keepdims"));
        copy.attribute.push(int_attr("keepdims", 1));
        let name = e.fresh(&format!("{op}_keepdims"));
        copy.output = vec![name.clone()];
        copy.name = Some(name.clone());
        e.push(copy);
        Some(e.shape(&name))
    };
    let spread = |e: &mut Emitter, t: &str| {
        let t = match &kept_shape {
            Some(shape) => {
                let attrs = if e.opset >= 14 {
                    vec![int_attr("allowzero", 1)]
                } else {
                    Vec::new()
                };
                e.op_with("Reshape", &[t, shape], attrs)
            }
            None => t.to_string(),
        };
        e.expand_like(&t, &x)
    };
    let gx = spread(e, g);
    Ok(match op {
        "ReduceSum" => gx,
        "ReduceMean" => {
            let nx = e.op("Size", &[&x]);
            let ny = e.op("Size", &[g]);
            let nx = e.cast_like(&nx, g);
            let ny = e.cast_like(&ny, g);
            let count = e.div(&nx, &ny);
            e.div(&gx, &count)
        }
        "ReduceSumSquare" => {
            let twice = e.add(&x, &x);
            e.mul(&gx, &twice)
        }
        "ReduceL1" => {
            let s = e.op("Sign", &[&x]);
            e.mul(&gx, &s)
        }
        "ReduceL2" => {
            let ys = spread(e, &y);
            let d = e.div(&x, &ys);
            e.mul(&gx, &d)
        }
        "ReduceLogSum" => {
            let sum = e.op("Exp", &[&y]);
            let sums = spread(e, &sum);
            e.div(&gx, &sums)
        }
        "ReduceLogSumExp" => {
            let ys = spread(e, &y);
            let d = e.sub(&x, &ys);
            let w = e.op("Exp", &[&d]);
            e.mul(&gx, &w)
        }
        _ => {
            // ReduceMax / ReduceMin: every position equal to the extremum gets the gradient.
            require(e, 11, op)?;
            let ys = spread(e, &y);
            let hit = e.op("Equal", &[&x, &ys]);
            let zero = e.scalar_like(g, 0.0);
            e.where_(&hit, &gx, &zero)
        }
    })
}

/// Softmax / LogSoftmax along `axis` (from opset 13), or over the flattened trailing axes
/// from `axis` (before 13).
fn softmax(e: &mut Emitter, node: &NodeProto, op: &str, g: &str) -> Result<String, RuleError> {
    let x = node.input.first().cloned().unwrap_or_default();
    let y = node.output.first().cloned().unwrap_or_default();
    let modern = e.opset >= 13;
    let axis = int_of(node, "axis", if modern { -1 } else { 1 })?;
    let (y2, g2, axes) = if modern {
        (y.clone(), g.to_string(), vec![axis])
    } else {
        let flat = vec![int_attr("axis", axis)];
        let y2 = e.op_with("Flatten", &[&y], flat.clone());
        let g2 = e.op_with("Flatten", &[g], flat);
        (y2, g2, vec![1])
    };
    let gx = if op == "Softmax" {
        // y * (g - sum(g * y))
        let gy = e.mul(&g2, &y2);
        let s = e.reduce_sum_keep(&gy, &axes);
        let d = e.sub(&g2, &s);
        e.mul(&y2, &d)
    } else {
        // g - exp(y) * sum(g)
        let s = e.reduce_sum_keep(&g2, &axes);
        let p = e.op("Exp", &[&y2]);
        let t = e.mul(&p, &s);
        e.sub(&g2, &t)
    };
    Ok(if modern { gx } else { e.reshape_like(&gx, &x) })
}

/// Concat: each input's gradient is its slice of `g` along `axis`, at offsets computed from
/// the inputs' shapes at run time.
fn concat(
    e: &mut Emitter,
    node: &NodeProto,
    g: &str,
    out: &mut Grads,
    want: &dyn Fn(usize) -> bool,
) -> Result<(), RuleError> {
    require(e, 11, "Concat")?;
    let axis = match attr(node, "axis").and_then(|a| a.i) {
        Some(a) => a,
        None => return Err(RuleError::Invalid("attribute 'axis' is missing".into())),
    };
    let Some(last) = (0..node.input.len()).rev().find(|&i| want(i)) else {
        return Ok(());
    };
    let axis_c = e.const_i64(&[axis]);
    let mut offset = e.const_i64(&[0]);
    for (i, xi) in node.input.iter().enumerate().take(last + 1) {
        let shape = e.shape(xi);
        let len = e.op_with("Gather", &[&shape, &axis_c], vec![int_attr("axis", 0)]);
        let end = e.add(&offset, &len);
        if want(i) {
            out[i] = Some(e.op("Slice", &[g, &offset, &end, &axis_c]));
        }
        offset = end;
    }
    Ok(())
}

/// Split: the input gradient is the concatenation of the output gradients, zeros for the
/// outputs no gradient reaches.
fn split(
    e: &mut Emitter,
    node: &NodeProto,
    gy: &[Option<String>],
    wanted: bool,
    mut out: Grads,
) -> Result<Grads, RuleError> {
    if !wanted || gy.iter().all(Option::is_none) {
        return Ok(out);
    }
    let axis = int_of(node, "axis", 0)?;
    let mut parts = Vec::with_capacity(node.output.len());
    for (k, name) in node.output.iter().enumerate() {
        match gy.get(k).cloned().flatten() {
            Some(g) => parts.push(g),
            None if !name.is_empty() => parts.push(e.full_like(name, 0.0)),
            None => {
                return Err(RuleError::Invalid(format!(
                    "output {k} is unnamed, so the shape of its zero gradient is unknown"
                )))
            }
        }
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    let gx = e.op_with("Concat", &refs, vec![int_attr("axis", axis)]);
    if let Some(slot) = out.first_mut() {
        *slot = Some(gx);
    }
    Ok(out)
}
