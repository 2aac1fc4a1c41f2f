//! String kernels: StringConcat, StringSplit (Python `str.split` semantics), StringNormalizer
//! (stopwords and case), RegexFullMatch (the `regex` crate for the spec's RE2 syntax) and
//! TfIdfVectorizer (n-gram counting over strings or integers with skips).

use std::collections::{BTreeMap, BTreeSet};

use ndarray::IxDyn;

use super::{one, zip_map};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{array_from_vec, Array, Tensor};
use crate::value::Value;

/// Registers this family's kernels.
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "StringConcat", 20, LATEST, string_concat);
    reg.register("", "StringSplit", 20, LATEST, string_split);
    reg.register("", "StringNormalizer", 10, LATEST, string_normalizer);
    reg.register("", "RegexFullMatch", 20, LATEST, regex_full_match);
    reg.register("", "TfIdfVectorizer", 9, LATEST, tfidf_vectorizer);
}

/// Input `i` as a string array, or an error naming its actual type.
fn string_input<'v>(
    ctx: &KernelCtx,
    inputs: &[Option<&'v Value>],
    i: usize,
) -> Result<&'v Array<String>> {
    let t = ctx.input(inputs, i)?;
    t.as_array::<String>().ok_or_else(|| {
        ctx.err(format!(
            "input {i} must be a string tensor, got {}",
            t.dtype()
        ))
    })
}

fn string_concat(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = string_input(ctx, inputs, 0)?;
    let y = string_input(ctx, inputs, 1)?;
    let out = zip_map(x, y, |a, b| {
        let mut s = String::with_capacity(a.len() + b.len());
        s.push_str(a);
        s.push_str(b);
        s
    })
    .map_err(|e| e.in_node(&ctx.node_ref()))?;
    one(Tensor::Str(out))
}

/// Python's `s.split(None, maxsplit)`: runs of whitespace separate, leading whitespace is
/// dropped, and the unsplit remainder keeps its trailing whitespace.
fn split_whitespace(s: &str, maxsplit: Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        if maxsplit == Some(parts.len()) {
            parts.push(rest);
            break;
        }
        match rest.find(char::is_whitespace) {
            None => {
                parts.push(rest);
                break;
            }
            Some(i) => {
                parts.push(&rest[..i]);
                rest = rest[i..].trim_start();
            }
        }
    }
    parts
}

/// Python's `s.split(delimiter, maxsplit)` for a non-empty delimiter.
fn split_delimiter<'s>(s: &'s str, delimiter: &str, maxsplit: Option<usize>) -> Vec<&'s str> {
    match maxsplit {
        Some(n) => s.splitn(n.saturating_add(1), delimiter).collect(),
        None => s.split(delimiter).collect(),
    }
}

fn string_split(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = string_input(ctx, inputs, 0)?;
    let delimiter = ctx.attr_string("delimiter", "")?;
    // A negative maxsplit means "no limit", as in Python.
    let maxsplit = ctx
        .attr_opt_int("maxsplit")?
        .and_then(|m| usize::try_from(m).ok());
    let parts: Vec<Vec<&str>> = x
        .iter()
        .map(|s| {
            if delimiter.is_empty() {
                split_whitespace(s, maxsplit)
            } else {
                split_delimiter(s, &delimiter, maxsplit)
            }
        })
        .collect();
    let width = parts.iter().map(Vec::len).max().unwrap_or(0);
    let mut shape = x.shape().to_vec();
    shape.push(width);
    crate::tensor::check_size("StringSplit output", &shape)?;
    let mut flat = Vec::with_capacity(parts.len() * width);
    for p in &parts {
        flat.extend(p.iter().map(|s| s.to_string()));
        flat.extend(std::iter::repeat_n(String::new(), width - p.len()));
    }
    let counts: Vec<i64> = parts.iter().map(|p| p.len() as i64).collect();
    Ok(vec![
        Value::Tensor(Tensor::Str(array_from_vec(&shape, flat)?)),
        Value::Tensor(Tensor::I64(array_from_vec(x.shape(), counts)?)),
    ])
}

