//! The built-in functions of guards and computed attributes (the table of rules/README.md)
//! with their argument and result types, and the signatures of guards registered in Rust.
//! The checker types calls with these; the evaluator in onnx-egraph implements exactly the
//! functions [`builtin`] knows.

use std::fmt;

/// The type of an expression of a guard or a computed attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ty {
    Bool,
    Int,
    Float,
    /// A number, int or float.
    Num,
    Str,
    /// An element type (`float`, `int64`, `dtype(v)`).
    DType,
    /// A tensor variable of the rule (an input or output value, a `let`).
    Value,
    /// An attribute value of any kind (int, float, string, list).
    AttrVal,
    /// A list (of ints, floats, dims or strings).
    List,
    /// A dimension of a shape (an int, or symbolic: symbolic dims are equal by name).
    Dim,
    /// Anything (unknown): never a type error.
    Any,
}

impl Ty {
    /// How messages name the type.
    pub fn describe(self) -> &'static str {
        match self {
            Ty::Bool => "a bool",
            Ty::Int => "an int",
            Ty::Float => "a float",
            Ty::Num => "a number",
            Ty::Str => "a string",
            Ty::DType => "an element type",
            Ty::Value => "a value (a tensor variable)",
            Ty::AttrVal => "an attribute value",
            Ty::List => "a list",
            Ty::Dim => "a dim",
            Ty::Any => "anything",
        }
    }

    /// Whether a number (int, float, dim, or an attribute value that may be one).
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            Ty::Int | Ty::Float | Ty::Num | Ty::Dim | Ty::AttrVal | Ty::Any
        )
    }

    /// Whether an argument of type `actual` may be passed where `self` is expected.
    pub fn accepts(self, actual: Ty) -> bool {
        use Ty::*;
        if self == actual || self == Any || actual == Any {
            return true;
        }
        match self {
            Int => matches!(actual, Dim | Num | AttrVal),
            Float | Num => matches!(actual, Int | Float | Num | Dim | AttrVal),
            Dim => matches!(actual, Int | Num | AttrVal),
            Str => actual == AttrVal,
            DType => matches!(actual, Int | AttrVal),
            List => actual == AttrVal,
            AttrVal => !matches!(actual, Bool | Value),
            Bool | Value | Any => false,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::Float => "float",
            Ty::Num => "num",
            Ty::Str => "str",
            Ty::DType => "dtype",
            Ty::Value => "value",
            Ty::AttrVal => "attr",
            Ty::List => "list",
            Ty::Dim => "dim",
            Ty::Any => "any",
        };
        f.write_str(name)
    }
}

/// The signature of a built-in function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncSig {
    pub name: &'static str,
    pub params: &'static [Ty],
    pub ret: Ty,
    /// What it computes, one line.
    pub doc: &'static str,
}

/// The signature of a guard written in Rust and registered by name on the rule set
/// ([`crate::CheckOptions::extra_guards`]); it is called like a built-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardSig {
    pub name: String,
    pub params: Vec<Ty>,
    pub ret: Ty,
}

impl GuardSig {
    /// A guard `name(params...) -> ret`.
    pub fn new(name: impl Into<String>, params: Vec<Ty>, ret: Ty) -> Self {
        GuardSig {
            name: name.into(),
            params,
            ret,
        }
    }
}

const fn sig(name: &'static str, params: &'static [Ty], ret: Ty, doc: &'static str) -> FuncSig {
    FuncSig {
        name,
        params,
        ret,
        doc,
    }
}

use Ty::{Any, Bool, DType, Dim, Int, List, Num, Value};

