//! Planners of the string ops and TfIdfVectorizer: input shapes the kernels take, stopwords,
//! delimiters and patterns that hit the generated words ([`WORDS`]), and n-gram pools made of
//! the tokens the input holds.

use onnx_ref::DType;

use crate::choice::WORDS;
use crate::gen::{AVal, Gen, LeafOpts, OpCall, Reject, Slot};

/// Regular expressions RegexFullMatch draws from (RE2 syntax the `regex` crate shares).
const PATTERNS: &[&str] = &[
    "a.*",
    "[a-z]+",
    "(foo|FOO)",
    r".*\s.*",
    r"\d+",
    "",
    "(?i)ab",
    r"\w+,\w+",
    "[^a]*",
];

impl Gen<'_> {
    /// Some of the generated words.
    fn some_words(&mut self) -> Vec<String> {
        let n = self.ch.below(4);
        (0..n).map(|_| self.ch.pick(WORDS).to_string()).collect()
    }

    /// StringNormalizer: input `[C]` or `[1, C]`, stopwords among the generated words.
    pub(super) fn plan_string_normalizer(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let s = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let n = self.nonzero_dim();
                let s = if self.ch.one_in(2) {
                    vec![n]
                } else {
                    vec![1, n]
                };
                self.fill_shape(c, 0, s)?
            }
        };
        if !matches!(s[..], [_] | [1, _]) {
            return self.reject("StringNormalizer input is not [C] or [1, C]");
        }
        self.pick_str_attr(c, "case_change_action", &["NONE", "LOWER", "UPPER"]);
        let v = AVal::Int(self.ch.below(2) as i64);
        self.maybe_attr(c, "is_case_sensitive", 2, v);
        let words = AVal::Strs(self.some_words());
        self.maybe_attr(c, "stopwords", 2, words);
        self.maybe_attr(c, "locale", 2, AVal::Str("en_US".into()));
        Ok(())
    }

    /// StringSplit: a delimiter (absent or empty: whitespace) and a maxsplit.
    pub(super) fn plan_string_split(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        self.operand(c, 0, 0)?;
        let d = AVal::Str(self.ch.pick(&["", ",", " ", "ab", ",,"]).to_string());
        self.maybe_attr(c, "delimiter", 3, d);
        let m = AVal::Int(self.ch.pick(&[0, 1, 2]));
        self.maybe_attr(c, "maxsplit", 2, m);
        Ok(())
    }

    /// RegexFullMatch: a pattern from [`PATTERNS`].
    pub(super) fn plan_regex(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        self.operand(c, 0, 0)?;
        let p = AVal::Str(self.ch.pick(PATTERNS).to_string());
        self.free_attr_or(c, "pattern", p);
        Ok(())
    }

    /// TfIdfVectorizer: input `[N]` or `[B, N]` of strings or integers; a pool of n-grams of
    /// lengths up to `max_gram_length` built from tokens the input may hold, numbered into
    /// distinct output columns; weights for every column.
    pub(super) fn plan_tfidf(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let (xs, strings) = match c.inputs.first() {
            Some(Slot::Known(k)) => {
                let t = &self.values[*k].tensor;
                (t.shape().to_vec(), t.dtype() == DType::String)
            }
            _ => {
                let n = 1 + self.ch.below(6);
                let s = if self.ch.one_in(2) {
                    vec![n]
                } else {
                    vec![self.nonzero_dim(), n]
                };
                let strings = self.ch.one_in(2);
                let opts = LeafOpts {
                    dtype: strings.then_some(DType::String),
                    ..Default::default()
                };
                (self.fill(c, 0, s, opts)?, strings)
            }
        };
        if xs.is_empty() || xs.len() > 2 {
            return self.reject("TfIdfVectorizer input of rank other than 1 or 2");
        }
        let max_gram = 1 + self.ch.below(3);
        let min_gram = 1 + self.ch.below(max_gram);
        let mut counts = Vec::new();
        let mut pool_len = 0;
        let mut grams = 0;
        for n in 1..=max_gram {
            counts.push(pool_len as i64);
            let k = usize::from(n == 1) + self.ch.below(3);
            pool_len += k * n;
            grams += k;
        }
        let mut columns: Vec<i64> = (0..grams as i64).collect();
        for i in (1..columns.len()).rev() {
            let j = self.ch.below(i + 1);
            columns.swap(i, j);
        }
        self.free_attr_or(c, "max_gram_length", AVal::Int(max_gram as i64));
        self.free_attr_or(c, "min_gram_length", AVal::Int(min_gram as i64));
        let skip = AVal::Int(self.ch.below(3) as i64);
        self.free_attr_or(c, "max_skip_count", skip);
        let mode = AVal::Str(self.ch.pick(&["TF", "IDF", "TFIDF"]).to_string());
        self.free_attr_or(c, "mode", mode);
        self.free_attr_or(c, "ngram_counts", AVal::Ints(counts));
        self.free_attr_or(c, "ngram_indexes", AVal::Ints(columns));
        if strings {
            let pool: Vec<String> = (0..pool_len)
                .map(|_| self.ch.pick(WORDS).to_string())
                .collect();
            self.free_attr_or(c, "pool_strings", AVal::Strs(pool));
            self.free_attr_or(c, "pool_int64s", AVal::Absent);
        } else {
            // Random integer data lies in -5..=5.
            let pool: Vec<i64> = (0..pool_len).map(|_| self.int_in(-5, 5)).collect();
            self.free_attr_or(c, "pool_int64s", AVal::Ints(pool));
            self.free_attr_or(c, "pool_strings", AVal::Absent);
        }
        let weights = AVal::Floats((0..grams).map(|_| self.ch.pick(&[0.5, 1.0, 2.0])).collect());
        self.maybe_attr(c, "weights", 2, weights);
        Ok(())
    }
}
