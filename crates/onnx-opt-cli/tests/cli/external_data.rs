//! `--reuse-external-data` on `optimize` and `convert`: the output refers to the input's data
//! file for the tensors it keeps, and replacing the input model is refused.

use std::path::{Path, PathBuf};

use super::{onnx_opt, stderr};

/// `dir/in.onnx` with a 64 KiB weight in `in.onnx.data`.
fn write_input(dir: &Path) -> PathBuf {
    let text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2,128] x) => (float[2,128] y) <float[1] w = {0.0}> {\n y = MatMul(x, w)\n}\n";
    let mut m = onnx_text::parse_model(text).unwrap();
    let w = &mut m.graph.as_mut().unwrap().initializer[0];
    w.dims = vec![128, 128];
    w.float_data.clear();
    let data: Vec<u8> = (0..128 * 128)
        .flat_map(|i| ((i % 13) as f32 * 0.25).to_le_bytes())
        .collect();
    w.raw_data = Some(data.into());
    let path = dir.join("in.onnx");
    let options = onnx_proto::SaveOptions {
        external: Some(onnx_proto::ExternalDataOptions::for_model(&path, 1024)),
        ..Default::default()
    };
    onnx_proto::save_model(&m, None, &path, &options).unwrap();
    path
}

fn location(model: &Path) -> String {
    let m = onnx_proto::load_model(model).unwrap().model;
    let w = &m.graph.unwrap().initializer[0];
    onnx_proto::external_data_info(w, model)
        .unwrap()
        .expect("w is external")
        .location
}

#[test]
fn reuse_external_data_refers_to_the_input_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path());
    let opt = dir.path().join("opt.onnx");
    let flag = "--reuse-external-data";
    let o = onnx_opt(&[
        &"optimize",
        &input,
        &"-o",
        &opt,
        &"--check",
        &"1",
        &flag,
        &"-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(location(&opt), "in.onnx.data");
    assert!(
        !dir.path().join("opt.onnx.data").exists(),
        "nothing new to write"
    );
    let conv = dir.path().join("conv.onnx");
    let o = onnx_opt(&[
        &"convert", &input, &"--opset", &"18", &"-o", &conv, &flag, &"-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(location(&conv), "in.onnx.data");
    // Without the flag the output has its own copy.
    let copy = dir.path().join("copy.onnx");
    let o = onnx_opt(&[&input, &"-o", &copy, &"--check", &"0", &"-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(location(&copy), "copy.onnx.data");
    assert_eq!(
        std::fs::read(dir.path().join("copy.onnx.data")).unwrap(),
        std::fs::read(dir.path().join("in.onnx.data")).unwrap()
    );
    // Over the input model: refused, the input left as it was.
    let before = std::fs::read(&input).unwrap();
    let o = onnx_opt(&[&"optimize", &input, &"-o", &input, &flag]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("replace the input model"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
}
