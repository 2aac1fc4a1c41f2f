//! One function per subcommand; each returns the process exit code or an error to render.

use anyhow::{Context, Result};

use super::Command;

use std::io::Write;

use onnx_opt::ModelInfo;
use onnx_opt::{optimize_file, render_table};
use onnx_opt::{Optimizer, Pipeline};

pub fn run(command: Command) -> Result<u8> {
    match command {
        Command::Optimize(args) => optimize(args),
        Command::Convert(args) => {
            let mut optimizer = Optimizer::converter(args.opset)
                .check(args.check)
                .require_check(args.require_check);
            for (name, value) in &args.dims {
                optimizer = optimizer.dim(name, *value);
            }
            for dir in &args.check_data {
                optimizer = optimizer.check_data_dir(dir);
            }
            for s in &args.out.skip {
                optimizer = optimizer.skip(s);
            }
            let progress = (!args.out.quiet).then(super::progress::Progress::start);
            let save = onnx_opt::OutputOptions {
                external_threshold: None,
                reuse_external_data: args.save.reuse_external_data,
            };
            let outcome = optimize_file(&args.model, &args.output, &optimizer, &save, &|phase| {
                if let Some(p) = &progress {
                    p.set(phase)
                }
            });
            drop(progress);
            finish(&outcome?, args.out.report.as_deref(), args.out.quiet)
        }
        Command::Run(args) => {
            let cfg = onnx_opt::RunConfig {
                inputs: args.inputs,
                random_inputs: args.random_inputs,
                dims: args.dims.into_iter().collect(),
                seed: args.seed,
                output_dir: args.output,
                repeat: args.repeat,
                profile: args.profile,
            };
            let outcome = onnx_opt::run_file(&args.model, &cfg)?;
            for o in &outcome.outputs {
                println!("{}: {} {}", o.name, o.kind, o.stats);
            }
            if let Some(ms) = outcome.median_ms {
                println!("inference median: {ms:.3} ms");
            }
            if let Some(profile) = &outcome.profile {
                print!("{}", onnx_opt::render_profile(profile));
            }
            Ok(super::exit::SUCCESS)
        }
        Command::Print {
            model,
            elide_tensors_above,
        } => {
            let loaded = onnx_opt::load_proto(&model)?;
            let options = onnx_text::PrintOptions {
                elide_tensors_above,
            };
            let text = onnx_text::print_model(&loaded.model, &options);
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes());
            Ok(super::exit::SUCCESS)
        }
        Command::Check { model } => {
            let loaded = onnx_opt::load_ir(&model)?;
            onnx_opt::check_ir(&model, &loaded.model)?;
            for w in onnx_opt::checker_warnings(&loaded.model) {
                eprintln!("warning: {}: {w}", model.display());
            }
            println!("{}: ok", model.display());
            Ok(super::exit::SUCCESS)
        }
        Command::Info { model } => {
            let loaded = onnx_opt::load_proto(&model)?;
            print!("{}", ModelInfo::of(&loaded.model));
            println!("file size: {} bytes", loaded.file_size);
            Ok(super::exit::SUCCESS)
        }
        Command::Rules(cmd) => super::rules_cmd::run(cmd),
        Command::Pipelines { file } => {
            match file {
                Some(f) => print!("{}", Pipeline::from_file(&f)?.describe()),
                None => {
                    for (name, _) in onnx_opt::BUILTIN_PIPELINES {
                        print!("{}", Pipeline::builtin(name)?.describe());
                    }
                    println!("passes (`[[pass]]` in a pipeline file):");
                    for (name, about) in onnx_opt::pass_table() {
                        println!("  {name:<24} {about}");
                    }
                }
            }
            Ok(super::exit::SUCCESS)
        }
        Command::Copy {
            model,
            output,
            external_threshold,
        } => {
            let loaded = onnx_opt::load_proto(&model)?;
            let options = onnx_proto::SaveOptions {
                external: external_threshold
                    .map(|t| onnx_proto::ExternalDataOptions::for_model(&output, t)),
                ..Default::default()
            };
            onnx_opt::save_proto(&loaded.model, Some(&loaded.dir), &output, &options)
                .with_context(|| format!("saving {}", output.display()))?;
            Ok(super::exit::SUCCESS)
        }
    }
}

