//! `onnx-opt rules list | check | explain`.

use std::sync::Arc;

use anyhow::Result;

use super::RulesCommand;

pub fn run(cmd: RulesCommand) -> Result<u8> {
    match cmd {
        RulesCommand::List { rules } => {
            let mut sel = rules.selection();
            sel.version = !sel.no_builtin;
            sel.targets = !sel.no_builtin;
            let files = onnx_opt::load_rule_files(&sel)?;
            for f in &files {
                println!("{} ({} rules)", f.path, f.rules.len());
                for r in &f.rules {
                    let window = match r.window.max {
                        Some(m) => format!("opset {}..{m}", r.window.min),
                        None => format!("opset {}..", r.window.min),
                    };
                    let mut tags = vec![match r.tags.precision {
                        onnx_rules::ir::Precision::Exact => "exact".to_string(),
                        onnx_rules::ir::Precision::Rounding => "rounding".to_string(),
                        onnx_rules::ir::Precision::Tolerance(t) => format!("tol {t}"),
                    }];
                    if r.tags.float_unsafe {
                        tags.push("unsafe".into());
                    }
                    tags.extend(r.tags.labels.iter().cloned());
                    println!(
                        "  {:<28} {:<14} {:>2} epochs  [{}]  # {}",
                        r.name,
                        window,
                        r.epochs.len(),
                        tags.join(", "),
                        r.doc.lines().next().unwrap_or("")
                    );
                }
            }
            Ok(super::exit::SUCCESS)
        }
        RulesCommand::Check {
            files,
            only,
            seed,
            no_prove,
        } => {
            let sel = onnx_opt::RuleSelection {
                no_builtin: !files.is_empty(),
                files,
                float_unsafe: true,
                version: true,
                targets: true,
            };
            let parsed = onnx_opt::load_rule_files(&sel)?;
            let n: usize = parsed.iter().map(|f| f.rules.len()).sum();
            println!(
                "{} rules in {} files: syntax and schemas ok",
                n,
                parsed.len()
            );
            if no_prove {
                return Ok(super::exit::SUCCESS);
            }
            let opts = onnx_prove::ProveOptions {
                seed,
                ..Default::default()
            };
            let guards = onnx_egraph::GuardRegistry::default();
            let mut verdicts = Vec::new();
            for f in &parsed {
                for r in &f.rules {
                    if !only.is_empty() && !only.contains(&r.name) {
                        continue;
                    }
                    verdicts.push(onnx_prove::prove_rule(r, &guards, &opts));
                }
            }
            print!("{}", onnx_prove::render_verdicts(&verdicts, &opts));
            // Round trips: each version step up, then its inverse.
            let all: Vec<&onnx_rules::ir::Rule> = parsed.iter().flat_map(|f| &f.rules).collect();
            let mut trips = Vec::new();
            let mut one_way = Vec::new();
            for r in &all {
                let Some(step) = r.step else { continue };
                if step.rhs_opset < step.lhs_opset || (!only.is_empty() && !only.contains(&r.name))
                {
                    continue;
                }
                let back = onnx_prove::step_inverses(r, &all);
                if back.is_empty() {
                    one_way.push(r.name.clone());
                } else {
                    trips.push(onnx_prove::round_trip(r, &back, &guards, &opts));
                }
            }
            let trips_failed: Vec<&onnx_prove::RoundTrip> =
                trips.iter().filter(|t| !t.passed(&opts)).collect();
            if !trips.is_empty() {
                let instances: usize = trips.iter().map(|t| t.returned).sum();
                let one_way_instances: usize = trips.iter().map(|t| t.one_way).sum();
                println!(
                    "round trips (a step up, then its inverse): {} of {} pairs came back on all their instances ({instances} instances)",
                    trips.len() - trips_failed.len(),
                    trips.len()
                );
                if one_way_instances > 0 {
                    println!(
                        "  plus {one_way_instances} instances with a dim known only by name, where no step back applies (its guard reads a static dim)"
                    );
                }
            }
            if !one_way.is_empty() {
                println!("steps up without a step back: {}", one_way.join(", "));
            }
            for t in &trips_failed {
                let why = t.failure.clone().unwrap_or_else(|| {
                    format!(
                        "only {} instances came back (at least {} wanted)",
                        t.returned, opts.min_fired
                    )
                });
                println!("\n--- round trip {} then {} ---\n{why}", t.step, t.inverse);
            }
            let failed = verdicts.iter().filter(|v| !v.passed(&opts)).count();
            if failed > 0 || !trips_failed.is_empty() {
                eprintln!(
                    "error: {failed} of {} rules failed their proof, {} of {} round trips failed",
                    verdicts.len(),
                    trips_failed.len(),
                    trips.len()
                );
                return Ok(super::exit::ERROR);
            }
            Ok(super::exit::SUCCESS)
        }
        RulesCommand::Explain { rule, model, rules } => {
            let mut sel = rules.selection();
            sel.version = !sel.no_builtin;
            sel.targets = !sel.no_builtin;
            let set = Arc::new(onnx_opt::load_rule_set(&sel)?);
            let loaded = onnx_opt::load_ir(&model)?;
            let sites = onnx_egraph::explain_rule(&loaded.model, set, &rule).map_err(|source| {
                onnx_opt::Error::Optimize {
                    path: model.clone(),
                    source,
                }
            })?;
            if sites.is_empty() {
                println!("rule '{rule}': its root op does not occur in the model (or the model's opset is outside the rule's window)");
            }
            for s in &sites {
                println!("{}: {}", s.site, s.verdict);
            }
            Ok(super::exit::SUCCESS)
        }
    }
}
