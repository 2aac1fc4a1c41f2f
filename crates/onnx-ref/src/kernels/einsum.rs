//! Einsum (opset 12 on): any equation, explicit (`->`) or implicit output, ellipsis with
//! broadcasting, repeated indices (diagonals) and reductions. Operands are reduced to their
//! distinct labels first, then contracted left to right, each contraction one batched GEMM
//! after a transpose/reshape to `[batch, free, contracted]`.
//!
//! 16-bit floats are computed in f32; integers wrap on overflow.

use std::collections::BTreeSet;

use ndarray::{Axis, IxDyn};

use super::matmul::{GemmElem, MatRef};
use super::{all_inputs, one, same_dtype, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Einsum", 12, LATEST, einsum);
}

/// A dimension label: a letter's ASCII code, or `ELLIPSIS_BASE + k` for the k-th ellipsis
/// dimension (counted over the broadcast ellipsis rank).
type Label = u32;
const ELLIPSIS_BASE: Label = 128;

/// One element of a term: a letter or the ellipsis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Symbol {
    Letter(u8),
    Ellipsis,
}

/// A parsed equation, before ellipses are sized.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Equation {
    inputs: Vec<Vec<Symbol>>,
    output: Option<Vec<Symbol>>,
}

fn parse_term(term: &str) -> Result<Vec<Symbol>> {
    let mut out = Vec::new();
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'.' => {
                if !term[i..].starts_with("...") {
                    return Err(RefError::op(format!("malformed ellipsis in term '{term}'")));
                }
                if out.contains(&Symbol::Ellipsis) {
                    return Err(RefError::op(format!("term '{term}' has two ellipses")));
                }
                out.push(Symbol::Ellipsis);
                i += 3;
            }
            c if c.is_ascii_alphabetic() => {
                out.push(Symbol::Letter(c));
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            c => {
                return Err(RefError::op(format!(
                    "invalid character '{}' in term '{term}'",
                    c as char
                )))
            }
        }
    }
    Ok(out)
}

fn parse_equation(eq: &str) -> Result<Equation> {
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq, None),
    };
    let inputs = lhs.split(',').map(parse_term).collect::<Result<Vec<_>>>()?;
    let output = rhs.map(parse_term).transpose()?;
    Ok(Equation { inputs, output })
}

/// Expands a term's ellipsis into `ELLIPSIS_BASE + k` labels, right-aligned against the
/// broadcast ellipsis rank `ell_rank`; `rank` is the operand's rank (None for the output).
fn expand_term(term: &[Symbol], rank: Option<usize>, ell_rank: usize) -> Result<Vec<Label>> {
    let letters = term.iter().filter(|s| **s != Symbol::Ellipsis).count();
    let own_ell = match rank {
        Some(r) if term.contains(&Symbol::Ellipsis) => r.checked_sub(letters).ok_or_else(|| {
            RefError::op(format!(
                "term has {letters} labels but the input has rank {r}"
            ))
        })?,
        Some(r) if r != letters => {
            return Err(RefError::op(format!(
                "term has {letters} labels but the input has rank {r}"
            )))
        }
        _ => ell_rank,
    };
    let mut out = Vec::with_capacity(letters + own_ell);
    for s in term {
        match s {
            Symbol::Letter(c) => out.push(*c as Label),
            Symbol::Ellipsis => {
                out.extend((ell_rank - own_ell..ell_rank).map(|k| ELLIPSIS_BASE + k as Label))
            }
        }
    }
    Ok(out)
}

/// An operand with one label per axis.
#[derive(Debug, Clone)]
struct Operand<T> {
    data: Array<T>,
    labels: Vec<Label>,
}