/// Removes stopwords (whole elements) and changes case. The input is `[C]` or `[1, C]`; when
/// every element is removed the output is a single empty string (`[1]` or `[1, 1]`). Case
/// mapping is Unicode's default mapping; the `locale` attribute is accepted and not used.
fn string_normalizer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = string_input(ctx, inputs, 0)?;
    let two_dim = match x.shape() {
        [_] => false,
        [1, _] => true,
        other => {
            return Err(ctx.err(format!(
                "input must have shape [C] or [1, C], got {other:?}"
            )))
        }
    };
    let action = ctx.attr_string("case_change_action", "NONE")?;
    let case_sensitive = ctx.attr_int("is_case_sensitive", 0)? != 0;
    let stopwords = ctx.attr_strings("stopwords").unwrap_or_default();
    let stop: BTreeSet<String> = stopwords
        .iter()
        .map(|w| {
            if case_sensitive {
                w.clone()
            } else {
                w.to_lowercase()
            }
        })
        .collect();
    let change: fn(&str) -> String = match action.as_str() {
        "NONE" => str::to_string,
        "LOWER" => str::to_lowercase,
        "UPPER" => str::to_uppercase,
        other => {
            return Err(ctx.err(format!(
                "case_change_action must be NONE, LOWER or UPPER, got '{other}'"
            )))
        }
    };
    let mut kept: Vec<String> = x
        .iter()
        .filter(|s| {
            if case_sensitive {
                !stop.contains(s.as_str())
            } else {
                !stop.contains(&s.to_lowercase())
            }
        })
        .map(|s| change(s))
        .collect();
    if kept.is_empty() {
        kept.push(String::new());
    }
    let shape = if two_dim {
        vec![1, kept.len()]
    } else {
        vec![kept.len()]
    };
    one(Tensor::Str(array_from_vec(&shape, kept)?))
}

fn regex_full_match(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = string_input(ctx, inputs, 0)?;
    let pattern = ctx
        .attr_opt_string("pattern")?
        .ok_or_else(|| ctx.err("attribute 'pattern' is required"))?;
    let re = regex::Regex::new(&format!(r"\A(?:{pattern})\z"))
        .map_err(|e| ctx.err(format!("invalid regular expression '{pattern}': {e}")))?;
    one(Tensor::Bool(x.map(|s| re.is_match(s)).into_shared()))
}

/// An n-gram element: the pool and the input are either integers or strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Token {
    Int(i64),
    Str(String),
}

/// TfIdfVectorizer's attributes, checked, with the pool as a map n-gram -> output column.
struct TfIdfModel {
    min_gram: usize,
    max_gram: usize,
    max_skip: usize,
    mode: String,
    weights: Vec<f32>,
    output_size: usize,
    ngrams: BTreeMap<Vec<Token>, usize>,
}

