//! Where an instance's randomness comes from. Every structural decision (ranks, dims, attribute
//! values, which optional inputs are present) is a draw from a [`Choices`] stream: a vector of
//! `u32` that proptest generates from a seeded `TestRng`, and that the shrinker rewrites toward
//! zeros (draw 0 is always the first, simplest option). Tensor contents come from a
//! [`SplitMix`] generator seeded by one draw, so shrinking never has to touch element values.

use half::{bf16, f16};
use onnx_ref::{DType, Tensor};

/// Number of `u32` draws a choice vector holds; draws past the end read 0.
pub(crate) const CHOICES: usize = 256;

/// A stream of draws over a choice vector.
pub(crate) struct Choices<'a> {
    data: &'a [u32],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(data: &'a [u32]) -> Self {
        Choices { data, pos: 0 }
    }

    /// The next raw draw (0 past the end).
    pub fn draw(&mut self) -> u32 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }

    /// A draw in `0..n` (always consumes one draw, so later choices keep their position).
    pub fn below(&mut self, n: usize) -> usize {
        let v = self.draw() as usize;
        if n <= 1 {
            0
        } else {
            v % n
        }
    }

    /// True with probability 1/n; draw 0 gives false.
    pub fn one_in(&mut self, n: usize) -> bool {
        n > 0 && self.below(n) == n - 1
    }

    /// One of `items` (the first on draw 0).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A 64-bit seed from two draws.
    pub fn seed(&mut self) -> u64 {
        ((self.draw() as u64) << 32) | self.draw() as u64
    }

    /// How many draws were read.
    pub fn used(&self) -> usize {
        self.pos
    }
}

/// SplitMix64: a tiny deterministic generator for tensor contents and seed derivation.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Combines two values into a well-mixed 64-bit seed.
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut s = SplitMix::new(a ^ b.rotate_left(17) ^ 0x5eed_5eed_5eed_5eed);
    s.next_u64() ^ SplitMix::new(b).next_u64()
}

/// FNV-1a of a string (stable across runs and platforms).
pub(crate) fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What the elements of a generated tensor may be.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct DataOpts {
    /// Floating types: a fraction of NaN, +Inf, -Inf, -0.0 and 0.0 elements; integers: a
    /// fraction of the type's extremes.
    pub special: bool,
    /// Values in (0, 2] (variances, scales).
    pub positive: bool,
    /// Small positive values (epsilons).
    pub small: bool,
    /// Every element equals this value.
    pub fill: Option<f64>,
    /// No element equals this value.
    pub avoid: Option<f64>,
    /// The last axis is two equal halves (a rotary table: `Concat(f, f)`).
    pub halves: bool,
    /// The elements are 0, 1, ..., n - 1 in order (row indices: `counts_up`).
    pub counts: bool,
}

/// The words string tensors are drawn from: empty, mixed case, inner and outer whitespace,
/// separators, digits and non-ASCII letters (what the string ops split, match and fold).
pub(crate) const WORDS: &[&str] = &[
    "",
    "a",
    "ab",
    "Ab",
    "AB",
    "hello world",
    "foo",
    "FOO",
    "x,y",
    " lead",
    "tail ",
    "a  b",
    "1",
    "été",
    "Straße",
    "a,b,,c",
];