fn optimize(args: super::OptimizeArgs) -> Result<u8> {
    let sel = args.rules.selection();
    let mut optimizer = Optimizer::new()
        .pipeline(Pipeline::by_name_or_file(&args.pipeline)?)
        .builtin_rules(!sel.no_builtin)
        .unsafe_rules(sel.float_unsafe)
        .check(args.check)
        .require_check(args.require_check);
    for f in &sel.files {
        optimizer = optimizer.rules_file(f)?;
    }
    for (name, value) in &args.dims {
        optimizer = optimizer.dim(name, *value);
    }
    for dir in &args.check_data {
        optimizer = optimizer.check_data_dir(dir);
    }
    if let Some(cost) = args.cost {
        optimizer = optimizer.cost(match cost {
            super::CostArg::Latency => onnx_egraph::CostKind::Latency,
            super::CostArg::Nodes => onnx_egraph::CostKind::NodeCount,
        });
    }
    if let Some(t) = &args.target {
        optimizer = optimizer.target(t.parse::<onnx_opt::Target>()?);
    }
    if let Some(t) = args.target_opset {
        optimizer = optimizer.target_opset(t);
    }
    if args.no_fold || args.fold_unbounded {
        let mut fold = optimizer.pipeline_spec().fold_options();
        if args.no_fold {
            fold.enabled = false;
        }
        if args.fold_unbounded {
            fold.budget_floor = None;
        }
        optimizer = optimizer.fold(fold);
    }
    for s in &args.out.skip {
        optimizer = optimizer.skip(s);
    }
    for (name, other) in &args.same_dims {
        optimizer = optimizer.same_dim(name, other);
    }
    for (name, what) in &args.assumed {
        optimizer = optimizer.assume(name, *what);
    }
    for (name, dims) in &args.input_shapes {
        optimizer = optimizer.input_shape(name, dims);
    }
    if !args.outputs.is_empty() {
        let names: Vec<&str> = args.outputs.iter().map(String::as_str).collect();
        optimizer = optimizer.outputs(&names);
    }
    let save = onnx_opt::OutputOptions {
        external_threshold: args.external_threshold,
        reuse_external_data: args.save.reuse_external_data,
    };
    let progress = (!args.out.quiet).then(super::progress::Progress::start);
    let outcome = optimize_file(&args.model, &args.output, &optimizer, &save, &|phase| {
        if let Some(p) = &progress {
            p.set(phase)
        }
    });
    drop(progress);
    finish(&outcome?, args.out.report.as_deref(), args.out.quiet)
}

/// After a model is written: the warning when it is unchecked, the table (on stdout, or on
/// stderr when the JSON report goes to stdout; none when quiet), and the JSON report.
fn finish(
    outcome: &onnx_opt::Outcome,
    report: Option<&std::path::Path>,
    quiet: bool,
) -> Result<u8> {
    warn_unchecked(&outcome.report);
    let to_stdout = report.is_some_and(|p| p.as_os_str() == "-");
    if !quiet {
        match to_stdout {
            true => eprint!("{}", render_table(outcome)),
            false => print!("{}", render_table(outcome)),
        }
    }
    if let Some(path) = report {
        let json = serde_json::to_vec_pretty(outcome)?;
        match to_stdout {
            true => {
                let mut out = std::io::stdout().lock();
                out.write_all(&json)?;
                out.write_all(b"\n")?;
            }
            false => onnx_proto::write_atomic(path, |w| w.write_all(&json))?,
        }
    }
    Ok(super::exit::SUCCESS)
}

/// A warning on stderr when the result was written without the check.
fn warn_unchecked(report: &onnx_opt::Report) {
    if let Some(why) = &report.check_skipped {
        eprintln!("warning: the check could not run, the result is written unchecked: {why}");
    }
}