fn tfidf_model(ctx: &KernelCtx) -> Result<TfIdfModel> {
    let int = |name: &str| -> Result<usize> {
        let v = ctx
            .attr_opt_int(name)?
            .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))?;
        usize::try_from(v).map_err(|_| ctx.err(format!("attribute '{name}' is negative: {v}")))
    };
    let min_gram = int("min_gram_length")?;
    let max_gram = int("max_gram_length")?;
    let max_skip = int("max_skip_count")?;
    if min_gram == 0 || min_gram > max_gram {
        return Err(ctx.err(format!(
            "need 1 <= min_gram_length <= max_gram_length, got {min_gram} and {max_gram}"
        )));
    }
    let mode = ctx
        .attr_opt_string("mode")?
        .ok_or_else(|| ctx.err("attribute 'mode' is required"))?;
    if !matches!(mode.as_str(), "TF" | "IDF" | "TFIDF") {
        return Err(ctx.err(format!("mode must be TF, IDF or TFIDF, got '{mode}'")));
    }
    let counts = ctx.attr_ints("ngram_counts").unwrap_or_default();
    let indexes = ctx.attr_ints("ngram_indexes").unwrap_or_default();
    let pool: Vec<Token> = match (
        ctx.attr_strings("pool_strings"),
        ctx.attr_ints("pool_int64s"),
    ) {
        (Some(s), _) if !s.is_empty() => s.into_iter().map(Token::Str).collect(),
        (_, Some(i)) => i.iter().map(|&v| Token::Int(v)).collect(),
        (Some(_), None) => Vec::new(),
        (None, None) => return Err(ctx.err("one of pool_strings or pool_int64s is required")),
    };
    let output_size = match indexes.iter().max() {
        Some(&m) if m >= 0 => m as usize + 1,
        Some(&m) => return Err(ctx.err(format!("negative ngram index {m}"))),
        None => 0,
    };
    let weights = ctx.attr_floats("weights").unwrap_or_default().to_vec();
    if !weights.is_empty() && weights.len() < output_size {
        return Err(ctx.err(format!(
            "weights has {} entries, fewer than the {output_size} outputs",
            weights.len()
        )));
    }
    // ngram_counts[k] is where the (k+1)-grams start in the pool; n-grams are numbered in pool
    // order and the i-th one lands in column ngram_indexes[i].
    let mut ngrams = BTreeMap::new();
    let mut ngram_id = 0usize;
    for (k, &start) in counts.iter().enumerate() {
        let n = k + 1;
        let end = counts.get(k + 1).copied().unwrap_or(pool.len() as i64);
        let (start, end) = match (usize::try_from(start), usize::try_from(end)) {
            (Ok(s), Ok(e)) if s <= e && e <= pool.len() => (s, e),
            _ => {
                return Err(ctx.err(format!(
                    "ngram_counts {counts:?} do not fit a pool of {} items",
                    pool.len()
                )))
            }
        };
        for gram in pool[start..end].chunks_exact(n) {
            let column = indexes.get(ngram_id).copied().ok_or_else(|| {
                ctx.err(format!("ngram_indexes has no entry for n-gram {ngram_id}"))
            })?;
            if (min_gram..=max_gram).contains(&n) {
                ngrams.insert(gram.to_vec(), column as usize);
            }
            ngram_id += 1;
        }
    }
    Ok(TfIdfModel {
        min_gram,
        max_gram,
        max_skip,
        mode,
        weights,
        output_size,
        ngrams,
    })
}

impl TfIdfModel {
    /// Adds the n-gram counts of one row to `freq` (one slot per output column). Unigrams are
    /// counted once; longer n-grams once per skip distance 1..=max_skip+1.
    fn count_row(&self, row: &[Token], freq: &mut [u64]) {
        let mut gram = Vec::with_capacity(self.max_gram);
        for skip in 1..=self.max_skip + 1 {
            let min_n = if skip == 1 {
                self.min_gram
            } else {
                self.min_gram.max(2)
            };
            if min_n > self.max_gram {
                break;
            }
            for start in 0..row.len() {
                for n in min_n..=self.max_gram {
                    let last = start + (n - 1) * skip;
                    if last >= row.len() {
                        break;
                    }
                    gram.clear();
                    gram.extend((0..n).map(|j| row[start + j * skip].clone()));
                    if let Some(&col) = self.ngrams.get(&gram) {
                        if let Some(f) = freq.get_mut(col) {
                            *f += 1;
                        }
                    }
                }
            }
        }
    }

    fn weigh(&self, freq: &[u64]) -> Vec<f32> {
        freq.iter()
            .enumerate()
            .map(|(i, &f)| {
                let col = i % self.output_size.max(1);
                let w = self.weights.get(col).copied();
                match self.mode.as_str() {
                    "TF" => f as f32,
                    "IDF" => match (f > 0, w) {
                        (false, _) => 0.0,
                        (true, Some(w)) => w,
                        (true, None) => 1.0,
                    },
                    _ => w.unwrap_or(1.0) * f as f32,
                }
            })
            .collect()
    }
}