/// Takes the diagonal over repeated labels: the result has each label once, in order of first
/// occurrence.
fn take_diagonals<T: Copy>(op: Operand<T>) -> Operand<T> {
    let mut labels: Vec<Label> = Vec::new();
    for l in &op.labels {
        if !labels.contains(l) {
            labels.push(*l);
        }
    }
    if labels.len() == op.labels.len() {
        return op;
    }
    let shape: Vec<usize> = labels
        .iter()
        .map(|l| {
            op.labels
                .iter()
                .zip(op.data.shape())
                .filter(|(x, _)| *x == l)
                .map(|(_, d)| *d)
                .min()
                .unwrap_or(1)
        })
        .collect();
    // Input axis k reads output index position `src[k]`.
    let src: Vec<usize> = op
        .labels
        .iter()
        .map(|l| labels.iter().position(|x| x == l).unwrap_or(0))
        .collect();
    let view = op.data.view();
    let data = ndarray::ArrayD::from_shape_fn(IxDyn(&shape), |idx| {
        let full: Vec<usize> = src.iter().map(|&p| idx[p]).collect();
        view[IxDyn(&full)]
    });
    Operand {
        data: data.into_shared(),
        labels,
    }
}

/// Sums out every axis whose label is not in `keep`.
fn sum_out<T: Num>(op: Operand<T>, keep: &BTreeSet<Label>) -> Operand<T> {
    let mut data = op.data;
    let mut labels = op.labels;
    let mut k = labels.len();
    while k > 0 {
        k -= 1;
        if !keep.contains(&labels[k]) {
            data = data
                .fold_axis(Axis(k), T::zero(), |acc, x| acc.add(*x))
                .into_shared();
            labels.remove(k);
        }
    }
    Operand { data, labels }
}

/// Permutes an operand's axes into the order of `labels` (a permutation of its labels) and
/// returns its contiguous data.
fn arrange<T: Copy>(op: &Operand<T>, labels: &[Label]) -> Vec<T> {
    let perm: Vec<usize> = labels
        .iter()
        .map(|l| op.labels.iter().position(|x| x == l).unwrap_or(0))
        .collect();
    let v = op.data.view().permuted_axes(IxDyn(&perm));
    v.iter().copied().collect()
}

fn size_of<T>(op: &Operand<T>, l: Label) -> usize {
    op.labels
        .iter()
        .position(|x| *x == l)
        .map_or(1, |p| op.data.shape()[p])
}

/// Contracts `a` and `b`, keeping the labels in `keep` (the output's and later operands').
fn contract<T: GemmElem>(
    a: Operand<T>,
    b: Operand<T>,
    keep: &BTreeSet<Label>,
) -> Result<Operand<T>> {
    let b_set: BTreeSet<Label> = b.labels.iter().copied().collect();
    let a_set: BTreeSet<Label> = a.labels.iter().copied().collect();
    let a_keep: BTreeSet<Label> = keep.union(&b_set).copied().collect();
    let b_keep: BTreeSet<Label> = keep.union(&a_set).copied().collect();
    let a = sum_out(a, &a_keep);
    let b = sum_out(b, &b_keep);
    let batch: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| b_set.contains(l) && keep.contains(l))
        .copied()
        .collect();
    let summed: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| b_set.contains(l) && !keep.contains(l))
        .copied()
        .collect();
    let a_free: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| !b_set.contains(l))
        .copied()
        .collect();
    let b_free: Vec<Label> = b
        .labels
        .iter()
        .filter(|l| !a_set.contains(l))
        .copied()
        .collect();
    let prod = |ls: &[Label], op: &Operand<T>| ls.iter().map(|&l| size_of(op, l)).product();
    let nb: usize = prod(&batch, &a);
    let m: usize = prod(&a_free, &a);
    let k: usize = prod(&summed, &a);
    let n: usize = prod(&b_free, &b);
    for l in batch.iter().chain(&summed) {
        if size_of(&a, *l) != size_of(&b, *l) {
            return Err(RefError::op(format!(
                "label '{}' has size {} in one operand and {} in another",
                label_name(*l),
                size_of(&a, *l),
                size_of(&b, *l)
            )));
        }
    }
    let mut out_shape: Vec<usize> = batch.iter().map(|&l| size_of(&a, l)).collect();
    out_shape.extend(a_free.iter().map(|&l| size_of(&a, l)));
    out_shape.extend(b_free.iter().map(|&l| size_of(&b, l)));
    check_size("Einsum intermediate", &out_shape)?;
    let a_order: Vec<Label> = batch
        .iter()
        .chain(&a_free)
        .chain(&summed)
        .copied()
        .collect();
    let b_order: Vec<Label> = batch
        .iter()
        .chain(&summed)
        .chain(&b_free)
        .copied()
        .collect();
    let av = arrange(&a, &a_order);
    let bv = arrange(&b, &b_order);
    let mut out = vec![T::zero(); nb * m * n];
    for bi in 0..nb {
        T::gemm(
            m,
            k,
            n,
            T::one(),
            MatRef {
                data: &av[bi * m * k..],
                rs: k,
                cs: 1,
            },
            MatRef {
                data: &bv[bi * k * n..],
                rs: n,
                cs: 1,
            },
            T::zero(),
            &mut out[bi * m * n..][..m * n],
        )?;
    }
    let labels = batch.into_iter().chain(a_free).chain(b_free).collect();
    Ok(Operand {
        data: array_from_vec(&out_shape, out)?,
        labels,
    })
}

