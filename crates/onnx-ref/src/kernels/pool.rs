//! Pooling: MaxPool (ceil_mode, dilations, storage_order, the Indices output), AveragePool
//! (count_include_pad, ceil_mode, dilations), LpPool, and the global forms.

use super::conv::{window, Window, WindowKind};
use super::{one, unsupported};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::{AccFloat, Num, Real};
use crate::tensor::{array_from_vec, map_float, map_numeric, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "MaxPool", 1, LATEST, max_pool);
    reg.register("", "AveragePool", 1, LATEST, average_pool);
    reg.register("", "LpPool", 1, LATEST, lp_pool);
    reg.register("", "GlobalAveragePool", 1, LATEST, global_average_pool);
    reg.register("", "GlobalMaxPool", 1, LATEST, global_max_pool);
    reg.register("", "GlobalLpPool", 1, LATEST, global_lp_pool);
}

pub(crate) fn pool_window(ctx: &KernelCtx, x: &Tensor) -> Result<Window> {
    if x.rank() < 3 {
        return Err(ctx.err(format!("input must have rank >= 3, got {:?}", x.shape())));
    }
    let kernel = super::to_dims(
        ctx.attr_ints("kernel_shape")
            .ok_or_else(|| ctx.err("kernel_shape is required"))?,
    )?;
    let ceil_mode = ctx.attr_int("ceil_mode", 0)? == 1;
    window(
        ctx,
        &x.shape()[2..],
        &kernel,
        WindowKind::Pool { ceil_mode },
    )
}

pub(crate) fn out_shape(x: &Tensor, w: &Window) -> Vec<usize> {
    let mut s = x.shape()[..2].to_vec();
    s.extend_from_slice(w.output_dims());
    s
}

/// Visits each output position of each (n, c) plane with the input positions of its window
/// that lie inside the input (`inside`) and the count of window positions inside the padded
/// extent (`padded_count`).
pub(crate) fn for_each_window(
    w: &Window,
    mut f: impl FnMut(usize, &mut dyn Iterator<Item = usize>, usize),
) {
    let [od, oh, ow] = w.output;
    let [id, ih, iw] = w.input;
    let [kd, kh, kw] = w.kernel;
    let limit = |d: usize| (w.input[d] + w.pad_end[d]) as isize;
    let mut taps = Vec::with_capacity(kd * kh * kw);
    for z in 0..od {
        for y in 0..oh {
            for x in 0..ow {
                taps.clear();
                let mut padded = 0;
                for a in 0..kd {
                    let iz = w.coord(0, z, a);
                    if iz >= limit(0) {
                        continue;
                    }
                    for b in 0..kh {
                        let iy = w.coord(1, y, b);
                        if iy >= limit(1) {
                            continue;
                        }
                        for e in 0..kw {
                            let ix = w.coord(2, x, e);
                            if ix >= limit(2) {
                                continue;
                            }
                            padded += 1;
                            if iz >= 0
                                && iy >= 0
                                && ix >= 0
                                && (iz as usize) < id
                                && (iy as usize) < ih
                                && (ix as usize) < iw
                            {
                                taps.push((iz as usize * ih + iy as usize) * iw + ix as usize);
                            }
                        }
                    }
                }
                f((z * oh + y) * ow + x, &mut taps.iter().copied(), padded);
            }
        }
    }
}

fn max_pool_of<T: Num>(a: &Array<T>, w: &Window, col_major: bool) -> Result<(Vec<T>, Vec<i64>)> {
    let std = a.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| crate::error::RefError::op("input is not contiguous"))?;
    let planes = a.shape()[0] * a.shape()[1];
    let (ivol, pvol) = (w.input_volume(), w.output_volume());
    let mut out = vec![T::lowest(); planes * pvol];
    let mut idx = vec![0i64; planes * pvol];
    let [_, ih, iw] = w.input;
    let id = w.input[0];
    for p in 0..planes {
        let plane = &xs[p * ivol..][..ivol];
        for_each_window(w, |o, taps, _| {
            let mut best: Option<(usize, T)> = None;
            for t in taps {
                let v = plane[t];
                if v.is_nan() {
                    continue;
                }
                if best.is_none_or(|(_, b)| v > b) {
                    best = Some((t, v));
                }
            }
            if let Some((t, v)) = best {
                out[p * pvol + o] = v;
                let local = if col_major {
                    let (z, y, x) = (t / (ih * iw), (t / iw) % ih, t % iw);
                    (x * ih + y) * id + z
                } else {
                    t
                };
                idx[p * pvol + o] = (p * ivol + local) as i64;
            } else {
                out[p * pvol + o] = if T::IS_FLOAT {
                    T::from_f64(f64::NAN)
                } else {
                    T::lowest()
                };
            }
        });
    }
    Ok((out, idx))
}

