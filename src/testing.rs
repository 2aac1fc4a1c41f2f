//! Snapshot testing of pipelines: [`snapshot`] optimizes a model file (usually a small model
//! in the ONNX text syntax, aimed at one behaviour) and renders, deterministically, what the
//! pipeline did — node counts, the op histogram before and after, the rules fired per phase,
//! refused unions — followed by the optimized model in the text syntax. Keep that text under
//! insta, and a change to any rule shows up as a reviewed snapshot diff:
//!
//! ```no_run
//! // tests/my_pipeline.rs (with `insta` as a dev-dependency)
//! #[test]
//! fn my_pipeline_on_my_models() {
//!     let pipeline = onnx_opt::Pipeline::from_file("pipelines/mine.toml".as_ref()).unwrap();
//!     let optimizer = onnx_opt::Optimizer::new().pipeline(pipeline);
//!     for model in ["tests/models/block.onnxtxt", "tests/models/head.onnxtxt"] {
//!         let text = onnx_opt::testing::snapshot(&optimizer, model.as_ref()).unwrap();
//!         insta::assert_snapshot!(onnx_opt::testing::snapshot_name(model.as_ref()), text);
//!     }
//! }
//! ```
//!
//! Times are left out (they differ between runs); the differential check runs as the optimizer
//! is configured (three random inputs by default), so a snapshot is never taken of a wrong model.

use std::fmt::Write;
use std::path::Path;

use crate::{Error, Optimized, Optimizer};

/// Tensors with more elements than this are elided in the printed model.
pub const ELIDE_TENSORS_ABOVE: usize = 256;

/// Optimizes the model file and renders the report and the optimized model.
pub fn snapshot(optimizer: &Optimizer, model: &Path) -> Result<String, Error> {
    let loaded = crate::load(model)?;
    let out = optimizer.optimize(&loaded)?;
    Ok(render(&out))
}

/// A snapshot name for a model file: its file stem.
pub fn snapshot_name(model: &Path) -> String {
    model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string())
}

/// The deterministic rendering of an optimization: report, then the model.
pub fn render(out: &Optimized) -> String {
    let r = &out.report;
    let mut s = String::new();
    let _ = writeln!(s, "pipeline: {}", r.pipeline);
    let _ = writeln!(s, "nodes: {} -> {}", r.nodes_before, r.nodes_after);
    let _ = writeln!(
        s,
        "initializers: {} -> {}",
        r.initializers_before, r.initializers_after
    );
    let mut ops: Vec<&String> = r.ops_before.keys().chain(r.ops_after.keys()).collect();
    ops.sort();
    ops.dedup();
    let _ = writeln!(s, "ops:");
    for op in ops {
        let b = r.ops_before.get(op).copied().unwrap_or(0);
        let a = r.ops_after.get(op).copied().unwrap_or(0);
        let mark = if a == b { "" } else { " *" };
        let _ = writeln!(s, "  {op}: {b} -> {a}{mark}");
    }
    let _ = writeln!(s, "subgraphs optimized: {}", r.egraph.subgraphs);
    for p in &r.egraph.main.phases {
        let _ = writeln!(s, "phase {}: {:?}", p.name, p.stop);
        for (rule, n) in &p.firings {
            let _ = writeln!(s, "  fired {rule}: {n}");
        }
        for rf in &p.refusals {
            let _ = writeln!(s, "  refused {}: {}", rf.rule, rf.reason);
        }
    }
    if r.egraph.subgraphs > 0 {
        let _ = writeln!(s, "in subgraphs:");
        for (rule, n) in &r.egraph.subgraph_firings {
            let _ = writeln!(s, "  fired {rule}: {n}");
        }
        for rf in &r.egraph.subgraph_refusals {
            let _ = writeln!(s, "  refused {}: {}", rf.rule, rf.reason);
        }
    }
    let _ = writeln!(
        s,
        "check: {}",
        if r.check_trials == 0 {
            "off".to_string()
        } else {
            format!("outputs equal on {} random inputs", r.check_trials)
        }
    );
    s.push_str("---\n");
    s.push_str(&onnx_text::print_model(
        &out.model.to_proto(),
        &onnx_text::PrintOptions {
            elide_tensors_above: Some(ELIDE_TENSORS_ABOVE),
        },
    ));
    s
}
