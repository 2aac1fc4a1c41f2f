//! Tensor rules of the checker (initializers and tensor attributes), as `onnx.checker`'s
//! `check_tensor`: a data type, exactly one data field for a non-empty tensor, external data
//! with a location, and raw_data long enough for the shape and type.

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
    let fields = [
        !tensor.float_data.is_empty(),
        !tensor.int32_data.is_empty(),
        !tensor.string_data.is_empty(),
        !tensor.int64_data.is_empty(),
        has_raw,
        !tensor.double_data.is_empty(),
        !tensor.uint64_data.is_empty(),
    ]
    .iter()
    .filter(|&&set| set)
    .count();
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
    let Some(count) = element_count(&tensor.dims) else {
        return Some(TensorProblem::BadShape);
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
                None => return Some(TensorProblem::BadShape),
                Some(expected) if (actual as u64) < expected => {
                    return Some(TensorProblem::RawDataTooSmall { actual, expected })
                }
                Some(_) => {}
            }
        }
    }
    None
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
            Some(TensorProblem::BadShape)
        );
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
