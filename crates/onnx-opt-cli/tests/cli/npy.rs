//! `.npy` input files: `onnx-opt run --input NAME=FILE.npy` end to end, and the parser
//! (`onnx_opt::npy::parse_npy`) on every supported dtype, both byte orders, Fortran order,
//! size-0 and rank-0 shapes, and the files it must refuse. Every file is built here as bytes.

use std::path::Path;

use onnx_opt::npy::parse_npy;
use onnx_ref::{DType, Tensor};

use super::{onnx_opt, stderr, stdout};

/// A `.npy` file of format `version` whose header is the dict literal `dict`, padded as numpy
/// pads it (the data starts at a multiple of 64).
fn npy_with_header(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let prefix = if version == 1 { 10 } else { 12 };
    let mut header = dict.to_string();
    // numpy pads with spaces up to a newline that ends at a multiple of 64 bytes.
    while (prefix + header.len() + 1) & 63 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend([version, 0]);
    if version == 1 {
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

/// A `.npy` file as `numpy.save` writes it.
fn npy(version: u8, descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    npy_with_header(version, &dict, data)
}

fn le_f32(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn be_f32(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// Parses `bytes` and returns the dtype, shape and the tensor's little-endian row-major bytes.
fn parsed(bytes: &[u8]) -> (DType, Vec<usize>, Vec<u8>) {
    let npy = parse_npy(bytes).unwrap_or_else(|e| panic!("{e}"));
    let t = &npy.tensor;
    let raw = t.to_proto("x").raw_data.unwrap_or_default().to_vec();
    (t.dtype(), t.shape().to_vec(), raw)
}

fn parse_error(bytes: &[u8]) -> String {
    match parse_npy(bytes) {
        Ok(npy) => panic!("parsed as {:?}", npy.tensor),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_supported_dtype_in_both_byte_orders() {
    // (descr, dtype, element bytes in the file, the same elements little-endian)
    let i16s: [i16; 3] = [-2, 300, i16::MAX];
    let u32s: [u32; 3] = [1, 70_000, u32::MAX];
    let i64s: [i64; 3] = [-1, 1 << 40, i64::MIN];
    let u64s: [u64; 3] = [0, 1 << 63, 5];
    let f64s: [f64; 3] = [0.5, -1e300, f64::INFINITY];
    let f16s: [u16; 3] = [0x3c00, 0xc000, 0x7c00]; // 1.0, -2.0, inf
    let le = |v: &[Vec<u8>]| v.concat();
    let cases: Vec<(&str, DType, Vec<u8>, Vec<u8>)> = vec![
        ("|b1", DType::Bool, vec![1, 0, 1], vec![1, 0, 1]),
        (
            "|i1",
            DType::Int8,
            vec![0xff, 0x7f, 0x80],
            vec![0xff, 0x7f, 0x80],
        ),
        ("|u1", DType::Uint8, vec![0, 200, 255], vec![0, 200, 255]),
        (
            "<i2",
            DType::Int16,
            le(&i16s.map(|v| v.to_le_bytes().to_vec())),
            le(&i16s.map(|v| v.to_le_bytes().to_vec())),
        ),
        (
            ">i2",
            DType::Int16,
            le(&i16s.map(|v| v.to_be_bytes().to_vec())),
            le(&i16s.map(|v| v.to_le_bytes().to_vec())),
        ),
        (
            ">u4",
            DType::Uint32,
            le(&u32s.map(|v| v.to_be_bytes().to_vec())),
            le(&u32s.map(|v| v.to_le_bytes().to_vec())),
        ),
        (
            "<i8",
            DType::Int64,
            le(&i64s.map(|v| v.to_le_bytes().to_vec())),
            le(&i64s.map(|v| v.to_le_bytes().to_vec())),
        ),
        (
            ">u8",
            DType::Uint64,
            le(&u64s.map(|v| v.to_be_bytes().to_vec())),
            le(&u64s.map(|v| v.to_le_bytes().to_vec())),
        ),
        (
            ">f2",
            DType::Float16,
            le(&f16s.map(|v| v.to_be_bytes().to_vec())),
            le(&f16s.map(|v| v.to_le_bytes().to_vec())),
        ),
        (
            "<f4",
            DType::Float,
            le_f32(&[1.5, -0.0, f32::NAN]),
            le_f32(&[1.5, -0.0, f32::NAN]),
        ),
        (
            ">f8",
            DType::Double,
            le(&f64s.map(|v| v.to_be_bytes().to_vec())),
            le(&f64s.map(|v| v.to_le_bytes().to_vec())),
        ),
        // complex64: (re, im) float pairs; big-endian swaps each float, not the pair.
        (
            ">c8",
            DType::Complex64,
            be_f32(&[1.0, 2.0, 3.0, -4.0, 0.5, 0.25]),
            le_f32(&[1.0, 2.0, 3.0, -4.0, 0.5, 0.25]),
        ),
        (
            "<c16",
            DType::Complex128,
            le(&[1.0f64, -1.0, 2.0, 0.0, 9.0, 8.0].map(|v| v.to_le_bytes().to_vec())),
            le(&[1.0f64, -1.0, 2.0, 0.0, 9.0, 8.0].map(|v| v.to_le_bytes().to_vec())),
        ),
    ];
    for (descr, dtype, file_data, want) in cases {
        for version in [1, 2, 3] {
            let bytes = npy(version, descr, false, &[3], &file_data);
            let (got_dtype, shape, raw) = parsed(&bytes);
            assert_eq!(got_dtype, dtype, "{descr} v{version}");
            assert_eq!(shape, [3], "{descr} v{version}");
            assert_eq!(raw, want, "{descr} v{version}");
        }
    }
}

#[test]
fn fortran_order_is_transposed_to_row_major() {
    // A 2x3x2 array a[i][j][k] = 100i + 10j + k, stored column-major (i fastest).
    let shape = [2usize, 3, 2];
    let mut column_major: Vec<i32> = Vec::new();
    for k in 0..2 {
        for j in 0..3 {
            for i in 0..2 {
                column_major.push(100 * i + 10 * j + k);
            }
        }
    }
    let mut row_major: Vec<i32> = Vec::new();
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..2 {
                row_major.push(100 * i + 10 * j + k);
            }
        }
    }
    let file_data: Vec<u8> = column_major.iter().flat_map(|v| v.to_be_bytes()).collect();
    let t = parse_npy(&npy(1, ">i4", true, &shape, &file_data))
        .unwrap_or_else(|e| panic!("{e}"))
        .tensor;
    assert_eq!(t, Tensor::from_vec(&shape, row_major).unwrap());
    // Rank 1 and rank 0 are the same in both orders.
    let t = parse_npy(&npy(1, "<f4", true, &[2], &le_f32(&[1.0, 2.0])))
        .unwrap()
        .tensor;
    assert_eq!(t, Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap());
}

#[test]
fn size_zero_and_scalar_shapes() {
    for fortran in [false, true] {
        let (dtype, shape, raw) = parsed(&npy(1, "<f4", fortran, &[2, 0, 3], &[]));
        assert_eq!((dtype, shape, raw.len()), (DType::Float, vec![2, 0, 3], 0));
    }
    let (_, shape, raw) = parsed(&npy(1, "<i8", false, &[0], &[]));
    assert_eq!((shape, raw.len()), (vec![0], 0));
    let (dtype, shape, raw) = parsed(&npy(2, "<f8", false, &[], &2.5f64.to_le_bytes()));
    assert_eq!(
        (dtype, shape, raw),
        (DType::Double, vec![], 2.5f64.to_le_bytes().to_vec())
    );
    // Headers as Python 2 wrote them: double quotes, long integers.
    let dict = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1L, 2L)}";
    let (_, shape, _) = parsed(&npy_with_header(1, dict, &le_f32(&[1.0, 2.0])));
    assert_eq!(shape, [1, 2]);
}

#[test]
fn unsupported_and_malformed_files_are_refused() {
    for descr in [
        "|O", "<U5", "|S3", "|V4", "<M8[ns]", "<m8", "<f16", "|f4", "<q",
    ] {
        let e = parse_error(&npy(1, descr, false, &[1], &[0; 16]));
        assert!(e.contains(&format!("'{descr}'")), "{descr}: {e}");
    }
    let structured = "{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, \
                      'shape': (2,), }";
    let e = parse_error(&npy_with_header(1, structured, &[0; 24]));
    assert!(
        e.contains("structured dtype [('a', '<f4'), ('b', '<i8')]"),
        "{e}"
    );
    let good = npy(1, "<f4", false, &[2, 2], &le_f32(&[1.0, 2.0, 3.0, 4.0]));
    // Truncated anywhere: inside the magic, the version, the header length, the header, data.
    for len in [3, 7, 9, 30, good.len() - 1] {
        let e = parse_error(&good[..len]);
        assert!(
            e.contains("truncated") || e.contains("magic"),
            "{len} bytes: {e}"
        );
    }
    let e = parse_error(&[good.as_slice(), &[0u8; 4]].concat());
    assert!(e.contains("4 bytes after the data"), "{e}");
    let mut bad_version = good.clone();
    bad_version[6] = 9;
    assert!(parse_error(&bad_version).contains("version 9.0"));
    for dict in [
        "{'descr': '<f4', 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)",
        "['descr', '<f4']",
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }",
    ] {
        let e = parse_error(&npy_with_header(1, dict, &le_f32(&[1.0, 2.0])));
        assert!(!e.is_empty(), "{dict}");
    }
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let e = parse_error(&npy_with_header(1, &format!("{{'descr': {deep}}}"), &[]));
    assert!(e.contains("nested deeper"), "{e}");
}

/// Writes `bytes` to `dir/name` and returns `INPUT=PATH` for `--input`.
fn input_arg(dir: &Path, input: &str, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    format!("{input}={}", path.display())
}

#[test]
fn run_reads_npy_inputs_in_any_layout() {
    let shared = onnx_testdata::require_shared!();
    let dir = tempfile::tempdir().unwrap();
    let case = shared.join("onnx-backend/node/test_add_bcast");
    let m = case.join("model.onnx");
    let data = case.join("test_data_set_0");
    let read = |f: &str| {
        let p: onnx_proto::TensorProto = onnx_proto::decode_file(data.join(f)).unwrap();
        let Ok(v) = Tensor::from_proto(&p).unwrap().to_f64_vec() else {
            panic!("{f} is not numeric")
        };
        v.into_iter().map(|x| x as f32).collect::<Vec<f32>>()
    };
    let (x, y) = (read("input_0.pb"), read("input_1.pb"));
    let want = onnx_proto::decode_file::<onnx_proto::TensorProto>(data.join("output_0.pb"))
        .unwrap()
        .raw_data
        .unwrap_or_default();
    assert_eq!(x.len(), 3 * 4 * 5);
    // x [3, 4, 5] in column-major order.
    let mut x_fortran = Vec::new();
    for k in 0..5 {
        for j in 0..4 {
            for i in 0..3 {
                x_fortran.push(x[i * 20 + j * 5 + k]);
            }
        }
    }
    let layouts = [
        ("c_le.npy", npy(1, "<f4", false, &[3, 4, 5], &le_f32(&x))),
        (
            "f_be.npy",
            npy(2, ">f4", true, &[3, 4, 5], &be_f32(&x_fortran)),
        ),
        (
            "f_le.npy",
            npy(3, "<f4", true, &[3, 4, 5], &le_f32(&x_fortran)),
        ),
    ];
    let y_arg = input_arg(
        dir.path(),
        "y",
        "y.npy",
        &npy(1, ">f4", false, &[5], &be_f32(&y)),
    );
    for (file, bytes) in layouts {
        let x_arg = input_arg(dir.path(), "x", file, bytes.as_slice());
        let out = dir.path().join(format!("out_{file}"));
        let o = onnx_opt(&[
            &"run", &m, &"--input", &x_arg, &"--input", &y_arg, &"-o", &out,
        ]);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        assert!(stdout(&o).contains("sum: float[3, 4, 5]"), "{}", stdout(&o));
        let got: onnx_proto::TensorProto =
            onnx_proto::decode_file(out.join("output_0.pb")).unwrap();
        assert_eq!(got.raw_data.unwrap_or_default(), want, "{file}");
    }
}

#[test]
fn run_refuses_bad_npy_inputs_naming_file_input_and_descr() {
    let shared = onnx_testdata::require_shared!();
    let dir = tempfile::tempdir().unwrap();
    let m = shared.join("onnx-backend/node/test_add_bcast/model.onnx");
    let y = input_arg(
        dir.path(),
        "y",
        "y.npy",
        &npy(1, "<f4", false, &[5], &[0; 20]),
    );
    let expect_failure = |x: &str, needles: &[&str]| {
        let o = onnx_opt(&[&"run", &m, &"--input", &x, &"--input", &y]);
        assert_eq!(o.status.code(), Some(1), "{x}");
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "{x}: '{needle}' not in {err}");
        }
    };
    // Truncated data.
    let mut truncated = npy(1, "<f4", false, &[3, 4, 5], &[0; 240]);
    truncated.truncate(truncated.len() - 10);
    let x = input_arg(dir.path(), "x", "truncated.npy", &truncated);
    expect_failure(&x, &["truncated.npy", "truncated"]);
    // A dtype ONNX has no type for.
    let x = input_arg(
        dir.path(),
        "x",
        "strings.npy",
        &npy(1, "<U3", false, &[1], &[0; 12]),
    );
    expect_failure(&x, &["strings.npy", "'<U3'", "unicode strings"]);
    // The right shape, the wrong element type: the error names the input.
    let x = input_arg(
        dir.path(),
        "x",
        "double.npy",
        &npy(1, "<f8", false, &[3, 4, 5], &[0; 480]),
    );
    expect_failure(
        &x,
        &[
            "double.npy",
            "input 'x' is declared float",
            "double",
            "'<f8'",
        ],
    );
    // A missing file.
    let missing = format!("x={}", dir.path().join("missing.npy").display());
    expect_failure(&missing, &["missing.npy"]);
}
