//! Planners of the sequence ops: RNN, GRU and LSTM (directions, layouts, every optional input,
//! sequence lengths, activations, clip), LinearAttention (update rules matching the decay and
//! beta inputs, grouped heads), CausalConvWithState and RotaryEmbedding (caches with or
//! without position ids).

use onnx_ref::DType;

use crate::gen::{AVal, Gen, OpCall, Reject};

/// Activation functions of the recurrent ops.
const ACTIVATIONS: &[&str] = &[
    "Tanh",
    "Sigmoid",
    "Relu",
    "Affine",
    "LeakyRelu",
    "ThresholdedRelu",
    "ScaledTanh",
    "HardSigmoid",
    "Elu",
    "Softsign",
    "Softplus",
];

impl Gen<'_> {
    /// RNN, GRU, LSTM: X `[seq, batch, input]` (`[batch, seq, input]` with layout 1), W
    /// `[dirs, gates*hidden, input]`, R `[dirs, gates*hidden, hidden]`, B `[dirs,
    /// 2*gates*hidden]`, sequence_lens `[batch]` within `0..=seq`, states `[dirs, batch,
    /// hidden]` (layout 1: `[batch, dirs, hidden]`), P `[dirs, 3*hidden]`.
    pub(super) fn plan_recurrent(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let (gates, per_dir) = match c.op_type.as_str() {
            "RNN" => (1, 1),
            "GRU" => (3, 2),
            _ => (4, 3),
        };
        if Self::attr_is_free(c, "layout") {
            let v = if self.ch.one_in(3) {
                AVal::Int(1)
            } else {
                AVal::Absent
            };
            self.set_attr(c, "layout", v);
        }
        let batch_major = match Self::int_attr(c, "layout", 0) {
            0 => false,
            1 => true,
            _ => return self.reject("recurrent layout other than 0 or 1"),
        };
        self.pick_str_attr(c, "direction", &["forward", "reverse", "bidirectional"]);
        let dirs = match Self::str_attr(c, "direction", "forward").as_str() {
            "bidirectional" => 2,
            _ => 1,
        };
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let s = vec![self.dim(), self.nonzero_dim(), self.nonzero_dim()];
                self.fill_shape(c, 0, s)?
            }
        };
        let [a, b, input] = xs[..] else {
            return self.reject("recurrent X of rank != 3");
        };
        let (seq, batch) = if batch_major { (b, a) } else { (a, b) };
        let hidden = match (
            self.known_shape(c, 1),
            self.known_shape(c, 2),
            Self::attr_val(c, "hidden_size").and_then(|v| v.as_int()),
        ) {
            (Some(w), _, _) if w.len() == 3 && w[1] % gates == 0 => w[1] / gates,
            (_, Some(r), _) if r.len() == 3 => r[2],
            (_, _, Some(h)) if h > 0 => h as usize,
            _ => self.nonzero_dim(),
        };
        self.maybe_attr(c, "hidden_size", 2, AVal::Int(hidden as i64));
        let gh = gates * hidden;
        self.expect_shape(c, 1, vec![dirs, gh, input], "W")?;
        self.expect_shape(c, 2, vec![dirs, gh, hidden], "R")?;
        self.expect_shape(c, 3, vec![dirs, 2 * gh], "B")?;
        if Self::is_free(c, 4) {
            let lens: Vec<i64> = (0..batch)
                .map(|_| {
                    if self.ch.one_in(2) {
                        seq as i64
                    } else {
                        self.int_in(0, seq as i64)
                    }
                })
                .collect();
            self.fill_ints(c, 4, DType::Int32, &[batch], lens)?;
        }
        let state = if batch_major {
            vec![batch, dirs, hidden]
        } else {
            vec![dirs, batch, hidden]
        };
        self.expect_shape(c, 5, state.clone(), "initial_h")?;
        self.expect_shape(c, 6, state, "initial_c")?;
        self.expect_shape(c, 7, vec![dirs, 3 * hidden], "P")?;
        if Self::attr_is_free(c, "activations") {
            let v = if self.ch.one_in(3) {
                AVal::Strs(
                    (0..per_dir * dirs)
                        .map(|_| self.ch.pick(ACTIVATIONS).to_string())
                        .collect(),
                )
            } else {
                AVal::Absent
            };
            self.set_attr(c, "activations", v);
        }
        // One alpha (beta) per activation that takes one, in order.
        let acts = match Self::attr_val(c, "activations") {
            Some(AVal::Strs(l)) => l,
            _ => Vec::new(),
        };
        let takes = |names: &[&str]| acts.iter().filter(|a| names.contains(&a.as_str())).count();
        let alphas = takes(&[
            "Affine",
            "LeakyRelu",
            "ThresholdedRelu",
            "ScaledTanh",
            "HardSigmoid",
            "Elu",
        ]);
        let betas = takes(&["Affine", "ScaledTanh", "HardSigmoid"]);
        for (name, n) in [("activation_alpha", alphas), ("activation_beta", betas)] {
            if Self::attr_is_free(c, name) {
                let v = if n > 0 && self.ch.one_in(2) {
                    AVal::Floats((0..n).map(|_| self.ch.pick(&[0.5, 1.0, 0.1])).collect())
                } else {
                    AVal::Absent
                };
                self.set_attr(c, name, v);
            }
        }
        let clip = AVal::Float(self.ch.pick(&[0.5, 1.0, 3.0]));
        self.maybe_attr(c, "clip", 2, clip);
        for flag in ["linear_before_reset", "input_forget"] {
            if Self::attr_is_free(c, flag) {
                let v = if self.ch.one_in(2) {
                    AVal::Absent
                } else {
                    AVal::Int(self.ch.below(2) as i64)
                };
                self.set_attr(c, flag, v);
            }
        }
        Ok(())
    }

    /// LinearAttention: query `[B, T, Hq*dk]`, key `[B, T, Hkv*dk]`, value `[B, T, Hkv*dv]`
    /// with Hq a multiple of Hkv; the update rule gates with the decay input and uses the
    /// delta rule with the beta input, so it is chosen from which of them are present.
    pub(super) fn plan_linear_attention(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let (gating, delta) = (Self::present(c, 4), Self::present(c, 5));
        let rule = match (gating, delta) {
            (false, false) => "linear",
            (true, false) => "gated",
            (false, true) => "delta",
            (true, true) => "gated_delta",
        };
        let v = if rule == "gated_delta" && self.ch.one_in(2) {
            AVal::Absent
        } else {
            AVal::Str(rule.to_string())
        };
        self.free_attr_or(c, "update_rule", v);
        let kv = match Self::attr_val(c, "kv_num_heads").and_then(|v| v.as_int()) {
            Some(h) if h > 0 => h as usize,
            Some(_) => return self.reject("LinearAttention kv_num_heads <= 0"),
            None => self.ch.pick(&[1usize, 2]),
        };
        let q = match Self::attr_val(c, "q_num_heads").and_then(|v| v.as_int()) {
            Some(h) if h > 0 => h as usize,
            Some(_) => return self.reject("LinearAttention q_num_heads <= 0"),
            None => kv * self.ch.pick(&[1usize, 2]),
        };
        self.free_attr_or(c, "kv_num_heads", AVal::Int(kv as i64));
        self.free_attr_or(c, "q_num_heads", AVal::Int(q as i64));
        let (batch, steps, dk) = match self.known_shape(c, 0) {
            Some(s) if s.len() == 3 && s[2] % q == 0 => (s[0], s[1], s[2] / q),
            Some(_) => return self.reject("LinearAttention query does not fit the heads"),
            None => {
                let (b, t, dk) = (self.nonzero_dim(), self.dim(), self.nonzero_dim());
                self.fill_shape(c, 0, vec![b, t, q * dk])?;
                (b, t, dk)
            }
        };
        self.expect_shape(c, 1, vec![batch, steps, kv * dk], "key")?;
        let dv = match self.known_shape(c, 2) {
            Some(s) if s.len() == 3 && s[2] % kv == 0 => s[2] / kv,
            Some(_) => return self.reject("LinearAttention value does not fit the heads"),
            None => self.nonzero_dim(),
        };
        self.expect_shape(c, 2, vec![batch, steps, kv * dv], "value")?;
        self.expect_shape(c, 3, vec![batch, kv, dk, dv], "past_state")?;
        let dw = if self.ch.one_in(2) { kv } else { kv * dk };
        self.expect_shape(c, 4, vec![batch, steps, dw], "decay")?;
        let bw = if self.ch.one_in(2) { kv } else { 1 };
        self.expect_shape(c, 5, vec![batch, steps, bw], "beta")?;
        let scale = AVal::Float(self.ch.pick(&[0.5, 1.0]));
        self.maybe_attr(c, "scale", 2, scale);
        let chunk = AVal::Int(self.ch.pick(&[1, 2, 64]));
        self.maybe_attr(c, "chunk_size", 2, chunk);
        Ok(())
    }

    /// CausalConvWithState: input `[B, C, L]`, weight `[C, 1, K]`, bias `[C]`, past_state
    /// `[B, C, K-1]`.
    pub(super) fn plan_causal_conv(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let s = vec![self.nonzero_dim(), self.nonzero_dim(), self.dim()];
                self.fill_shape(c, 0, s)?
            }
        };
        let [batch, channels, _] = xs[..] else {
            return self.reject("CausalConvWithState input of rank != 3");
        };
        let k = match self.known_shape(c, 1) {
            Some(w) if w.len() == 3 => w[2],
            Some(_) => return self.reject("CausalConvWithState weight of rank != 3"),
            None => 1 + self.ch.below(3),
        };
        if k == 0 {
            return self.reject("CausalConvWithState kernel of size 0");
        }
        self.expect_shape(c, 1, vec![channels, 1, k], "weight")?;
        self.expect_shape(c, 2, vec![channels], "bias")?;
        self.expect_shape(c, 3, vec![batch, channels, k - 1], "past_state")?;
        self.pick_str_attr(c, "activation", &["none", "silu", "swish"]);
        Ok(())
    }

    /// RotaryEmbedding: X `[B, H, S, D]` (or `[B, S, H*D]` with num_heads), caches `[B, S,
    /// R/2]`, or `[P, R/2]` with position ids `[B, S]` in `0..P`; R (rotary_embedding_dim) even
    /// and at most D.
    pub(super) fn plan_rotary(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let (b, s, h) = (
                    self.nonzero_dim(),
                    self.nonzero_dim(),
                    self.ch.pick(&[1, 2]),
                );
                let d = 2 * self.ch.pick(&[1usize, 2]);
                let shape = if self.ch.one_in(2) {
                    vec![b, h, s, d]
                } else {
                    vec![b, s, h * d]
                };
                self.fill_shape(c, 0, shape)?
            }
        };
        let (b, s, d) = match xs[..] {
            [b, _, s, d] => (b, s, d),
            [b, s, hidden] => {
                let divisors: Vec<usize> = (1..=hidden)
                    .filter(|h| hidden % h == 0 && (hidden / h) % 2 == 0)
                    .collect();
                let Some(&h0) = divisors.first() else {
                    return self.reject("RotaryEmbedding hidden size with no even head size");
                };
                let h = divisors[self.ch.below(divisors.len())];
                let h = if self.ch.one_in(4) { h0 } else { h };
                self.free_attr_or(c, "num_heads", AVal::Int(h as i64));
                match Self::int_attr(c, "num_heads", 0) {
                    h if h > 0 && hidden % h as usize == 0 => (b, s, hidden / h as usize),
                    _ => return self.reject("RotaryEmbedding num_heads does not divide hidden"),
                }
            }
            _ => return self.reject("RotaryEmbedding input of rank other than 3 or 4"),
        };
        if Self::attr_is_free(c, "rotary_embedding_dim") {
            let evens: Vec<i64> = (1..=d / 2).map(|k| 2 * k as i64).collect();
            let v = if evens.is_empty() || self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Int(evens[self.ch.below(evens.len())])
            };
            self.set_attr(c, "rotary_embedding_dim", v);
        }
        let rd = match Self::int_attr(c, "rotary_embedding_dim", 0) {
            0 => d,
            r if r > 0 => r as usize,
            _ => return self.reject("RotaryEmbedding negative rotary_embedding_dim"),
        };
        let half = rd / 2;
        if Self::present(c, 3) {
            let max_pos = match self.known_shape(c, 1) {
                Some(s) if s.len() == 2 => s[0],
                _ => 1 + self.ch.below(4),
            };
            self.expect_shape(c, 1, vec![max_pos, half], "cos_cache")?;
            self.expect_shape(c, 2, vec![max_pos, half], "sin_cache")?;
            if Self::is_free(c, 3) {
                let ids: Vec<i64> = (0..b * s)
                    .map(|_| self.int_in(0, max_pos as i64 - 1))
                    .collect();
                self.fill_ints(c, 3, DType::Int64, &[b, s], ids)?;
            }
        } else {
            self.expect_shape(c, 1, vec![b, s, half], "cos_cache")?;
            self.expect_shape(c, 2, vec![b, s, half], "sin_cache")?;
        }
        let v = AVal::Int(self.ch.below(2) as i64);
        self.maybe_attr(c, "interleaved", 2, v);
        Ok(())
    }
}