/// A tensor of `dtype` and `shape` with elements drawn per `o`; `None` for element types the
/// prover does not generate.
pub(crate) fn random_tensor(
    rng: &mut SplitMix,
    dtype: DType,
    shape: &[usize],
    o: &DataOpts,
) -> Option<Tensor> {
    let n: usize = shape.iter().product();
    if dtype == DType::String {
        let words: Vec<String> = (0..n)
            .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize].to_string())
            .collect();
        return Tensor::from_vec(shape, words).ok();
    }
    if dtype.is_float() {
        let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0];
        let mut vals: Vec<f64> = (0..n)
            .map(|_| {
                if let Some(f) = o.fill {
                    return f;
                }
                let v = if o.special && rng.below(8) == 0 {
                    specials[rng.below(specials.len() as u64) as usize]
                } else if o.small {
                    1e-5 * 10f64.powf(4.0 * rng.unit())
                } else if o.positive {
                    0.05 + 1.95 * rng.unit()
                } else {
                    -2.0 + 4.0 * rng.unit()
                };
                match o.avoid {
                    Some(a) if v == a => a + 1.0,
                    _ => v,
                }
            })
            .collect();
        if o.halves {
            mirror_halves(&mut vals, shape);
        }
        if o.counts {
            vals = (0..n).map(|i| i as f64).collect();
        }
        return float_tensor(dtype, shape, vals);
    }
    let mut ints: Vec<i64> = (0..n)
        .map(|_| {
            if let Some(f) = o.fill {
                return f as i64;
            }
            let v = if o.special && rng.below(16) == 0 {
                if rng.below(2) == 0 {
                    i64::MIN
                } else {
                    i64::MAX
                }
            } else if o.positive || o.small {
                1 + rng.below(5) as i64
            } else {
                rng.below(11) as i64 - 5
            };
            match o.avoid {
                Some(a) if v as f64 == a => v + 1,
                _ => v,
            }
        })
        .collect();
    if o.halves {
        mirror_halves(&mut ints, shape);
    }
    if o.counts {
        ints = (0..n as i64).collect();
    }
    int_tensor(dtype, shape, ints)
}

/// Copies the first half of every row of the last axis onto its second half (an odd or
/// missing last axis is left as it is).
fn mirror_halves<T: Copy>(vals: &mut [T], shape: &[usize]) {
    let Some(&n) = shape.last() else { return };
    if n == 0 || !n.is_multiple_of(2) {
        return;
    }
    for row in vals.chunks_mut(n) {
        let (lo, hi) = row.split_at_mut(n / 2);
        hi.copy_from_slice(lo);
    }
}

/// A floating tensor from f64 values (rounded to the dtype; NaN, infinities and -0 kept).
pub(crate) fn float_tensor(dtype: DType, shape: &[usize], vals: Vec<f64>) -> Option<Tensor> {
    match dtype {
        DType::Double => Tensor::from_vec(shape, vals).ok(),
        DType::Float => Tensor::from_vec(shape, vals.iter().map(|&v| v as f32).collect()).ok(),
        DType::Float16 => {
            Tensor::from_vec(shape, vals.iter().map(|&v| f16::from_f64(v)).collect()).ok()
        }
        DType::Bfloat16 => {
            Tensor::from_vec(shape, vals.iter().map(|&v| bf16::from_f64(v)).collect()).ok()
        }
        other if other.is_float() => {
            let t = Tensor::from_vec(shape, vals).ok()?;
            onnx_ref::kernels::cast_tensor(&t, other).ok()
        }
        other => int_tensor(other, shape, vals.iter().map(|&v| v as i64).collect()),
    }
}

/// An integer (or bool) tensor from i64 values; the extremes map to the dtype's extremes.
pub(crate) fn int_tensor(dtype: DType, shape: &[usize], vals: Vec<i64>) -> Option<Tensor> {
    match dtype {
        DType::Int64 => Tensor::from_vec(shape, vals).ok(),
        DType::Int32 => Tensor::from_vec(
            shape,
            vals.iter()
                .map(|&v| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
                .collect(),
        )
        .ok(),
        DType::Bool => Tensor::from_vec(shape, vals.iter().map(|&v| v != 0).collect()).ok(),
        DType::String => None,
        other if other.is_float() => {
            float_tensor(other, shape, vals.iter().map(|&v| v as f64).collect())
        }
        other => {
            let t =
                Tensor::from_vec(shape, vals.iter().map(|&v| v.clamp(-128, 255)).collect()).ok()?;
            onnx_ref::kernels::cast_tensor(&t, other).ok()
        }
    }
}