fn label_name(l: Label) -> String {
    if l >= ELLIPSIS_BASE {
        format!("...{}", l - ELLIPSIS_BASE)
    } else {
        (l as u8 as char).to_string()
    }
}

/// Evaluates a parsed equation on operands of one element type.
fn einsum_of<T: GemmElem>(eq: &Equation, arrays: &[&Array<T>]) -> Result<Array<T>> {
    if eq.inputs.len() != arrays.len() {
        return Err(RefError::op(format!(
            "equation has {} operands but the node has {} inputs",
            eq.inputs.len(),
            arrays.len()
        )));
    }
    let ell_rank = eq
        .inputs
        .iter()
        .zip(arrays)
        .filter(|(t, _)| t.contains(&Symbol::Ellipsis))
        .map(|(t, a)| a.ndim().saturating_sub(t.len() - 1))
        .max()
        .unwrap_or(0);
    let mut ops = Vec::with_capacity(arrays.len());
    for (term, a) in eq.inputs.iter().zip(arrays) {
        let labels = expand_term(term, Some(a.ndim()), ell_rank)?;
        ops.push(take_diagonals(Operand {
            data: (*a).clone(),
            labels,
        }));
    }
    // Output labels, explicit or implicit (ellipsis first, then letters used once, sorted).
    let output: Vec<Label> = match &eq.output {
        Some(term) => {
            let labels = expand_term(term, None, ell_rank)?;
            let mut seen = BTreeSet::new();
            for l in &labels {
                if !seen.insert(*l) {
                    return Err(RefError::op(format!(
                        "output label '{}' is repeated",
                        label_name(*l)
                    )));
                }
                if !ops.iter().any(|o| o.labels.contains(l)) {
                    return Err(RefError::op(format!(
                        "output label '{}' is not in any input",
                        label_name(*l)
                    )));
                }
            }
            labels
        }
        None => {
            let mut counts = std::collections::BTreeMap::<Label, usize>::new();
            for term in &eq.inputs {
                for s in term {
                    if let Symbol::Letter(c) = s {
                        *counts.entry(*c as Label).or_default() += 1;
                    }
                }
            }
            (0..ell_rank as Label)
                .map(|k| ELLIPSIS_BASE + k)
                .chain(counts.into_iter().filter(|(_, n)| *n == 1).map(|(l, _)| l))
                .collect()
        }
    };
    // Broadcast size-1 dims of a label to its size in the other operands.
    let mut sizes = std::collections::BTreeMap::<Label, usize>::new();
    for op in &ops {
        for (l, &d) in op.labels.iter().zip(op.data.shape()) {
            let e = sizes.entry(*l).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && d != *e {
                return Err(RefError::op(format!(
                    "label '{}' has sizes {} and {d}",
                    label_name(*l),
                    *e
                )));
            }
        }
    }
    for op in &mut ops {
        let want: Vec<usize> = op.labels.iter().map(|l| sizes[l]).collect();
        if want != op.data.shape() {
            check_size("Einsum broadcast operand", &want)?;
            let view = op.data.broadcast(IxDyn(&want)).ok_or_else(|| {
                RefError::op(format!(
                    "cannot broadcast {:?} to {want:?}",
                    op.data.shape()
                ))
            })?;
            op.data = view.to_owned().into_shared();
        }
    }
    let out_set: BTreeSet<Label> = output.iter().copied().collect();
    let keep_after = |i: usize, ops: &[Operand<T>]| -> BTreeSet<Label> {
        let mut keep = out_set.clone();
        for op in &ops[i + 1..] {
            keep.extend(op.labels.iter().copied());
        }
        keep
    };
    let mut iter = ops.clone().into_iter().enumerate();
    let Some((_, first)) = iter.next() else {
        return Err(RefError::op("Einsum needs at least one input"));
    };
    let mut acc = first;
    for (i, op) in iter {
        let keep = keep_after(i, &ops);
        acc = contract(acc, op, &keep)?;
    }
    let acc = sum_out(acc, &out_set);
    let data = arrange(&acc, &output);
    let shape: Vec<usize> = output.iter().map(|&l| size_of(&acc, l)).collect();
    array_from_vec(&shape, data)
}