/// Every built-in function, sorted by name.
pub const BUILTINS: &[FuncSig] = &[
    sig(
        "add_lists",
        &[List, List],
        List,
        "[l[0] + m[0], l[1] + m[1], ...] for int lists of one length",
    ),
    sig(
        "all_equal",
        &[Any, Num],
        Bool,
        "every element of constant v (or of a parameter's value) equals x",
    ),
    sig(
        "any_equal",
        &[Any, Num],
        Bool,
        "some element of constant v (or of a parameter's value) equals x",
    ),
    sig(
        "as_dim",
        &[Value],
        Dim,
        "an integer scalar v as a dim: its constant value, or the dim of the graph it is known to equal (by name)",
    ),
    sig(
        "broadcasts_to",
        &[Value, List],
        Bool,
        "v broadcasts (unidirectionally) to shape",
    ),
    sig("compose", &[List, List], List, "[q[p[0]], q[p[1]], ...]"),
    sig("concat", &[List, List], List, "l followed by m"),
    sig(
        "counts_up",
        &[Value],
        Bool,
        "constant v's elements, in order, are 0, 1, ..., numel(v) - 1",
    ),
    sig(
        "dim",
        &[Value, Int],
        Dim,
        "dim i of v (negative: from the end)",
    ),
    sig(
        "disjoint",
        &[List, List],
        Bool,
        "l and m have no element in common",
    ),
    sig(
        "divides_by_sqrt",
        &[Value],
        Bool,
        "v is some a / Sqrt(b): a value normalized by a standard deviation or a root mean square",
    ),
    sig("dtype", &[Value], DType, "element type of v"),
    sig(
        "finite",
        &[Value],
        Bool,
        "v holds no infinity, by how it is computed (selected, moved or cast from constants and integers; no arithmetic)",
    ),
    sig(
        "halves_equal",
        &[Value],
        Bool,
        "constant v's last axis is two equal halves (v[..., :n/2] == v[..., n/2:], bitwise; n even)",
    ),
    sig(
        "in_range",
        &[Value, Num, Num],
        Bool,
        "every element of integer value v lies in [a, b], by how v is computed (see `lower`)",
    ),
    sig("inverse_perm", &[List], List, "the inverse permutation"),
    sig(
        "is_absent",
        &[Any],
        Bool,
        "v (bound by `x?`, or an absent parameter) is absent",
    ),
    sig(
        "is_const",
        &[Any],
        Bool,
        "v is a known constant (a parameter in an input: a constant input)",
    ),
    sig("is_float", &[Value], Bool, "v has a floating element type"),
    sig("is_identity", &[List], Bool, "p == range(0, len(p))"),
    sig(
        "is_static",
        &[Value],
        Bool,
        "v depends on no graph input (a constant, or a constant subgraph left unfolded)",
    ),
    sig(
        "keeps_layout",
        &[List, Value],
        Bool,
        "Transpose(x, perm: p) keeps x's elements in memory order (it moves only dims of size 1)",
    ),
    sig("len", &[List], Int, "length of a list"),
    sig(
        "lower",
        &[Value],
        Int,
        "a lower bound of every element of integer value v, by how it is computed: constants, Shape/Size/ArgMax/NonZero (>= 0), moved, selected, clamped, cast, and non-wrapping Add/Sub/Mul",
    ),
    sig(
        "member",
        &[Any, List],
        Bool,
        "x equals some element of list l (`member(dtype(v), [float, double])`)",
    ),
    sig(
        "no_literal_zero",
        &[Any, Value],
        Bool,
        "every entry of shape vector s is a known positive size, -1, or x's dim at its index (by name): a 0 in s could only be x's own dim",
    ),
    sig(
        "nonneg",
        &[Value],
        Bool,
        "every element of integer value v is >= 0, by how it is computed (see `lower`)",
    ),
    sig(
        "normalize_axes",
        &[List, Int],
        List,
        "axes with negatives counted from the end of rank r",
    ),
    sig("numel", &[Value], Int, "element count of v"),
    sig("opset", &[], Int, "the model's default-domain opset"),
    sig("range", &[Int, Int], List, "[a, a+1, ..., b-1]"),
    sig("rank", &[Value], Int, "rank of v"),
    sig(
        "repeats_heads",
        &[Value, Value, Any],
        Bool,
        "Reshape(Expand(Unsqueeze(k, [2]), e), r) repeats each head of a rank-4 k n times in a row (transformers' repeat_kv)",
    ),
    sig(
        "reshape_target",
        &[Any, Value],
        List,
        "a Reshape target for shape vector s over x: 0 where s copies x's dim, one -1",
    ),
    sig("reversed", &[List], List, "the list in reverse order"),
    sig(
        "root",
        &[],
        Value,
        "the value the left side matched (its first root)",
    ),
    sig(
        "root_at",
        &[Int],
        Value,
        "the value the left side's root i matched (0 is the first: `root()`)",
    ),
    sig(
        "same_shape",
        &[Value, Value],
        Bool,
        "a and b have equal shapes",
    ),
    sig("select", &[List, List], List, "[l[i] for i in idx]"),
    sig("shape", &[Value], List, "shape of v"),
    sig(
        "single_use",
        &[Value],
        Bool,
        "v has one consumer in the input graph",
    ),
    sig("sorted", &[List], List, "the list sorted ascending"),
    sig(
        "upper",
        &[Value],
        Int,
        "an upper bound of every element of integer value v, by how it is computed (see `lower`)",
    ),
    sig(
        "value",
        &[Any],
        Any,
        "a constant's (or attribute's) value: a scalar, or a list for 1-D",
    ),
    sig(
        "without",
        &[List, List],
        List,
        "l without the positions in idx",
    ),
];

/// The built-in function `name`.
///
/// ```
/// use onnx_rules::{builtin, Ty};
/// let dim = builtin("dim").unwrap();
/// assert_eq!(dim.params, &[Ty::Value, Ty::Int]);
/// assert!(builtin("no_such_function").is_none());
/// ```
pub fn builtin(name: &str) -> Option<&'static FuncSig> {
    BUILTINS
        .binary_search_by(|f| f.name.cmp(name))
        .ok()
        .and_then(|i| BUILTINS.get(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_sorted_and_unique() {
        assert!(BUILTINS.windows(2).all(|w| w[0].name < w[1].name));
        for f in BUILTINS {
            assert_eq!(builtin(f.name).map(|s| s.name), Some(f.name));
        }
    }

    #[test]
    fn accepts_is_lenient_on_any_and_numbers() {
        assert!(Ty::Int.accepts(Ty::Dim));
        assert!(Ty::Float.accepts(Ty::Int));
        assert!(Ty::Value.accepts(Ty::Any));
        assert!(!Ty::Value.accepts(Ty::Int));
        assert!(!Ty::Bool.accepts(Ty::Int));
        assert!(Ty::List.accepts(Ty::AttrVal));
    }
}
