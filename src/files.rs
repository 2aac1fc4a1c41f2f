//! Optimizing files (what `onnx-opt optimize` and `convert` run): load (binary memory-mapped with external data resolved, or
//! the text syntax) -> IR -> checker -> [`Optimizer`] (lift, fold, saturate, extract, checker,
//! differential check in the reference interpreter) -> save through a temporary file and a
//! rename, so nothing is written unless every step succeeded.

use std::path::{Path, PathBuf};
use std::time::Instant;

use onnx_ir::Model;

use crate::model::{load_ir, Loaded};
use crate::{Error, Optimizer, Report};

/// The figures of one run on files, for the table and `--report`: the optimizer's [`Report`]
/// and what concerns the files.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// The input file.
    pub input: PathBuf,
    /// The output file.
    pub output: PathBuf,
    /// Input file size in bytes.
    pub size_before: u64,
    /// Output file size in bytes.
    pub size_after: u64,
    /// Wall time of the whole run, in milliseconds.
    pub time_ms: f64,
    /// Loading and checking the input.
    pub load_ms: f64,
    /// Saving.
    pub save_ms: f64,
    /// What the optimizer did (its fields appear at the top level of `--report`).
    #[serde(flatten)]
    pub report: Report,
}

/// Refuses a model that fails the checker, listing every problem.
pub fn check_ir(path: &Path, model: &Model) -> Result<(), Error> {
    onnx_ir::check_model(model).map_err(|errors| Error::Check {
        path: path.to_path_buf(),
        errors,
    })
}

/// The checker's warnings about a model (a node that only onnxruntime's registry describes,
/// such as LayerNormalization in the default domain below opset 17).
pub fn checker_warnings(model: &Model) -> Vec<String> {
    onnx_ir::check_model_report(model, &onnx_ir::CheckOptions::default())
        .warnings
        .iter()
        .map(|w| w.to_string().replacen("warning: ", "", 1))
        .collect()
}

/// How [`optimize_file`] writes its output.
#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// Tensors of at least this many bytes go to external data, `<output>.data`; by default
    /// 1024 when the input had external data, else none.
    pub external_threshold: Option<usize>,
    /// Tensors whose bytes are unchanged in the input's external data files keep referring to
    /// those files (at their offsets) instead of being copied; only new or changed tensors go
    /// to the new data file. Refused before the optimization runs when the output would
    /// replace the input model or a data file is not inside the output's directory; see
    /// [`onnx_proto::SaveOptions::reuse_external_data`].
    pub reuse_external_data: bool,
}

/// Optimizes `input` into `output` with `optimizer`, saving as `options` say. Nothing is
/// written unless every step, the check included, succeeded.
pub fn optimize_file(
    input: &Path,
    output: &Path,
    optimizer: &Optimizer,
    options: &OutputOptions,
    progress: &dyn Fn(&str),
) -> Result<Outcome, Error> {
    let t0 = Instant::now();
    if options.reuse_external_data && same_file(input, output) {
        return Err(onnx_proto::Error::ReuseInPlace {
            path: output.to_path_buf(),
        }
        .into());
    }
    progress("loading");
    let Loaded {
        proto: loaded,
        mut model,
        had_external,
    } = load_ir(input)?;
    if options.reuse_external_data && had_external {
        // Refused now rather than after the optimization (the save checks it again).
        onnx_proto::check_external_reuse(&loaded.model, output)?;
    }
    sort_nodes(input, &mut model)?;
    check_ir(input, &model)?;
    for w in checker_warnings(&model) {
        eprintln!("warning: {}: {w}", input.display());
    }
    // Rule files are parsed and checked before any work on the model.
    optimizer.phases()?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    progress("optimizing");
    // Checked above, with the file's name in the message.
    let optimized = optimizer
        .optimize_checked(&model, progress)
        .map_err(|e| match e {
            Error::Optimize { source, .. } => Error::Optimize {
                path: input.to_path_buf(),
                source,
            },
            other => other,
        })?;
    let report = optimized.report;
    let proto = optimized.model.to_proto();
    let t3 = Instant::now();
    progress("saving");
    let threshold = options
        .external_threshold
        .or(if had_external { Some(1024) } else { None });
    let save = onnx_proto::SaveOptions {
        external: threshold.map(|t| onnx_proto::ExternalDataOptions::for_model(output, t)),
        reuse_external_data: options.reuse_external_data,
        ..Default::default()
    };
    crate::model::save_proto(&proto, None, output, &save)?;
    let save_ms = t3.elapsed().as_secs_f64() * 1e3;
    let size_after = std::fs::metadata(output)
        .map_err(|source| onnx_proto::Error::Io {
            path: output.to_path_buf(),
            source,
        })?
        .len();
    Ok(Outcome {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        size_before: loaded.file_size,
        size_after,
        time_ms: t0.elapsed().as_secs_f64() * 1e3,
        load_ms,
        save_ms,
        report,
    })
}

/// Whether two paths name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Sorts a model's nodes topologically when they are out of order (with a warning naming
/// `origin` on stderr), as every loader of the command line and the Python package does
/// before the checker, which refuses unsorted nodes. A graph with a cycle is left as it is
/// (the checker names the cycle).
pub fn sort_nodes(origin: &Path, model: &mut Model) -> Result<(), Error> {
    if model.graph.topological_order().is_ok() && !is_sorted(model) {
        eprintln!(
            "warning: {}: nodes are not in topological order; sorting them",
            origin.display()
        );
        model
            .graph
            .sort_topologically()
            .map_err(|source| Error::Ir {
                path: origin.to_path_buf(),
                source,
            })?;
    }
    Ok(())
}