fn tfidf_vectorizer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let model = tfidf_model(ctx)?;
    let tokens: Vec<Token> = match x {
        Tensor::Str(a) => a.iter().cloned().map(Token::Str).collect(),
        Tensor::I32(_) | Tensor::I64(_) => x
            .to_i64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?
            .into_iter()
            .map(Token::Int)
            .collect(),
        other => {
            return Err(ctx.err(format!(
                "input must be string, int32 or int64, got {}",
                other.dtype()
            )))
        }
    };
    let (rows, cols, out_shape) = match x.shape() {
        [] => (1, 1, vec![model.output_size]),
        [c] => (1, *c, vec![model.output_size]),
        [b, c] => (*b, *c, vec![*b, model.output_size]),
        other => {
            return Err(ctx.err(format!(
                "input must have shape [C] or [B, C], got {other:?}"
            )))
        }
    };
    let mut freq = vec![0u64; rows * model.output_size];
    if cols > 0 && model.output_size > 0 {
        for (r, row) in tokens.chunks(cols).enumerate() {
            model.count_row(row, &mut freq[r * model.output_size..][..model.output_size]);
        }
    }
    let values = model.weigh(&freq);
    one(Tensor::F32(
        ndarray::ArcArray::from_shape_vec(IxDyn(&out_shape), values)
            .map_err(|e| ctx.err(format!("output shape {out_shape:?}: {e}")))?,
    ))
}

#[cfg(test)]
mod tests {
    use onnx_proto::{AttributeProto, NodeProto};

    use super::*;
    use crate::error::RefError;
    use crate::eval::eval_node;

