//! GatherBlockQuantized: a Gather over a block-quantized table, dequantizing only the gathered
//! slices. `data` is uint8 (2, 4 or 8 bits: values packed along the last axis, low bits first;
//! gather_axis 0 and quantize_axis last), int4/uint4, or a float8/float4 type (symmetric: no
//! zero point; a scale dimension of 1 off the quantize axis broadcasts). Scales have data's
//! logical shape with ceil(dim / block_size) along `quantize_axis`; zero points default to
//! 2^(bits-1) for uint8 and 0 for int4/uint4. `(q - zp) · scale` is computed in f32 and rounded
//! once to the scales' type. An index outside [-s, s-1] gives a slice of zeros, as in
//! onnxruntime.

use std::borrow::Cow;

use super::{contiguous, float_data, float_result};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::norm_axis;
use crate::minifloat;
use crate::tensor::{check_size, Tensor};
use crate::value::Value;

/// Registers GatherBlockQuantized.
pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register(
        super::super::MS,
        "GatherBlockQuantized",
        1,
        LATEST,
        gather_block_quantized,
    );
}

/// How `data` stores its values.
#[derive(Clone, Copy)]
enum Storage {
    /// uint8 holding `8 / bits` values per byte.
    Packed { bits: usize },
    /// One int4/uint4 code per element.
    Int4(DType),
    /// One float8/float4 code per element.
    Float(DType),
}

impl Storage {
    /// Values per stored element along the last axis.
    fn components(self) -> usize {
        match self {
            Storage::Packed { bits } => 8 / bits,
            _ => 1,
        }
    }
}

/// The quantized table: its bytes (or codes) and how to read logical element `i`.
struct Table<'a> {
    bytes: Cow<'a, [u8]>,
    storage: Storage,
}

impl Table<'_> {
    /// Logical element `i` as an integer (integer storage).
    fn int(&self, i: usize) -> i32 {
        match self.storage {
            Storage::Packed { bits: 8 } => self.bytes[i] as i32,
            Storage::Packed { bits } => {
                let per = 8 / bits;
                let byte = self.bytes[i / per];
                ((byte >> ((i % per) * bits)) & ((1u8 << bits) - 1)) as i32
            }
            Storage::Int4(d) | Storage::Float(d) => {
                minifloat::coded_to_i64(d, self.bytes[i]) as i32
            }
        }
    }
}