/// MaxPool without the indices output: for each output row, every in-bounds kernel row and
/// column tap folds a strided run of the input into the row. Same result as `max_pool_of`:
/// the largest non-NaN value, NaN (floats) or the lowest value (ints) when there is none.
fn max_pool_values<T: Num>(a: &Array<T>, w: &Window) -> Result<Vec<T>> {
    let std = a.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| crate::error::RefError::op("input is not contiguous"))?;
    let planes = a.shape()[0] * a.shape()[1];
    let (ivol, pvol) = (w.input_volume(), w.output_volume());
    let [od, oh, ow] = w.output;
    let [id, ih, iw] = w.input;
    let [kd, kh, _] = w.kernel;
    let s = w.stride[2];
    let empty = if T::IS_FLOAT {
        T::from_f64(f64::NAN)
    } else {
        T::lowest()
    };
    let fold = |best: T, v: T| best.max_skip_nan(v);
    // Per column tap: output columns [lo, hi) and the first input column they read.
    let col_taps = w.column_taps();
    let mut out = vec![empty; planes * pvol];
    for p in 0..planes {
        let plane = &xs[p * ivol..][..ivol];
        for z in 0..od {
            for y in 0..oh {
                let row = &mut out[p * pvol + (z * oh + y) * ow..][..ow];
                for a in 0..kd {
                    let iz = w.coord(0, z, a);
                    if iz < 0 || iz >= id as isize {
                        continue;
                    }
                    for b in 0..kh {
                        let iy = w.coord(1, y, b);
                        if iy < 0 || iy >= ih as isize {
                            continue;
                        }
                        let src = &plane[(iz as usize * ih + iy as usize) * iw..][..iw];
                        for &(lo, hi, first) in &col_taps {
                            let run = src[first..].iter().step_by(s);
                            for (d, v) in row[lo..hi].iter_mut().zip(run) {
                                *d = fold(*d, *v);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn max_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = pool_window(ctx, x)?;
    let col_major = ctx.attr_int("storage_order", 0)? == 1;
    let shape = out_shape(x, &w);
    if !ctx.wants_output(1) {
        let y = map_numeric!(x, a => array_from_vec(&shape, max_pool_values(a, &w)?)?, other => return Err(unsupported(ctx, other)));
        return one(y);
    }
    let indices;
    let y = map_numeric!(x, a => {
        let (v, i) = max_pool_of(a, &w, col_major)?;
        indices = i;
        array_from_vec(&shape, v)?
    }, other => return Err(unsupported(ctx, other)));
    let mut out = vec![Value::Tensor(y)];
    if ctx.wants_output(1) {
        out.push(Value::Tensor(Tensor::from_vec(&shape, indices)?));
    }
    Ok(out)
}

fn average_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = pool_window(ctx, x)?;
    let include_pad = ctx.attr_int("count_include_pad", 0)? == 1;
    let shape = out_shape(x, &w);
    fn avg<T: Real>(
        a: &Array<T>,
        w: &Window,
        include_pad: bool,
        shape: &[usize],
    ) -> Result<Array<T>> {
        let std = a.as_standard_layout();
        let xs = std
            .as_slice()
            .ok_or_else(|| crate::error::RefError::op("input is not contiguous"))?;
        let planes = a.shape()[0] * a.shape()[1];
        if w.dims < 3 {
            return array_from_vec(shape, average_rows(xs, planes, w, include_pad));
        }
        let (ivol, pvol) = (w.input_volume(), w.output_volume());
        let mut out = vec![T::zero(); planes * pvol];
        for p in 0..planes {
            let plane = &xs[p * ivol..][..ivol];
            for_each_window(w, |o, taps, padded| {
                let mut sum = 0f64;
                let mut count = 0usize;
                for t in taps {
                    sum += plane[t].to_f64();
                    count += 1;
                }
                let div = if include_pad { padded } else { count };
                out[p * pvol + o] = T::from_f64(if div == 0 { f64::NAN } else { sum / div as f64 });
            });
        }
        array_from_vec(shape, out)
    }
    one(
        map_float!(x, a => avg(a, &w, include_pad, &shape)?, other => return Err(unsupported(ctx, other))),
    )
}

/// Per output position along dim `d`, how many taps the divisor counts: those inside the
/// input, or (`include_pad`) those inside the input and its explicit pads.
fn tap_counts(w: &Window, d: usize, include_pad: bool) -> Vec<usize> {
    let limit = (w.input[d] + if include_pad { w.pad_end[d] } else { 0 }) as isize;
    (0..w.output[d])
        .map(|o| {
            (0..w.kernel[d])
                .filter(|&k| {
                    let c = w.coord(d, o, k);
                    c < limit && (include_pad || c >= 0)
                })
                .count()
        })
        .collect()
}

/// AveragePool of 1-D and 2-D windows row by row: each in-bounds kernel row and column tap
/// adds a strided run of the input to an f64 row of sums, in the order `for_each_window`
/// visits the taps (so the sums are the same), then each sum is divided by its tap count.
fn average_rows<T: Real>(xs: &[T], planes: usize, w: &Window, include_pad: bool) -> Vec<T> {
    let (ivol, pvol) = (w.input_volume(), w.output_volume());
    let [_, oh, ow] = w.output;
    let [_, ih, iw] = w.input;
    let [_, kh, _] = w.kernel;
    let s = w.stride[2];
    let col_taps = w.column_taps();
    let (rows_n, cols_n) = (tap_counts(w, 1, include_pad), tap_counts(w, 2, include_pad));
    let mut out = vec![T::zero(); planes * pvol];
    let mut sums = vec![0f64; ow];
    for p in 0..planes {
        let plane = &xs[p * ivol..][..ivol];
        for y in 0..oh {
            sums.fill(0.0);
            for b in 0..kh {
                let iy = w.coord(1, y, b);
                if iy < 0 || iy >= ih as isize {
                    continue;
                }
                let src = &plane[iy as usize * iw..][..iw];
                for &(lo, hi, first) in &col_taps {
                    let run = src[first..].iter().step_by(s);
                    for (d, v) in sums[lo..hi].iter_mut().zip(run) {
                        *d += v.to_f64();
                    }
                }
            }
            let row = &mut out[p * pvol + y * ow..][..ow];
            for ((d, sum), cols) in row.iter_mut().zip(&sums).zip(&cols_n) {
                let div = rows_n[y] * cols;
                *d = T::from_f64(if div == 0 { f64::NAN } else { sum / div as f64 });
            }
        }
    }
    out
}

fn lp_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = pool_window(ctx, x)?;
    let p = ctx.attr_int("p", 2)? as f64;
    let shape = out_shape(x, &w);
    fn lp<T: Real>(a: &Array<T>, w: &Window, p: f64, shape: &[usize]) -> Result<Array<T>> {
        let std = a.as_standard_layout();
        let xs = std
            .as_slice()
            .ok_or_else(|| crate::error::RefError::op("input is not contiguous"))?;
        let planes = a.shape()[0] * a.shape()[1];
        let (ivol, pvol) = (w.input_volume(), w.output_volume());
        let mut out = vec![T::zero(); planes * pvol];
        for pl in 0..planes {
            let plane = &xs[pl * ivol..][..ivol];
            for_each_window(w, |o, taps, _| {
                let s: f64 = taps.map(|t| plane[t].to_f64().abs().powf(p)).sum();
                out[pl * pvol + o] = T::from_f64(s.powf(1.0 / p));
            });
        }
        array_from_vec(shape, out)
    }
    one(map_float!(x, a => lp(a, &w, p, &shape)?, other => return Err(unsupported(ctx, other))))
}

/// Reduces every (n, c) plane to one value, keeping the spatial dims as 1s.
fn global<T: Num>(a: &Array<T>, f: impl Fn(&[T]) -> T) -> Result<Array<T>> {
    let rank = a.ndim();
    let axes: Vec<usize> = (2..rank).collect();
    super::reduce::reduce_lanes(a, &axes, true, f)
}

fn global_average_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    fn mean<T: Real>(a: &Array<T>) -> Result<Array<T>> {
        global(a, |lane| {
            let s: T::Acc = lane.iter().map(|v| v.acc()).sum();
            T::from_acc(s / T::Acc::lit(lane.len() as f64))
        })
    }
    one(map_float!(x, a => mean(a)?, other => return Err(unsupported(ctx, other))))
}

fn global_max_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    fn gmax<T: Num>(a: &Array<T>) -> Result<Array<T>> {
        global(a, |lane| {
            lane.iter().fold(T::lowest(), |m, v| m.max_nan(*v))
        })
    }
    one(map_numeric!(x, a => gmax(a)?, other => return Err(unsupported(ctx, other))))
}

fn global_lp_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let p = ctx.attr_int("p", 2)? as f64;
    fn glp<T: Real>(a: &Array<T>, p: f64) -> Result<Array<T>> {
        global(a, |lane| {
            T::from_f64(
                lane.iter()
                    .map(|v| v.to_f64().abs().powf(p))
                    .sum::<f64>()
                    .powf(1.0 / p),
            )
        })
    }
    one(map_float!(x, a => glp(a, p)?, other => return Err(unsupported(ctx, other))))
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{int_attr, node, t};
    use crate::eval::eval_node;
    use onnx_proto::AttributeProto;

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            ints: v.to_vec(),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Ints as i32),
            ..Default::default()
        }
    }

    /// The row-wise MaxPool (no indices output) equals the per-window one (with indices) on
    /// strides, dilations, padding, ceil mode and NaN inputs, including all-NaN windows.
    #[test]
    fn max_pool_without_indices_matches_window_path() {
        let (h, w) = (7usize, 9usize);
        let mut x: Vec<f32> = (0..2 * h * w)
            .map(|i| ((i * 37) % 23) as f32 - 11.0)
            .collect();
        for i in [3, 4, 5, 12, 13, 14, 21, 22, 23, 40] {
            x[i] = f32::NAN;
        }
        let configs: Vec<Vec<AttributeProto>> = vec![
            vec![ints("kernel_shape", &[3, 3])],
            vec![ints("kernel_shape", &[3, 3]), ints("strides", &[2, 2])],
            vec![
                ints("kernel_shape", &[3, 2]),
                ints("strides", &[2, 3]),
                ints("pads", &[1, 1, 1, 0]),
                int_attr("ceil_mode", 1),
            ],
            vec![ints("kernel_shape", &[2, 2]), ints("dilations", &[2, 2])],
            vec![ints("kernel_shape", &[1, 3]), ints("strides", &[1, 3])],
        ];
        for attrs in configs {
            let plain = node("MaxPool", &["x"], attrs.clone());
            let mut with_idx = plain.clone();
            with_idx.output.push("i".into());
            let input = [t(&[1, 2, h, w], x.clone())];
            let a = eval_node(&plain, 12, &input)
                .unwrap()
                .remove(0)
                .into_tensor()
                .unwrap();
            let b = eval_node(&with_idx, 12, &input)
                .unwrap()
                .remove(0)
                .into_tensor()
                .unwrap();
            assert_eq!(a.shape(), b.shape(), "{attrs:?}");
            let (av, bv) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
            for (p, q) in av.iter().zip(&bv) {
                assert!(
                    p == q || (p.is_nan() && q.is_nan()),
                    "{attrs:?}: {av:?} vs {bv:?}"
                );
            }
        }
    }
}
