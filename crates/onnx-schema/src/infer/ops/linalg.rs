//! Linear algebra: MatMul (numpy semantics with 1-D promotion and batch broadcasting),
//! MatMulInteger, QLinearMatMul, Gemm, Einsum (explicit and implicit outputs, ellipsis) and
//! Det. Inner dims that must agree are checked: MatMul of 3x4 by 5x6 is an error.

use std::collections::BTreeMap;

use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    Some(match op {
        "MatMul" | "MatMulInteger" => |ctx| matmul(ctx, 0, 1),
        "QLinearMatMul" => |ctx| matmul(ctx, 0, 3),
        "Gemm" => gemm,
        "Einsum" => einsum,
        "Det" => det,
        _ => return None,
    })
}

fn matmul(ctx: &NodeCtx<'_>, a_at: usize, b_at: usize) -> Result<Vec<Out>, InferError> {
    let (Some(a), Some(b)) = (ctx.shape(a_at), ctx.shape(b_at)) else {
        return Ok(vec![Out::default()]);
    };
    Ok(vec![Out::maybe_shape(matmul_dims(
        ctx, &a, &b, a_at, b_at,
    )?)])
}

/// numpy's matmul of shapes `a` and `b` (inputs `a_at` and `b_at`, named in errors); `None` when
/// a rank is too small to split.
pub(crate) fn matmul_dims(
    ctx: &NodeCtx<'_>,
    a: &[SymDim],
    b: &[SymDim],
    a_at: usize,
    b_at: usize,
) -> Result<Option<Dims>, InferError> {
    if a.is_empty() || b.is_empty() {
        return Err(ctx.fail(format!(
            "{} and {} must have rank >= 1",
            ctx.describe(a_at),
            ctx.describe(b_at)
        )));
    }
    let a2: Dims = if a.len() == 1 {
        [&[SymDim::Known(1)][..], a].concat()
    } else {
        a.to_vec()
    };
    let b2: Dims = if b.len() == 1 {
        [b, &[SymDim::Known(1)][..]].concat()
    } else {
        b.to_vec()
    };
    let (Some((a_k, a_rest)), Some((b_n, b_rest))) = (a2.split_last(), b2.split_last()) else {
        return Ok(None);
    };
    let (Some((a_m, a_batch)), Some((b_k, b_batch))) = (a_rest.split_last(), b_rest.split_last())
    else {
        return Ok(None);
    };
    if dims::unify(a_k, b_k).is_none() {
        return Err(ctx.fail(format!(
            "{} and {}: inner dims {a_k} and {b_k} differ",
            ctx.describe(a_at),
            ctx.describe(b_at)
        )));
    }
    let mut out = dims::broadcast(&[a_batch, b_batch]).map_err(|reason| {
        ctx.fail(format!(
            "{} and {}: batch dims: {reason}",
            ctx.describe(a_at),
            ctx.describe(b_at)
        ))
    })?;
    if a.len() > 1 {
        out.push(a_m.clone());
    }
    if b.len() > 1 {
        out.push(b_n.clone());
    }
    Ok(Some(out))
}

fn gemm(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (a, b) = (ctx.shape(0), ctx.shape(1));
    let trans_a = ctx.attr_int_or("transA", 0) != 0;
    let trans_b = ctx.attr_int_or("transB", 0) != 0;
    let pick = |s: &Option<Dims>, i: usize| -> Result<Option<(SymDim, SymDim)>, InferError> {
        match s.as_deref() {
            None => Ok(None),
            Some([r, c]) => Ok(Some((r.clone(), c.clone()))),
            Some(_) => Err(ctx.fail(format!("{} must have rank 2", ctx.describe(i)))),
        }
    };
    let a = pick(&a, 0)?.map(|(r, c)| if trans_a { (c, r) } else { (r, c) });
    let b = pick(&b, 1)?.map(|(r, c)| if trans_b { (c, r) } else { (r, c) });
    if let (Some((_, ak)), Some((bk, _))) = (&a, &b) {
        if dims::unify(ak, bk).is_none() {
            return Err(ctx.fail(format!(
                "{} (transA={}) and {} (transB={}): inner dims {ak} and {bk} differ",
                ctx.describe(0),
                i32::from(trans_a),
                ctx.describe(1),
                i32::from(trans_b)
            )));
        }
    }
    let m = a.map_or(SymDim::Unknown, |(m, _)| m);
    let n = b.map_or(SymDim::Unknown, |(_, n)| n);
    Ok(vec![Out::shape(vec![m, n])])
}

/// One operand term of an einsum equation: its letters, with the ellipsis position.
struct Term {
    letters: Vec<char>,
    ellipsis_at: Option<usize>,
}