fn is_sorted(model: &Model) -> bool {
    model
        .graph
        .topological_order()
        .map(|order| order == model.graph.order)
        .unwrap_or(false)
}

/// Renders the before/after table.
pub fn render_table(o: &Outcome) -> String {
    let mut s = String::new();
    let mut ops: Vec<&String> = o
        .report
        .ops_before
        .keys()
        .chain(o.report.ops_after.keys())
        .collect();
    ops.sort();
    ops.dedup();
    s.push_str(&format!("{:<28} {:>10} {:>10}\n", "", "before", "after"));
    for op in ops {
        let b = o.report.ops_before.get(op).copied().unwrap_or(0);
        let a = o.report.ops_after.get(op).copied().unwrap_or(0);
        s.push_str(&format!("{:<28} {:>10} {:>10}\n", op, b, a));
    }
    s.push_str(&format!(
        "{:<28} {:>10} {:>10}\n",
        "nodes", o.report.nodes_before, o.report.nodes_after
    ));
    s.push_str(&format!(
        "{:<28} {:>10} {:>10}\n",
        "initializers", o.report.initializers_before, o.report.initializers_after
    ));
    s.push_str(&format!(
        "{:<28} {:>10} {:>10}\n",
        "model size (bytes)", o.size_before, o.size_after
    ));
    s.push_str(&format!(
        "{:<28} {:>10.0} {:>10.0}\n",
        "estimate (cost model, us)", o.report.estimate_before, o.report.estimate_after
    ));
    s.push_str(&format!("pipeline: {}\n", o.report.pipeline));
    for run in o.report.passes.iter() {
        if let Some(line) = crate::passes::describe(run) {
            s.push_str(&line);
            s.push('\n');
        }
    }
    s.push_str(&format!(
        "time: {:.0} ms (load {:.0}, optimize {:.0}, check {:.0}, save {:.0})\n",
        o.time_ms, o.load_ms, o.report.optimize_ms, o.report.check_ms, o.save_ms
    ));
    for p in &o.report.egraph.main.phases {
        s.push_str(&format!(
            "phase {}: {:?} after {} iterations, {} e-nodes, {} e-classes, {:.3} s\n",
            p.name, p.stop, p.iterations, p.enodes, p.eclasses, p.seconds
        ));
        if !p.firings.is_empty() {
            let fired: Vec<String> = p.firings.iter().map(|(r, n)| format!("{r} {n}")).collect();
            s.push_str(&format!("  rules fired: {}\n", fired.join(", ")));
        }
        for (rule, n) in &p.not_built {
            let why = p.not_built_reasons.get(rule).map_or("", String::as_str);
            s.push_str(&format!(
                "  rule '{rule}' matched {n} time(s) but its right side was not built: {why}\n"
            ));
        }
        if !p.refusals.is_empty() {
            s.push_str(&format!("  unions refused: {}\n", p.refusals.len()));
            for r in p.refusals.iter().take(5) {
                s.push_str(&format!("    rule '{}': {}\n", r.rule, r.reason));
            }
        }
    }
    if o.report.egraph.subgraphs > 0 {
        let fired: Vec<String> = o
            .report
            .egraph
            .subgraph_firings
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        s.push_str(&format!(
            "subgraphs: {} optimized; rules fired in them: {}\n",
            o.report.egraph.subgraphs,
            if fired.is_empty() {
                "none".to_string()
            } else {
                fired.join(", ")
            }
        ));
    }
    s.push_str(&format!(
        "e-graph: {} e-classes, {} e-nodes, {} constants; folds over budget: {}\n",
        o.report.egraph.main.eclasses,
        o.report.egraph.main.enodes,
        o.report.egraph.main.constants,
        o.report.egraph.main.folds_over_budget
    ));
    let r = &o.report;
    let around = match r.check_opaque.is_empty() {
        true => String::new(),
        false => format!(
            ", around {} node(s) it cannot run ({})",
            r.check_opaque
                .iter()
                .map(|l| l
                    .split(" x ")
                    .next()
                    .and_then(|c| c.parse::<usize>().ok())
                    .unwrap_or(1))
                .sum::<usize>(),
            r.check_opaque.join(", ")
        ),
    };
    if let Some(why) = &r.check_skipped {
        s.push_str(&format!(
            "check: skipped, the result is unchecked ({why}){around}; --require-check refuses it\n"
        ));
    } else if r.check_trials > 0 || r.check_data_sets > 0 {
        let mut on = Vec::new();
        if r.check_data_sets > 0 {
            on.push(format!("{} test data set(s)", r.check_data_sets));
        }
        if r.check_trials > 0 {
            on.push(format!("{} random inputs", r.check_trials));
        }
        s.push_str(&format!(
            "check: outputs equal on {}{around}",
            on.join(" and ")
        ));
        if !r.check_dims.is_empty() {
            let dims: Vec<String> = r
                .check_dims
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            s.push_str(&format!(
                "; dims chosen so the original runs: {}",
                dims.join(", ")
            ));
        }
        if !r.check_realistic_dims.is_empty() {
            let dims: Vec<String> = r
                .check_realistic_dims
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            s.push_str(&format!(
                "; half of them on the dims a user sends: {}",
                dims.join(", ")
            ));
        }
        if !r.assumed.is_empty() {
            s.push_str(&format!(
                "; inputs drawn under --assume {}",
                r.assumed.join(", ")
            ));
        }
        if let Some(why) = &r.check_random_skipped {
            s.push_str(&format!("; random inputs stopped: {why}"));
        }
        s.push('\n');
    } else {
        s.push_str("check: off (--check 0): the result was not compared with the input\n");
    }
    s
}
