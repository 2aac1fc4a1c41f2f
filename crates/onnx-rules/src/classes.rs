//! Op classes for op variables (`$f:idempotent(x)`) and the algebraic properties of
//! default-domain ops (commutative, associative) that the checker and the compiler share.

use crate::ir::OpClass;
use crate::params::REDUCTIONS;

const IDEMPOTENT: &[&str] = &["Relu", "Abs", "Ceil", "Floor", "Round", "Sign"];

/// Strictly increasing on all of their domain's reals (Log and Sqrt are not: negative inputs
/// give NaN, which ArgMax ranks differently).
const MONOTONE: &[&str] = &[
    "Exp", "Sigmoid", "Tanh", "Erf", "Softplus", "Asinh", "Sinh", "Atan",
];

const UNARY_ELEMENTWISE: &[&str] = &[
    "Abs",
    "Neg",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Erf",
    "Sin",
    "Cos",
    "Not",
    "Softplus",
    "Softsign",
];

const COMMUTATIVE: &[&str] = &[
    "Add",
    "Mul",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "And",
    "Or",
    "Xor",
    "Equal",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
];

const ASSOCIATIVE: &[&str] = &[
    "Add",
    "Mul",
    "Max",
    "Min",
    "And",
    "Or",
    "Xor",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Sum",
];

/// Every class, in the order of [`OpClass`].
pub const OP_CLASSES: [OpClass; 4] = [
    OpClass::Idempotent,
    OpClass::Monotone,
    OpClass::Reduction,
    OpClass::UnaryElementwise,
];

/// The default-domain ops an op class ranges over.
///
/// ```
/// use onnx_rules::{ir::OpClass, op_class_members};
/// assert!(op_class_members(OpClass::Idempotent).contains(&"Relu"));
/// assert!(op_class_members(OpClass::Reduction).contains(&"ReduceMean"));
/// ```
pub fn op_class_members(class: OpClass) -> &'static [&'static str] {
    match class {
        OpClass::Idempotent => IDEMPOTENT,
        OpClass::Monotone => MONOTONE,
        OpClass::Reduction => REDUCTIONS,
        OpClass::UnaryElementwise => UNARY_ELEMENTWISE,
    }
}

/// The name a rule uses for a class (`$f:idempotent`).
pub fn op_class_name(class: OpClass) -> &'static str {
    match class {
        OpClass::Idempotent => "idempotent",
        OpClass::Monotone => "monotone",
        OpClass::Reduction => "reduction",
        OpClass::UnaryElementwise => "unary",
    }
}

/// The class a rule names (`idempotent`, `monotone`, `reduction`, `unary`).
pub fn op_class_from_name(name: &str) -> Option<OpClass> {
    OP_CLASSES.into_iter().find(|&c| op_class_name(c) == name)
}

/// Whether a default-domain op's operands may be swapped (Add, Mul, Max, Min, Sum, Mean, And,
/// Or, Xor, Equal, BitwiseAnd/Or/Xor).
pub fn is_commutative(op_type: &str) -> bool {
    COMMUTATIVE.contains(&op_type)
}

/// Whether nested applications of a default-domain op may be re-associated (Add, Mul, Max,
/// Min, And, Or, Xor, BitwiseAnd/Or/Xor, Sum).
pub fn is_associative(op_type: &str) -> bool {
    ASSOCIATIVE.contains(&op_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_round_trip() {
        for c in OP_CLASSES {
            assert_eq!(op_class_from_name(op_class_name(c)), Some(c));
        }
        assert_eq!(op_class_from_name("nope"), None);
    }

    /// Every member exists in the default domain.
    #[test]
    fn members_exist() {
        let reg = onnx_schema::registry();
        for c in OP_CLASSES {
            for op in op_class_members(c) {
                assert!(!reg.versions("", op).is_empty(), "{op}");
            }
        }
        for op in COMMUTATIVE.iter().chain(ASSOCIATIVE) {
            assert!(!reg.versions("", op).is_empty(), "{op}");
        }
    }
}
