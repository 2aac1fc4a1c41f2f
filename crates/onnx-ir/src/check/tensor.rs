//! Tensor rules of the checker (initializers and tensor attributes), as `onnx.checker`'s
//! `check_tensor`: a data type, exactly one data field for a non-empty tensor, external data
//! with a location, raw_data long enough for the shape and type, and otherwise the typed field
//! the data type belongs in, long enough for the shape.

use onnx_proto::{tensor_proto::DataLocation, TensorProto};

use crate::check::error::TensorProblem;

/// Bits per element of a fixed-size type stored in raw_data (`None` for STRING, unknown or
/// UNDEFINED).
fn bits_per_element(data_type: i32) -> Option<u64> {
    Some(match data_type {
        2 | 3 | 9 | 17..=20 | 24 => 8,
        4 | 5 | 10 | 16 => 16,
        1 | 6 | 12 => 32,
        7 | 11 | 13 | 14 => 64,
        15 => 128,
        21..=23 => 4,
        25 | 26 => 2,
        27 | 28 => 6,
        _ => return None,
    })
}

/// The element count of a shape, or `None` for a negative dimension or an overflow.
pub(crate) fn element_count(dims: &[i64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, &d| {
        u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    })
}

/// The first problem of a tensor, if any.
pub(crate) fn check_tensor(tensor: &TensorProto) -> Option<TensorProblem> {
    let data_type = tensor.data_type.unwrap_or(0);
    if data_type == 0 {
        return Some(TensorProblem::NoDataType);
    }
    let has_raw = tensor.raw_data.as_ref().is_some_and(|r| !r.is_empty());
    let set_fields: Vec<&'static str> = [
        ("float_data", !tensor.float_data.is_empty()),
        ("int32_data", !tensor.int32_data.is_empty()),
        ("string_data", !tensor.string_data.is_empty()),
        ("int64_data", !tensor.int64_data.is_empty()),
        ("raw_data", has_raw),
        ("double_data", !tensor.double_data.is_empty()),
        ("uint64_data", !tensor.uint64_data.is_empty()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(name, _)| name)
    .collect();
    let fields = set_fields.len();
    if tensor.data_location == Some(DataLocation::External as i32) {
        if fields != 0 {
            return Some(TensorProblem::ExternalWithData);
        }
        let has_location = tensor
            .external_data
            .iter()
            .any(|e| e.key.as_deref() == Some("location") && e.value.is_some());
        return (!has_location).then_some(TensorProblem::ExternalWithoutLocation);
    }
    if let Some((index, &dim)) = tensor.dims.iter().enumerate().find(|(_, d)| **d < 0) {
        return Some(TensorProblem::NegativeDimension { index, dim });
    }
    let Some(count) = element_count(&tensor.dims) else {
        return Some(TensorProblem::SizeOverflow);
    };
    if count == 0 {
        return (fields != 0).then_some(TensorProblem::EmptyWithData);
    }
    if fields != 1 {
        return Some(TensorProblem::DataFieldCount(fields));
    }
    if has_raw {
        if data_type == 8 {
            return Some(TensorProblem::StringInRawData);
        }
        if let Some(bits) = bits_per_element(data_type) {
            let actual = tensor.raw_data.as_ref().map_or(0, |r| r.len());
            let expected = count.checked_mul(bits).map(|b| b.div_ceil(8));
            match expected {
                None => return Some(TensorProblem::SizeOverflow),
                Some(expected) if (actual as u64) < expected => {
                    return Some(TensorProblem::RawDataTooSmall { actual, expected })
                }
                Some(_) => {}
            }
        }
        return None;
    }
    check_typed_field(
        tensor,
        data_type,
        count,
        set_fields.first().copied().unwrap_or(""),
    )
}

/// How a data type is stored outside raw_data, as `onnx.checker`: the typed field, entries per
/// element (complex numbers take two), and elements packed into one entry (4-bit types pack 8
/// into an int32, 2-bit types 16).
struct TypedStorage {
    field: &'static str,
    entries_per_element: u64,
    elements_per_entry: u64,
}

