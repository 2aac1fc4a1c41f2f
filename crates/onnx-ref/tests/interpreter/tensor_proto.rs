//! `Tensor::from_proto` rejects malformed tensors with an `Err` naming the tensor.

use onnx_proto::TensorProto;
use onnx_ref::{DType, RefError, Tensor};

fn proto(dtype: DType, dims: &[i64]) -> TensorProto {
    TensorProto {
        name: Some("w".into()),
        data_type: Some(dtype.code()),
        dims: dims.to_vec(),
        ..Default::default()
    }
}

#[test]
fn bad_raw_data_length_is_an_error() {
    let mut t = proto(DType::Float, &[2, 3]);
    t.raw_data = Some(vec![0u8; 20].into());
    let err = Tensor::from_proto(&t);
    assert!(
        matches!(&err, Err(RefError::InvalidTensor { tensor, reason }) if tensor == "w" && reason.contains("raw_data has 20 bytes, expected 24")),
        "{err:?}"
    );
}

#[test]
fn bad_packed_length_is_an_error() {
    // 5 int4 elements pack into 3 bytes.
    let mut t = proto(DType::Int4, &[5]);
    t.raw_data = Some(vec![0u8; 2].into());
    assert!(matches!(
        Tensor::from_proto(&t),
        Err(RefError::InvalidTensor { .. })
    ));
    t.raw_data = Some(vec![0x21u8, 0x43, 0x05].into());
    let ok = Tensor::from_proto(&t).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ok.to_i64_vec().unwrap_or_else(|e| panic!("{e}")),
        vec![1, 2, 3, 4, 5]
    );
}

#[test]
fn typed_field_length_mismatch_is_an_error() {
    let mut t = proto(DType::Int64, &[3]);
    t.int64_data = vec![1, 2];
    assert!(
        matches!(Tensor::from_proto(&t), Err(RefError::InvalidTensor { reason, .. }) if reason.contains("int64_data has 2 entries, expected 3"))
    );
}

#[test]
fn negative_dims_are_an_error() {
    let mut t = proto(DType::Float, &[2, -1]);
    t.float_data = vec![1.0, 2.0];
    assert!(
        matches!(Tensor::from_proto(&t), Err(RefError::InvalidTensor { reason, .. }) if reason.contains("negative dimension -1"))
    );
}

#[test]
fn absurd_dims_are_an_error() {
    // The product overflows i64; nothing may be allocated.
    let t = proto(DType::Float, &[1 << 40, 1 << 40, 1 << 40]);
    assert!(matches!(
        Tensor::from_proto(&t),
        Err(RefError::TooLarge { .. })
    ));
    // Large but not overflowing: still above the element limit.
    let t = proto(DType::Uint8, &[1 << 20, 1 << 20]);
    assert!(
        matches!(Tensor::from_proto(&t), Err(RefError::TooLarge { elements, .. }) if elements == 1 << 40)
    );
}

#[test]
fn external_data_must_be_inlined_first() {
    let mut t = proto(DType::Float, &[4]);
    t.data_location = Some(onnx_proto::tensor_proto::DataLocation::External as i32);
    t.external_data = vec![onnx_proto::StringStringEntryProto {
        key: Some("location".into()),
        value: Some("w.bin".into()),
    }];
    assert!(
        matches!(Tensor::from_proto(&t), Err(RefError::ExternalData { tensor }) if tensor == "w")
    );
}

#[test]
fn unknown_dtype_is_an_error() {
    let mut t = proto(DType::Float, &[1]);
    t.data_type = Some(99);
    assert!(matches!(
        Tensor::from_proto(&t),
        Err(RefError::UnknownDType { code: 99, .. })
    ));
    t.data_type = None;
    assert!(matches!(
        Tensor::from_proto(&t),
        Err(RefError::UnknownDType { code: 0, .. })
    ));
}

#[test]
fn scalars_and_empty_tensors_decode() {
    let mut t = proto(DType::Double, &[]);
    t.double_data = vec![2.5];
    let s = Tensor::from_proto(&t).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((s.rank(), s.len()), (0, 1));
    let e = Tensor::from_proto(&proto(DType::Float, &[0, 3])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.shape(), &[0, 3]);
}