    fn node(op: &str, attrs: Vec<AttributeProto>, n_out: usize) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: vec!["x".into()],
            output: (0..n_out).map(|i| format!("y{i}")).collect(),
            attribute: attrs,
            ..Default::default()
        }
    }

    fn s_attr(name: &str, v: &str) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            s: Some(v.as_bytes().to_vec().into()),
            ..Default::default()
        }
    }

    fn i_attr(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            i: Some(v),
            ..Default::default()
        }
    }

    fn strings(shape: &[usize], v: &[&str]) -> Value {
        Value::Tensor(
            Tensor::from_vec(shape, v.iter().map(|s| s.to_string()).collect())
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    fn run(n: &NodeProto, opset: i64, inputs: Vec<Value>) -> Result<Vec<Value>> {
        eval_node(n, opset, &inputs.into_iter().map(Some).collect::<Vec<_>>())
    }

    fn str_out(v: &Value) -> (Vec<usize>, Vec<String>) {
        let t = v.as_tensor().unwrap_or_else(|e| panic!("{e}"));
        let a = t
            .as_array::<String>()
            .unwrap_or_else(|| panic!("not strings"));
        (a.shape().to_vec(), a.iter().cloned().collect())
    }

    #[test]
    fn split_whitespace_follows_python() {
        assert_eq!(split_whitespace("  a b  c ", None), vec!["a", "b", "c"]);
        assert_eq!(split_whitespace("  a b  c ", Some(1)), vec!["a", "b  c "]);
        assert_eq!(split_whitespace("a ", Some(1)), vec!["a"]);
        assert!(split_whitespace("   ", None).is_empty());
        assert_eq!(split_delimiter("", ",", None), vec![""]);
        assert_eq!(split_delimiter("a,,b", ",", Some(1)), vec!["a", ",b"]);
    }

    #[test]
    fn split_of_size_zero_input() {
        let n = node("StringSplit", vec![s_attr("delimiter", ",")], 2);
        let out = run(&n, 20, vec![strings(&[0, 2], &[])]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(str_out(&out[0]).0, vec![0, 2, 0]);
        let counts = out[1].as_tensor().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counts.shape(), &[0, 2]);
    }

    #[test]
    fn normalizer_removes_all_to_one_empty_string() {
        let stop = AttributeProto {
            name: Some("stopwords".into()),
            strings: vec![b"Monday".to_vec().into()],
            ..Default::default()
        };
        let n = node(
            "StringNormalizer",
            vec![stop, s_attr("case_change_action", "UPPER")],
            1,
        );
        let out = run(&n, 10, vec![strings(&[1, 2], &["monday", "MONDAY"])])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(str_out(&out[0]), (vec![1, 1], vec![String::new()]));
        // Case-sensitive: only the exact spelling is a stopword.
        let stop = AttributeProto {
            name: Some("stopwords".into()),
            strings: vec![b"Monday".to_vec().into()],
            ..Default::default()
        };
        let n = node(
            "StringNormalizer",
            vec![stop, i_attr("is_case_sensitive", 1)],
            1,
        );
        let out = run(&n, 10, vec![strings(&[3], &["monday", "Monday", "x"])])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            str_out(&out[0]),
            (vec![2], vec!["monday".to_string(), "x".to_string()])
        );
    }

    #[test]
    fn normalizer_rejects_bad_shape_and_action() {
        let n = node("StringNormalizer", vec![], 1);
        let r = run(&n, 10, vec![strings(&[2, 1], &["a", "b"])]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("[1, C]")));
        let n = node(
            "StringNormalizer",
            vec![s_attr("case_change_action", "TITLE")],
            1,
        );
        let r = run(&n, 10, vec![strings(&[1], &["a"])]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("TITLE")));
    }

    #[test]
    fn regex_bad_pattern_is_an_error_naming_it() {
        let n = node("RegexFullMatch", vec![s_attr("pattern", "a(b")], 1);
        let r = run(&n, 20, vec![strings(&[1], &["ab"])]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("'a(b'")));
        let n = node("RegexFullMatch", vec![s_attr("pattern", "a|ab")], 1);
        let out =
            run(&n, 20, vec![strings(&[3], &["ab", "abc", "a"])]).unwrap_or_else(|e| panic!("{e}"));
        let t = out[0].as_tensor().unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<bool> = t
            .as_array::<bool>()
            .unwrap_or_else(|| panic!("not bool"))
            .iter()
            .copied()
            .collect();
        assert_eq!(got, vec![true, false, true]);
    }

    #[test]
    fn concat_broadcasts_and_rejects_non_strings() {
        let mut n = node("StringConcat", vec![], 1);
        n.input.push("y".into());
        let out = run(
            &n,
            20,
            vec![strings(&[2], &["a", "b"]), strings(&[], &["!"])],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(str_out(&out[0]).1, vec!["a!", "b!"]);
        let r = run(
            &n,
            20,
            vec![strings(&[1], &["a"]), Value::Tensor(Tensor::scalar(1f32))],
        );
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("input 1")));
    }

    #[test]
    fn tfidf_idf_weights_and_bad_counts() {
        let ints = |name: &str, v: &[i64]| AttributeProto {
            name: Some(name.into()),
            ints: v.to_vec(),
            ..Default::default()
        };
        let attrs = vec![
            i_attr("min_gram_length", 1),
            i_attr("max_gram_length", 1),
            i_attr("max_skip_count", 0),
            s_attr("mode", "IDF"),
            ints("ngram_counts", &[0]),
            ints("ngram_indexes", &[0, 1]),
            ints("pool_int64s", &[7, 9]),
            AttributeProto {
                name: Some("weights".into()),
                floats: vec![0.5, 2.0],
                ..Default::default()
            },
        ];
        let n = node("TfIdfVectorizer", attrs.clone(), 1);
        let x = Value::Tensor(
            Tensor::from_vec(&[2, 3], vec![7i64, 7, 1, 9, 2, 3]).unwrap_or_else(|e| panic!("{e}")),
        );
        let out = run(&n, 9, vec![x.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let t = out[0].as_tensor().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.shape(), &[2, 2]);
        assert_eq!(
            t.to_f64_vec().unwrap_or_else(|e| panic!("{e}")),
            vec![0.5, 0.0, 0.0, 2.0]
        );
        let mut bad = attrs;
        bad[4] = ints("ngram_counts", &[0, 5]);
        let n = node("TfIdfVectorizer", bad, 1);
        assert!(matches!(run(&n, 9, vec![x]), Err(RefError::Kernel { .. })));
    }
}