fn gather_block_quantized(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let data = ctx.input(inputs, 0)?;
    let indices = ctx.input(inputs, 1)?;
    let scales = ctx.input(inputs, 2)?;
    let zero_points = ctx.opt_input(inputs, 3)?;
    let bits = ctx.attr_int("bits", 4)?;
    let block = ctx.attr_int("block_size", 128)?;
    let rank = data.rank();
    if rank == 0 {
        return Err(ctx.err("data must have rank >= 1"));
    }
    let norm = |a: i64, what: &str| {
        norm_axis(a, rank)
            .map_err(|_| ctx.err(format!("{what} {a} is out of range for rank {rank}")))
    };
    let gather_axis = norm(ctx.attr_int("gather_axis", 0)?, "gather_axis")?;
    let quantize_axis = norm(ctx.attr_int("quantize_axis", 1)?, "quantize_axis")?;
    let (storage, bytes) = match data {
        Tensor::U8(a) => {
            if !matches!(bits, 2 | 4 | 8) {
                return Err(ctx.err(format!("bits {bits} is not 2, 4 or 8 for uint8 data")));
            }
            if gather_axis != 0 || quantize_axis + 1 != rank || gather_axis == quantize_axis {
                return Err(ctx.err(
                    "uint8 data needs gather_axis 0 and quantize_axis the last (another) axis",
                ));
            }
            (
                Storage::Packed {
                    bits: bits as usize,
                },
                contiguous(a),
            )
        }
        Tensor::Coded(d @ (DType::Int4 | DType::Uint4), a) => {
            if bits != 4 {
                return Err(ctx.err(format!("bits {bits} is not 4 for {d} data")));
            }
            (Storage::Int4(*d), contiguous(a))
        }
        Tensor::Coded(
            d @ (DType::Float8E4M3FN
            | DType::Float8E4M3FNUZ
            | DType::Float8E5M2
            | DType::Float8E5M2FNUZ
            | DType::Float4E2M1),
            a,
        ) => {
            if zero_points.is_some() {
                return Err(ctx.err(format!("{d} data takes no zero_points")));
            }
            (Storage::Float(*d), contiguous(a))
        }
        other => {
            return Err(ctx.err(format!(
                "data must be uint8, int4, uint4, float8 or float4, found {}",
                other.dtype()
            )))
        }
    };
    let is_float = matches!(storage, Storage::Float(_));
    let mut shape = data.shape().to_vec();
    shape[rank - 1] *= storage.components();
    let block = match block {
        0 if is_float => shape[quantize_axis].max(1),
        b if b >= 16 && (b as u64).is_power_of_two() => b as usize,
        b => {
            return Err(ctx.err(format!(
                "block_size {b} is not a power of two >= 16{}",
                if is_float { " or 0" } else { "" }
            )))
        }
    };
    let out_type = scales.dtype();
    if !matches!(out_type, DType::Float | DType::Float16) {
        return Err(ctx.err(format!("scales must be float or float16, found {out_type}")));
    }
    // The scales' shape: data's with the blocks along quantize_axis; for float storage a 1 off
    // that axis broadcasts.
    let blocks = shape[quantize_axis].div_ceil(block);
    let mut scale_shape = shape.clone();
    scale_shape[quantize_axis] = blocks;
    let s_shape = scales.shape();
    let fits = s_shape.len() == rank
        && (0..rank).all(|i| {
            s_shape[i] == scale_shape[i] || (is_float && i != quantize_axis && s_shape[i] == 1)
        });
    if !fits {
        return Err(ctx.err(format!(
            "scales have shape {s_shape:?}, expected {scale_shape:?}"
        )));
    }
    let scale_values = float_data(ctx, scales, "scales")?;
    let scale_values = if s_shape == scale_shape.as_slice() {
        scale_values
    } else {
        Cow::Owned(broadcast_to(&scale_values, s_shape, &scale_shape))
    };
    let zps = match zero_points {
        None => None,
        Some(z) => Some(zero_point_table(
            ctx,
            z,
            data.dtype(),
            storage,
            &scale_shape,
        )?),
    };
    let default_zp = match storage {
        Storage::Packed { bits } => 1 << (bits - 1),
        _ => 0,
    };
    let table = Table { bytes, storage };
    let idx = indices
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?;

    let mut out_shape = shape[..gather_axis].to_vec();
    out_shape.extend_from_slice(indices.shape());
    out_shape.extend_from_slice(&shape[gather_axis + 1..]);
    check_size("GatherBlockQuantized result", &out_shape)?;
    let gather_m: usize = shape[..gather_axis].iter().product();
    let gather_dim = shape[gather_axis] as i64;
    let gather_block: usize = shape[gather_axis + 1..].iter().product();
    let q_dim = shape[quantize_axis];
    let q_inner: usize = shape[quantize_axis + 1..].iter().product();
    let scale_of = |i: usize| {
        let outer = i / (q_dim * q_inner);
        let along = i % (q_dim * q_inner) / q_inner;
        outer * blocks * q_inner + (along / block) * q_inner + i % q_inner
    };
    let mut out = Vec::with_capacity(gather_m * idx.len() * gather_block);
    for m in 0..gather_m {
        for &ix in &idx {
            if ix < -gather_dim || ix >= gather_dim {
                out.extend(std::iter::repeat_n(0f32, gather_block));
                continue;
            }
            let row = if ix < 0 { ix + gather_dim } else { ix } as usize;
            let base = (m * gather_dim as usize + row) * gather_block;
            for i in base..base + gather_block {
                let s = scale_of(i);
                let v = match storage {
                    Storage::Float(d) => minifloat::coded_to_f32(d, table.bytes[i]),
                    _ => {
                        let zp = zps.as_ref().map_or(default_zp, |z| z.get(s));
                        (table.int(i) - zp) as f32
                    }
                };
                out.push(v * scale_values[s]);
            }
        }
    }
    let y = float_result(out_type, &out_shape, out).map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(vec![Value::Tensor(y)])
}

/// `values` of shape `from` broadcast to `to` (same rank; dims of 1 repeat).
fn broadcast_to(values: &[f32], from: &[usize], to: &[usize]) -> Vec<f32> {
    let n: usize = to.iter().product();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (mut rem, mut src, mut stride) = (i, 0, 1);
        for d in (0..to.len()).rev() {
            let c = rem % to[d];
            rem /= to[d];
            if from[d] != 1 {
                src += c * stride;
            }
            stride *= from[d];
        }
        out.push(values[src]);
    }
    out
}

/// Zero points, indexed like the (unbroadcast) scales.
struct ZeroPointTable<'a> {
    table: Table<'a>,
    /// Values per row of the scales' last axis (packed uint8 rows are padded to whole bytes).
    row: usize,
    padded_row: usize,
}

impl ZeroPointTable<'_> {
    fn get(&self, scale_index: usize) -> i32 {
        let (r, c) = (scale_index / self.row, scale_index % self.row);
        self.table.int(r * self.padded_row + c)
    }
}

fn zero_point_table<'a>(
    ctx: &KernelCtx,
    z: &'a Tensor,
    data_type: DType,
    storage: Storage,
    scale_shape: &[usize],
) -> Result<ZeroPointTable<'a>> {
    if z.dtype() != data_type {
        return Err(ctx.err(format!(
            "zero_points are {} but data is {data_type}",
            z.dtype()
        )));
    }
    let per = storage.components();
    let row = scale_shape.last().copied().unwrap_or(1);
    let mut expected = scale_shape.to_vec();
    if let Some(last) = expected.last_mut() {
        *last = last.div_ceil(per);
    }
    if z.shape() != expected.as_slice() {
        return Err(ctx.err(format!(
            "zero_points have shape {:?}, expected {expected:?}",
            z.shape()
        )));
    }
    let bytes = match z {
        Tensor::U8(a) | Tensor::Coded(_, a) => contiguous(a),
        _ => return Err(ctx.err("zero_points must be uint8, int4 or uint4")),
    };
    Ok(ZeroPointTable {
        table: Table { bytes, storage },
        row,
        padded_row: row.div_ceil(per) * per,
    })
}
