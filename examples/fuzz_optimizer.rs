//! Long-run differential fuzzing of the optimizer: generates random models from the operator
//! schemas, optimizes each with every campaign configuration (`onnx_prove::fuzz::campaign`) and
//! checks the result with the oracle; prints the counts, the acceptance rate and the op
//! coverage, and writes each failing model as `NAME.onnxtxt` (a comment header says the seed,
//! the configuration and the failed check).
//!
//! ```text
//! cargo run --release --example fuzz_optimizer -- --seconds 600 --seed 1 \
//!     [--max-nodes 8] [--out tests/fuzz/regressions/new] [--trials 3]
//! cargo run --release --example fuzz_optimizer -- --case 0x78dde6e5fd29f55a   # one case
//! cargo run --release --example fuzz_optimizer -- --replay FILE.onnxtxt      # a model file
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use onnx_prove::fuzz::{
    campaign, check_case, default_domain_ops, generate_case, minimize, model_opset, Coverage,
    FuzzCase, GenOptions, Generated, Verdict,
};

struct Args {
    seconds: u64,
    seed: u64,
    max_nodes: usize,
    trials: usize,
    out: PathBuf,
    /// Replay a model file under every configuration and print its minimized failures.
    replay: Option<PathBuf>,
    /// Generate only this case seed, print it and run it under every configuration.
    case: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 60,
        seed: 1,
        max_nodes: 8,
        trials: 3,
        out: PathBuf::from("fuzz-failures"),
        replay: None,
        case: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => a.seconds = value()?.parse().map_err(|e| format!("{e}"))?,
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("{e}"))?,
            "--max-nodes" => a.max_nodes = value()?.parse().map_err(|e| format!("{e}"))?,
            "--trials" => a.trials = value()?.parse().map_err(|e| format!("{e}"))?,
            "--out" => a.out = PathBuf::from(value()?),
            "--replay" => a.replay = Some(PathBuf::from(value()?)),
            "--case" => {
                let v = value()?;
                let v = v.trim_start_matches("0x");
                a.case = Some(u64::from_str_radix(v, 16).map_err(|e| format!("{e}"))?)
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// Seed `i` of a campaign whose master seed is `seed`.
fn case_seed(seed: u64, i: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i
}

#[derive(Default)]
struct Counts {
    seeds: u64,
    built: u64,
    checker_rejected: u64,
    not_runnable: u64,
    cases: u64,
    optimizations: u64,
    passed: u64,
    refused: u64,
    failures: u64,
    trials: u64,
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fuzz_optimizer: {e}");
            std::process::exit(2);
        }
    };
    // Panics are caught and reported as failures; keep their messages off the terminal.
    std::panic::set_hook(Box::new(|_| {}));
    if let Some(path) = &args.replay {
        std::process::exit(replay(path, args.seed, args.trials));
    }
    let opts = GenOptions {
        max_nodes: args.max_nodes,
        trials: args.trials,
    };
    if let Some(seed) = args.case {
        let case = match generate_case(seed, &opts) {
            Generated::Case(case) => case,
            Generated::Rejected(why) => {
                eprintln!("seed {seed:#018x} gives no model: {why}");
                std::process::exit(2);
            }
            Generated::CheckerRejected { text, errors } => {
                println!("{text}");
                eprintln!("seed {seed:#018x}: the checker rejects the model: {errors:#?}");
                std::process::exit(2);
            }
            Generated::NotRunnable { text, error } => {
                println!("{text}");
                eprintln!("seed {seed:#018x}: the model does not run: {error}");
                std::process::exit(2);
            }
        };
        println!("{}", case.text());
        for (config, optimizer) in campaign(model_opset(&case.model)) {
            println!("[{config}] ...");
            println!("[{config}] {:?}", check_case(&case, &optimizer));
        }
        std::process::exit(0);
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    let mut n = Counts::default();
    let mut coverage = Coverage::default();
    let mut by_check: BTreeMap<String, u64> = BTreeMap::new();
    // Per first error: how many models, and the first seed (to replay with --case).
    let mut checker_errors: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut last_report = Instant::now();
    let mut i = 0u64;
    while Instant::now() < deadline {
        let seed = case_seed(args.seed, i);
        i += 1;
        n.seeds += 1;
        let case = match generate_case(seed, &opts) {
            Generated::Case(c) => c,
            Generated::Rejected(_) => continue,
            Generated::CheckerRejected { errors, .. } => {
                n.built += 1;
                n.checker_rejected += 1;
                let key: String = errors
                    .first()
                    .cloned()
                    .unwrap_or_default()
                    .chars()
                    .take(90)
                    .collect();
                checker_errors.entry(key).or_insert((0, seed)).0 += 1;
                continue;
            }
            Generated::NotRunnable { .. } => {
                n.built += 1;
                n.not_runnable += 1;
                continue;
            }
        };
        n.built += 1;
        n.cases += 1;
        coverage.add(case.proto());
        for (config, optimizer) in campaign(model_opset(&case.model)) {
            n.optimizations += 1;
            // What is running, in case the process dies (an abort, out of memory).
            let _ = std::fs::create_dir_all(&args.out);
            let _ = std::fs::write(
                args.out.join("last_case.txt"),
                format!("--case {seed:#018x} [{config}]\n"),
            );
            match check_case(&case, &optimizer) {
                Verdict::Passed { trials } => {
                    n.passed += 1;
                    n.trials += trials as u64;
                }
                Verdict::Refused(_) => n.refused += 1,
                Verdict::Failed(f) => {
                    n.failures += 1;
                    *by_check.entry(format!("{:?}", f.check)).or_insert(0) += 1;
                    let small = minimize(&case, &optimizer, f.check);
                    let name = format!("seed_{seed:016x}_{:?}", f.check).to_lowercase();
                    let path = args.out.join(format!("{name}.onnxtxt"));
                    let detail: String = f.detail.chars().take(2000).collect();
                    let header: String = format!(
                        "# seed {seed:#018x}, configuration: {config}\n# {:?}: {}\n",
                        f.check,
                        detail.replace('\n', "\n# ")
                    );
                    let _ = std::fs::create_dir_all(&args.out);
                    let _ = std::fs::write(&path, format!("{header}{}", small.text()));
                    println!(
                        "FAIL seed {seed:#018x} [{config}] {:?}: {}",
                        f.check,
                        detail.lines().next().unwrap_or("")
                    );
                }
            }
        }
        if last_report.elapsed() > Duration::from_secs(60) {
            last_report = Instant::now();
            println!(
                "[{:>5.0}s] seeds {} cases {} optimizations {} failures {}",
                start.elapsed().as_secs_f64(),
                n.seeds,
                n.cases,
                n.optimizations,
                n.failures
            );
        }
    }
    let all_ops = default_domain_ops();
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    println!(
        "\n== fuzz_optimizer: seed {}, {:.0} s ==",
        args.seed,
        start.elapsed().as_secs_f64()
    );
    println!("seeds tried:            {}", n.seeds);
    println!("models built:           {}", n.built);
    println!(
        "  passing the checker:  {} ({:.1}%)",
        n.built - n.checker_rejected,
        pct(n.built - n.checker_rejected, n.built)
    );
    println!(
        "  running (executed):   {} ({:.1}% of built)",
        n.cases,
        pct(n.cases, n.built)
    );
    println!("optimizations checked:  {}", n.optimizations);
    println!(
        "  passed:               {} ({} trials compared)",
        n.passed, n.trials
    );
    println!("  refused (opset):      {}", n.refused);
    println!("  failures:             {}", n.failures);
    for (check, k) in &by_check {
        println!("    {check}: {k}");
    }
    println!(
        "op coverage: {} of {} default-domain ops, {} distinct attribute settings",
        coverage.ops_seen(),
        all_ops.len(),
        coverage.settings()
    );
    println!("never generated: {}", coverage.missing().join(" "));
    let nest = coverage.nesting();
    let per_op = |op: &str| {
        format!(
            "{op} {} in {} models",
            nest.nodes.get(op).copied().unwrap_or(0),
            nest.models.get(op).copied().unwrap_or(0)
        )
    };
    println!(
        "control flow: {}, {}, {}; {} nodes in subgraphs",
        per_op("If"),
        per_op("Loop"),
        per_op("Scan"),
        nest.subgraph_nodes
    );
    println!(
        "local functions: {} in {} models, {} calls, {} nodes in bodies",
        nest.functions,
        nest.models.get("function").copied().unwrap_or(0),
        nest.calls,
        nest.function_nodes
    );
    if !checker_errors.is_empty() {
        println!("checker rejections (generator bugs):");
        for (e, (k, seed)) in &checker_errors {
            println!("  {k:>5}  {e}  (first: --case {seed:#018x})");
        }
    }
    if n.failures > 0 {
        println!("failing models written under {}", args.out.display());
        std::process::exit(1);
    }
}

/// Runs a model file under every configuration; prints each failure with the model minimized.
fn replay(path: &std::path::Path, seed: u64, trials: usize) -> i32 {
    let case = match onnx_opt::load(path)
        .map_err(|e| e.to_string())
        .and_then(|m| FuzzCase::from_model(m, seed, trials).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return 2;
        }
    };
    let mut code = 0;
    for (config, optimizer) in campaign(model_opset(&case.model)) {
        match check_case(&case, &optimizer) {
            Verdict::Failed(f) => {
                code = 1;
                let small = minimize(&case, &optimizer, f.check);
                println!("[{config}] {f}\n{}", small.text());
            }
            v => println!("[{config}] {v:?}"),
        }
    }
    code
}