fn parse_term(ctx: &NodeCtx<'_>, text: &str) -> Result<Term, InferError> {
    let mut letters = Vec::new();
    let mut ellipsis_at = None;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("...") {
            if ellipsis_at.is_some() {
                return Err(ctx.bad_attr("equation", format!("term '{text}' has two ellipses")));
            }
            ellipsis_at = Some(letters.len());
            rest = after;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(ctx.bad_attr("equation", format!("unexpected '{c}' in term '{text}'")));
        }
        letters.push(c);
        rest = rest.get(c.len_utf8()..).unwrap_or_default();
    }
    Ok(Term {
        letters,
        ellipsis_at,
    })
}

fn einsum(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let equation: String = ctx
        .attr_str("equation")
        .ok_or_else(|| ctx.bad_attr("equation", "required attribute is missing"))?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    let terms: Vec<Term> = lhs
        .split(',')
        .map(|t| parse_term(ctx, t))
        .collect::<Result<_, _>>()?;
    if terms.len() != ctx.n_inputs() {
        return Err(ctx.bad_attr(
            "equation",
            format!(
                "'{equation}' has {} operands but the node has {} inputs",
                terms.len(),
                ctx.n_inputs()
            ),
        ));
    }
    let mut letter_dims: BTreeMap<char, SymDim> = BTreeMap::new();
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut ellipsis_shapes: Vec<Dims> = Vec::new();
    let mut all_known = true;
    for (i, term) in terms.iter().enumerate() {
        for &c in &term.letters {
            *counts.entry(c).or_default() += 1;
        }
        let Some(shape) = ctx.shape(i) else {
            all_known = false;
            continue;
        };
        let n_ellipsis = match shape.len().checked_sub(term.letters.len()) {
            Some(n) if term.ellipsis_at.is_some() || n == 0 => n,
            _ => {
                return Err(ctx.fail(format!(
                    "{} does not match einsum term with {} letters",
                    ctx.describe(i),
                    term.letters.len()
                )))
            }
        };
        let at = term.ellipsis_at.unwrap_or(term.letters.len());
        ellipsis_shapes.push(shape.get(at..at + n_ellipsis).unwrap_or_default().to_vec());
        let labelled = shape
            .get(..at)
            .unwrap_or_default()
            .iter()
            .chain(shape.get(at + n_ellipsis..).unwrap_or_default());
        for (&c, dim) in term.letters.iter().zip(labelled) {
            let merged = match letter_dims.get(&c) {
                None => Some(dim.clone()),
                // A dim of 1 broadcasts against the letter's other dims.
                Some(seen) if dim.is(1) => Some(seen.clone()),
                Some(seen) if seen.is(1) => Some(dim.clone()),
                Some(seen) => dims::unify(seen, dim),
            };
            let merged = merged.ok_or_else(|| {
                ctx.fail(format!(
                    "einsum letter '{c}' has different dims in the inputs ({})",
                    ctx.describe(i)
                ))
            })?;
            letter_dims.insert(c, merged);
        }
    }
    if !all_known {
        return Ok(vec![Out::default()]);
    }
    let refs: Vec<&[SymDim]> = ellipsis_shapes.iter().map(Vec::as_slice).collect();
    let ellipsis = dims::broadcast(&refs)
        .map_err(|reason| ctx.fail(format!("einsum ellipsis dims: {reason}")))?;
    let out_term = match rhs {
        Some(r) => parse_term(ctx, r)?,
        None => Term {
            letters: counts
                .iter()
                .filter(|(_, n)| **n == 1)
                .map(|(c, _)| *c)
                .collect(),
            ellipsis_at: Some(0),
        },
    };
    let mut out = Vec::new();
    for (pos, c) in out_term.letters.iter().enumerate() {
        if out_term.ellipsis_at == Some(pos) {
            out.extend(ellipsis.iter().cloned());
        }
        let dim = letter_dims.get(c).cloned().ok_or_else(|| {
            ctx.bad_attr(
                "equation",
                format!("output letter '{c}' is not in any input"),
            )
        })?;
        out.push(dim);
    }
    if out_term.ellipsis_at == Some(out_term.letters.len()) {
        out.extend(ellipsis.iter().cloned());
    }
    Ok(vec![Out::shape(out)])
}

fn det(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let Some(batch) = x.len().checked_sub(2).and_then(|n| x.get(..n)) else {
        return Err(ctx.fail(format!("{} must have rank >= 2", ctx.describe(0))));
    };
    Ok(vec![Out::shape(batch.to_vec())])
}