fn einsum(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts = all_inputs(ctx, inputs)?;
    same_dtype(ctx, &ts)?;
    let eq_text = ctx
        .attr_opt_string("equation")?
        .ok_or_else(|| ctx.err("attribute 'equation' is required"))?;
    let eq = parse_equation(&eq_text).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let Some(first) = ts.first() else {
        return Err(ctx.err("Einsum needs at least one input"));
    };
    macro_rules! native {
        ($variant:ident) => {{
            let arrays = ts
                .iter()
                .map(|t| super::typed(t))
                .collect::<Result<Vec<_>>>()?;
            Tensor::$variant(einsum_of(&eq, &arrays)?)
        }};
    }
    macro_rules! via_f32 {
        ($variant:ident, $ty:ty) => {{
            let wide = ts
                .iter()
                .map(|t| Ok(super::typed::<$ty>(t)?.mapv(|v| v.to_f32()).into_shared()))
                .collect::<Result<Vec<Array<f32>>>>()?;
            let refs: Vec<&Array<f32>> = wide.iter().collect();
            Tensor::$variant(einsum_of(&eq, &refs)?.mapv(<$ty>::from_f32).into_shared())
        }};
    }
    let out = match first {
        Tensor::F32(_) => native!(F32),
        Tensor::F64(_) => native!(F64),
        Tensor::F16(_) => via_f32!(F16, half::f16),
        Tensor::BF16(_) => via_f32!(BF16, half::bf16),
        Tensor::I8(_) => native!(I8),
        Tensor::I16(_) => native!(I16),
        Tensor::I32(_) => native!(I32),
        Tensor::I64(_) => native!(I64),
        Tensor::U8(_) => native!(U8),
        Tensor::U16(_) => native!(U16),
        Tensor::U32(_) => native!(U32),
        Tensor::U64(_) => native!(U64),
        other => return Err(unsupported(ctx, other)),
    };
    one(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_proto::{AttributeProto, NodeProto};

    fn run(eq: &str, inputs: Vec<Tensor>) -> Result<Tensor> {
        let node = NodeProto {
            op_type: Some("Einsum".into()),
            input: (0..inputs.len()).map(|i| format!("x{i}")).collect(),
            output: vec!["y".into()],
            attribute: vec![AttributeProto {
                name: Some("equation".into()),
                s: Some(eq.as_bytes().to_vec().into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let vals: Vec<Option<Value>> = inputs.into_iter().map(|t| Some(Value::Tensor(t))).collect();
        crate::eval_node(&node, 12, &vals)?.remove(0).into_tensor()
    }

    fn f32s(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}"))
    }

    fn values(t: &Tensor) -> (Vec<usize>, Vec<f64>) {
        (
            t.shape().to_vec(),
            t.to_f64_vec().unwrap_or_else(|e| panic!("{e}")),
        )
    }

    #[test]
    fn matmul_transpose_trace_and_outer() -> Result<()> {
        let a = f32s(&[2, 3], vec![1., 2., 3., 4., 5., 6.]);
        let b = f32s(&[3, 2], vec![1., 0., 0., 1., 1., 1.]);
        let mm = run("ij,jk->ik", vec![a.clone(), b.clone()])?;
        assert_eq!(values(&mm), (vec![2, 2], vec![4., 5., 10., 11.]));
        // Implicit output: letters used once, sorted.
        let implicit = run("ij,jk", vec![a.clone(), b])?;
        assert_eq!(values(&implicit), values(&mm));
        let t = run("ij->ji", vec![a.clone()])?;
        assert_eq!(values(&t), (vec![3, 2], vec![1., 4., 2., 5., 3., 6.]));
        let sq = f32s(&[2, 2], vec![1., 2., 3., 4.]);
        assert_eq!(values(&run("ii", vec![sq.clone()])?), (vec![], vec![5.]));
        assert_eq!(values(&run("ii->i", vec![sq])?), (vec![2], vec![1., 4.]));
        let u = f32s(&[2], vec![1., 2.]);
        let v = f32s(&[3], vec![1., 10., 100.]);
        let outer = run("i,j->ij", vec![u, v])?;
        assert_eq!(
            values(&outer),
            (vec![2, 3], vec![1., 10., 100., 2., 20., 200.])
        );
        Ok(())
    }

    #[test]
    fn ellipsis_broadcasts_and_sums() -> Result<()> {
        let a = f32s(&[2, 1, 2], vec![1., 2., 3., 4.]);
        let b = f32s(&[3, 2], vec![1., 1., 2., 2., 3., 3.]);
        // a broadcast over the middle ellipsis dim against b's leading dim.
        let r = run("...j,...j->...", vec![a, b])?;
        assert_eq!(values(&r), (vec![2, 3], vec![3., 6., 9., 7., 14., 21.]));
        let s = run("...->", vec![f32s(&[2, 2], vec![1., 2., 3., 4.])])?;
        assert_eq!(values(&s), (vec![], vec![10.]));
        Ok(())
    }

    #[test]
    fn integers_and_size_zero() -> Result<()> {
        let a = Tensor::from_vec(&[2, 0], Vec::<i32>::new())?;
        let b = Tensor::from_vec(&[0, 3], Vec::<i32>::new())?;
        let r = run("ij,jk->ik", vec![a, b])?;
        assert_eq!(r, Tensor::from_vec(&[2, 3], vec![0i32; 6])?);
        let x = Tensor::from_vec(&[3], vec![1i64, 2, 3])?;
        assert_eq!(run("i,i->", vec![x.clone(), x])?, Tensor::scalar(14i64));
        Ok(())
    }

    #[test]
    fn bad_equations_are_errors() {
        let a = f32s(&[2, 3], vec![0.; 6]);
        assert!(run("ijk->i", vec![a.clone()]).is_err());
        assert!(run("ij->q", vec![a.clone()]).is_err());
        assert!(run("ij->ii", vec![a.clone()]).is_err());
        assert!(run("i$->i", vec![a.clone()]).is_err());
        assert!(run("ij,ij->i", vec![a.clone(), f32s(&[2, 4], vec![0.; 8])]).is_err());
        assert!(run("ij,jk->ik", vec![a]).is_err());
    }
}
