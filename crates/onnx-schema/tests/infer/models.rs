//! The development models (`../shared/models/*/model.onnx`): every graph output must be
//! inferred exactly as the model declares it — element type, rank, known dims, and symbolic
//! dims under the names the model's inputs use (`batch`, `sequence`). The expectation is the
//! model's own declared outputs.

use onnx_schema::infer::{infer_graph, opset_imports};

use crate::compare::{compare, Verdict};

#[test]
fn development_models_infer_every_output_exactly() {
    let root = onnx_testdata::require_shared!().join("models");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 15,
        "expected the 15 development models, found {}",
        dirs.len()
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let loaded = onnx_proto::load_model(dir.join("model.onnx"))
            .unwrap_or_else(|e| panic!("{name}: cannot load: {e}"));
        let graph = loaded
            .model
            .graph
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no graph"));
        let opsets = opset_imports(&loaded.model.opset_import);
        let types = match infer_graph(graph, &opsets) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        for out in &graph.output {
            let out_name = out.name.as_deref().unwrap_or_default();
            let declared = out
                .r#type
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: {out_name} has no type"));
            checked += 1;
            let verdict = compare(declared, types.get(out_name));
            if verdict != Verdict::Full {
                failures.push(format!(
                    "{name}: {out_name}: {verdict:?}: inferred {:?}",
                    types.get(out_name).and_then(onnx_schema::infer::shape_of)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} outputs not inferred exactly:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
