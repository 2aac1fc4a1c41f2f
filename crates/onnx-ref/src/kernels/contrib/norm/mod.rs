//! Contrib kernels: the norm family, as onnxruntime's CPU provider registers it.
//!
//! - `layer`: SkipLayerNormalization and SkipSimplifiedLayerNormalization (com.microsoft), and
//!   SimplifiedLayerNormalization (the default domain, every opset: no standard op has the name).
//!   LayerNormalization below opset 17 is onnxruntime's own default-domain op with the semantics
//!   the standard one got at 17, so the standard kernel (`kernels/nn.rs`) serves opsets 1..=16 too.
//! - `gelu`: Gelu, BiasGelu, FastGelu, QuickGelu and BiasAdd.
//! - `fused`: FusedMatMul (MatMul with transposes and a scale) and FusedConv (Conv, an optional
//!   addend Z, an activation).
//! - `embed`: EmbedLayerNormalization.
//!
//! onnxruntime computes float16 in f32 and rounds once at the end; these kernels compute every
//! float type in f64 and round once to the output type, which agrees with it to float16's
//! precision (and to float32's for float32 inputs).

mod embed;
mod fused;
mod gelu;
mod layer;

use super::MS;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::tensor::{array_from_vec, Tensor};
use crate::value::Value;

/// Registers this family's kernels.
pub fn register_all(reg: &mut KernelRegistry) {
    layer::register_all(reg);
    gelu::register_all(reg);
    fused::register_all(reg);
    embed::register_all(reg);
}

/// The values of a floating-point tensor as f64; an error naming `what` for another type.
fn floats(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<Vec<f64>> {
    if !matches!(
        t.dtype(),
        DType::Float | DType::Float16 | DType::Double | DType::Bfloat16
    ) {
        return Err(ctx.err(format!(
            "{what} must be float, float16, bfloat16 or double, found {}",
            t.dtype()
        )));
    }
    t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))
}

/// `t`'s values (a float tensor) broadcast, numpy style, to `shape`.
fn floats_broadcast(ctx: &KernelCtx, t: &Tensor, shape: &[usize], what: &str) -> Result<Vec<f64>> {
    let v = floats(ctx, t, what)?;
    let a = array_from_vec(t.shape(), v)?;
    let view = crate::kernels::broadcast_view(&a, shape).map_err(|_| {
        ctx.err(format!(
            "{what} of shape {:?} does not broadcast to {shape:?}",
            t.shape()
        ))
    })?;
    Ok(view.iter().copied().collect())
}

/// A tensor of `dtype` from f64 values, rounded once.
fn tensor_of(shape: &[usize], values: Vec<f64>, dtype: DType) -> Result<Value> {
    Ok(Value::Tensor(crate::kernels::cast_tensor(
        &Tensor::from_vec(shape, values)?,
        dtype,
    )?))
}

/// Checks that `t` has `dtype` (inputs that onnxruntime types alike, such as X and gamma).
fn same_type(ctx: &KernelCtx, t: &Tensor, dtype: DType, what: &str) -> Result<()> {
    if t.dtype() != dtype {
        return Err(ctx.err(format!(
            "{what} has type {} but the input has {dtype}",
            t.dtype()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Inputs that do not fit: errors naming what is wrong (onnxruntime refuses these too, so
    //! the conformance cases cannot hold them).
    use super::MS;
    use crate::kernels::test_util::{int_attr, node, run, t};
    use crate::value::Value;
    use onnx_proto::AttributeProto;

    /// The error of contrib node `op` on `inputs` (`None`: an absent optional input).
    fn error(op: &str, inputs: Vec<Option<Value>>, attrs: Vec<AttributeProto>) -> String {
        let names: Vec<String> = (0..inputs.len())
            .map(|i| {
                inputs[i]
                    .as_ref()
                    .map_or(String::new(), |_| format!("i{i}"))
            })
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut n = node(op, &names, attrs);
        n.domain = Some(MS.into());
        match run(&n, 1, &inputs) {
            Ok(_) => panic!("{op} accepted inputs it must refuse"),
            Err(e) => e.to_string(),
        }
    }

    fn zeros(shape: &[usize]) -> Option<Value> {
        t(shape, vec![0f32; shape.iter().product()])
    }

    #[test]
    fn skip_layer_norm_refuses_a_skip_that_does_not_fit() {
        let e = error(
            "SkipLayerNormalization",
            vec![zeros(&[2, 3, 4]), zeros(&[2, 1, 4]), zeros(&[4])],
            vec![],
        );
        assert!(e.contains("skip of shape [2, 1, 4] does not fit"), "{e}");
    }

    #[test]
    fn skip_layer_norm_refuses_rank_4_and_a_short_gamma() {
        let e = error(
            "SkipLayerNormalization",
            vec![zeros(&[1, 2, 3, 4]), zeros(&[1, 2, 3, 4]), zeros(&[4])],
            vec![],
        );
        assert!(e.contains("rank 2 or 3"), "{e}");
        let e = error(
            "SkipSimplifiedLayerNormalization",
            vec![zeros(&[2, 4]), zeros(&[2, 4]), zeros(&[3])],
            vec![],
        );
        assert!(e.contains("gamma must have shape [4]"), "{e}");
    }

    #[test]
    fn fused_matmul_trans_batch_needs_rank_3() {
        let e = error(
            "FusedMatMul",
            vec![zeros(&[3, 4]), zeros(&[4, 5])],
            vec![int_attr("transBatchA", 1)],
        );
        assert!(e.contains("transBatchA needs A of rank >= 3"), "{e}");
    }

    #[test]
    fn embed_layer_norm_refuses_an_id_out_of_range() {
        let e = error(
            "EmbedLayerNormalization",
            vec![
                t(&[1, 2], vec![0i32, 5]),
                None,
                zeros(&[5, 4]),
                zeros(&[2, 4]),
                None,
                zeros(&[4]),
                zeros(&[4]),
            ],
            vec![],
        );
        assert!(
            e.contains("input_ids value 5 is out of range [0, 5)"),
            "{e}"
        );
    }

    #[test]
    fn fused_conv_refuses_an_unknown_activation() {
        let attr = AttributeProto {
            name: Some("activation".into()),
            s: Some(b"Gelu".to_vec().into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::String as i32),
            ..Default::default()
        };
        let e = error(
            "FusedConv",
            vec![zeros(&[1, 1, 3, 3]), zeros(&[1, 1, 2, 2])],
            vec![attr],
        );
        assert!(e.contains("unsupported activation 'Gelu'"), "{e}");
    }
}
