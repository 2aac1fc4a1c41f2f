//! The fixed vocabulary of the text syntax: element-type names, attribute-type names, the
//! keywords that start a type, and the identifier rule that decides when a name is quoted.

use onnx_proto::attribute_proto::AttributeType;

/// Element-type names as onnx's `PrimitiveTypeNameMap`, plus two this crate adds
/// (`float6e2m3`, `float6e3m2`, which onnx 1.23.2's parser does not know) and `undefined`
/// for data type 0 (an extension: onnx's parser rejects it).
const ELEM_TYPES: &[(&str, i32)] = &[
    ("undefined", 0),
    ("float", 1),
    ("uint8", 2),
    ("int8", 3),
    ("uint16", 4),
    ("int16", 5),
    ("int32", 6),
    ("int64", 7),
    ("string", 8),
    ("bool", 9),
    ("float16", 10),
    ("double", 11),
    ("uint32", 12),
    ("uint64", 13),
    ("complex64", 14),
    ("complex128", 15),
    ("bfloat16", 16),
    ("float8e4m3fn", 17),
    ("float8e4m3fnuz", 18),
    ("float8e5m2", 19),
    ("float8e5m2fnuz", 20),
    ("uint4", 21),
    ("int4", 22),
    ("float4e2m1", 23),
    ("float8e8m0", 24),
    ("uint2", 25),
    ("int2", 26),
    ("float6e2m3", 27),
    ("float6e3m2", 28),
];

/// The name of an element type, or `None` for a number no name exists for.
pub(crate) fn elem_type_name(code: i32) -> Option<&'static str> {
    ELEM_TYPES
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(name, _)| *name)
}

/// The element type a name stands for (`undefined` is 0).
pub(crate) fn elem_type_code(name: &str) -> Option<i32> {
    ELEM_TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, code)| *code)
}

/// Words that start a non-tensor type.
pub(crate) const TYPE_KEYWORDS: &[&str] = &["seq", "map", "optional", "sparse_tensor", "opaque"];

/// The element-type names this crate adds to onnx's vocabulary.
const EXTENSION_TYPE_WORDS: &[&str] = &["undefined", "float6e2m3", "float6e3m2"];

/// True when `word` starts a type for onnx's parser (an element-type name it knows or a type
/// keyword): where a value-info entry may or may not carry a type, such a word is a type.
pub(crate) fn is_standard_type_word(word: &str) -> bool {
    (elem_type_code(word).is_some() && !EXTENSION_TYPE_WORDS.contains(&word))
        || TYPE_KEYWORDS.contains(&word)
}

/// True for the element-type names onnx's parser does not know: where a type is optional,
/// such a word is a type only when a name follows it (onnx's parser reads it as a name).
pub(crate) fn is_extension_type_word(word: &str) -> bool {
    EXTENSION_TYPE_WORDS.contains(&word)
}

/// Attribute-type names as onnx's `AttributeTypeNameMap`.
const ATTR_TYPES: &[(&str, AttributeType)] = &[
    ("float", AttributeType::Float),
    ("int", AttributeType::Int),
    ("string", AttributeType::String),
    ("tensor", AttributeType::Tensor),
    ("graph", AttributeType::Graph),
    ("sparse_tensor", AttributeType::SparseTensor),
    ("type_proto", AttributeType::TypeProto),
    ("floats", AttributeType::Floats),
    ("ints", AttributeType::Ints),
    ("strings", AttributeType::Strings),
    ("tensors", AttributeType::Tensors),
    ("graphs", AttributeType::Graphs),
    ("sparse_tensors", AttributeType::SparseTensors),
    ("type_protos", AttributeType::TypeProtos),
];

/// The name of an attribute type (`None` for UNDEFINED and unknown numbers).
pub(crate) fn attr_type_name(t: AttributeType) -> Option<&'static str> {
    ATTR_TYPES.iter().find(|(_, a)| *a == t).map(|(n, _)| *n)
}

/// The attribute type a name stands for.
pub(crate) fn attr_type_from_name(name: &str) -> Option<AttributeType> {
    ATTR_TYPES.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

/// The attribute-type names, for error messages.
pub(crate) fn attr_type_names() -> String {
    ATTR_TYPES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// onnx's `IsValidIdentifier`: `[A-Za-z_][A-Za-z0-9_]*` (ASCII only).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.bytes();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == b'_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// True for the words onnx's parser reads as a float literal where a value may start
/// (`nan`, `inf`, `infinity`, any case).
pub(crate) fn is_float_word(s: &str) -> bool {
    ["nan", "inf", "infinity"]
        .iter()
        .any(|w| s.eq_ignore_ascii_case(w))
}

/// True for a domain the syntax can write unquoted: identifiers joined by dots.
pub(crate) fn is_dotted_identifier(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(is_identifier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elem_type_names_round_trip() {
        for code in 0..=28 {
            let name = elem_type_name(code).expect("every code up to 28 has a name");
            assert_eq!(elem_type_code(name), Some(code));
        }
        assert_eq!(elem_type_name(29), None);
        assert_eq!(elem_type_code("float32"), None);
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("_a1"));
        assert!(is_identifier("Relu"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("1a"));
        assert!(!is_identifier("a.b"));
        assert!(!is_identifier("é"));
        assert!(is_dotted_identifier("ai.onnx.ml"));
        assert!(!is_dotted_identifier("com.x-y"));
        assert!(!is_dotted_identifier("a..b"));
    }

    #[test]
    fn type_starts() {
        assert!(is_standard_type_word("float16"));
        assert!(is_standard_type_word("seq"));
        assert!(!is_standard_type_word("undefined") && is_extension_type_word("undefined"));
        assert!(!is_standard_type_word("X") && !is_extension_type_word("X"));
        assert!(is_float_word("NaN") && is_float_word("Infinity") && !is_float_word("info"));
    }
}