fn typed_storage(data_type: i32) -> Option<TypedStorage> {
    let (field, entries_per_element, elements_per_entry) = match data_type {
        1 => ("float_data", 1, 1),
        14 => ("float_data", 2, 1),
        11 => ("double_data", 1, 1),
        15 => ("double_data", 2, 1),
        2..=6 | 9 | 10 | 16..=20 | 24 | 27 | 28 => ("int32_data", 1, 1),
        21..=23 => ("int32_data", 1, 8),
        25 | 26 => ("int32_data", 1, 16),
        7 => ("int64_data", 1, 1),
        12 | 13 => ("uint64_data", 1, 1),
        8 => ("string_data", 1, 1),
        _ => return None,
    };
    Some(TypedStorage {
        field,
        entries_per_element,
        elements_per_entry,
    })
}

/// A non-empty tensor whose one data field is a typed field: the right field, long enough.
fn check_typed_field(
    tensor: &TensorProto,
    data_type: i32,
    count: u64,
    actual_field: &'static str,
) -> Option<TensorProblem> {
    let Some(storage) = typed_storage(data_type) else {
        return Some(TensorProblem::UnknownDataType(data_type));
    };
    let field = storage.field;
    if field != actual_field {
        return Some(TensorProblem::WrongDataField {
            expected: field,
            actual: actual_field,
        });
    }
    let Some(expected) = count
        .checked_mul(storage.entries_per_element)
        .map(|n| n.div_ceil(storage.elements_per_entry))
    else {
        return Some(TensorProblem::SizeOverflow);
    };
    let actual = match field {
        "float_data" => tensor.float_data.len(),
        "double_data" => tensor.double_data.len(),
        "int32_data" => tensor.int32_data.len(),
        "int64_data" => tensor.int64_data.len(),
        "uint64_data" => tensor.uint64_data.len(),
        _ => tensor.string_data.len(),
    };
    ((actual as u64) < expected).then_some(TensorProblem::TypedDataTooSmall {
        field,
        actual,
        expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn float_tensor(dims: Vec<i64>, raw: &'static [u8]) -> TensorProto {
        TensorProto {
            dims,
            data_type: Some(1),
            raw_data: Some(Bytes::from_static(raw)),
            ..TensorProto::default()
        }
    }

    #[test]
    fn raw_data_must_cover_the_shape() {
        assert_eq!(check_tensor(&float_tensor(vec![2], &[0; 8])), None);
        assert_eq!(
            check_tensor(&float_tensor(vec![3], &[0; 8])),
            Some(TensorProblem::RawDataTooSmall {
                actual: 8,
                expected: 12
            })
        );
        assert_eq!(
            check_tensor(&float_tensor(vec![-1], &[0; 8])),
            Some(TensorProblem::NegativeDimension { index: 0, dim: -1 })
        );
        assert_eq!(
            check_tensor(&float_tensor(vec![1 << 40, 1 << 40], &[0; 8])),
            Some(TensorProblem::SizeOverflow)
        );
    }

    #[test]
    fn typed_fields_must_match_the_data_type_and_cover_the_shape() {
        let mut t = TensorProto {
            dims: vec![3],
            data_type: Some(1),
            float_data: vec![1.0, 2.0],
            ..TensorProto::default()
        };
        assert_eq!(
            check_tensor(&t),
            Some(TensorProblem::TypedDataTooSmall {
                field: "float_data",
                actual: 2,
                expected: 3
            })
        );
        t.float_data.push(3.0);
        assert_eq!(check_tensor(&t), None);
        t.data_type = Some(7);
        assert_eq!(
            check_tensor(&t),
            Some(TensorProblem::WrongDataField {
                expected: "int64_data",
                actual: "float_data"
            })
        );
        t.data_type = Some(99);
        assert_eq!(check_tensor(&t), Some(TensorProblem::UnknownDataType(99)));
        // Sixteen 2-bit values fit in one int32.
        let packed = TensorProto {
            dims: vec![16],
            data_type: Some(26),
            int32_data: vec![0],
            ..TensorProto::default()
        };
        assert_eq!(check_tensor(&packed), None);
    }

    #[test]
    fn data_type_and_field_count_are_checked() {
        let mut t = float_tensor(vec![1], &[0; 4]);
        t.float_data = vec![1.0];
        assert_eq!(check_tensor(&t), Some(TensorProblem::DataFieldCount(2)));
        t.data_type = None;
        assert_eq!(check_tensor(&t), Some(TensorProblem::NoDataType));
        let empty = float_tensor(vec![0], &[1]);
        assert_eq!(check_tensor(&empty), Some(TensorProblem::EmptyWithData));
    }
}
