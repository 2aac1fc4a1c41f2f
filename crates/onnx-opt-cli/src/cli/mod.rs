//! Argument parsing and the command dispatch of the `onnx-opt` binary.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

mod commands;
mod progress;
mod rules_cmd;

/// Optimize ONNX models with equality saturation.
#[derive(Debug, Parser)]
#[command(name = "onnx-opt", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Optimize a model (also `onnx-opt MODEL -o OUT`).
    Optimize(OptimizeArgs),
    /// Convert a model to another opset of the default domain (up or down, in one step);
    /// checked in the reference interpreter like `optimize`.
    Convert(ConvertArgs),
    /// Check a model against the ONNX IR rules and the operator schemas.
    Check { model: PathBuf },
    /// Run a model in the reference interpreter.
    Run(RunArgs),
    /// Print a model in the ONNX text syntax (as onnx.printer writes it).
    Print {
        model: PathBuf,
        /// Elide tensors with more than this many elements (the text then does not parse back).
        #[arg(long, value_name = "ELEMENTS")]
        elide_tensors_above: Option<usize>,
    },
    /// Print a summary: IR version, opsets, producer, signature, op histogram, parameters.
    Info { model: PathBuf },
    /// Rule files: list, check and prove, explain.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// List the built-in pipelines (or describe one pipeline file).
    Pipelines {
        /// A pipeline file to describe instead.
        file: Option<PathBuf>,
    },
    /// Load a model and save it again (optionally moving large tensors to external data).
    Copy {
        model: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        /// Store tensors of at least this many bytes in `<output>.data` beside the output.
        #[arg(long, value_name = "BYTES")]
        external_threshold: Option<usize>,
    },
}

/// Arguments of `optimize`.
#[derive(Debug, clap::Args)]
pub struct OptimizeArgs {
    pub model: PathBuf,
    #[arg(short, long)]
    pub output: PathBuf,
    /// Run both models on N random inputs in the reference interpreter; refuse to write when
    /// their outputs differ, naming the output and the rule that broke it. 0 turns it off.
    #[arg(long, value_name = "N", default_value_t = onnx_opt::DEFAULT_CHECK_TRIALS)]
    pub check: usize,
    /// The pipeline: a built-in name (`onnx-opt pipelines` lists them) or a pipeline file.
    #[arg(long, value_name = "NAME|FILE", default_value = "default")]
    pub pipeline: String,
    /// Value of a symbolic dimension for --check's random inputs (repeatable).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, i64)>,
    /// A test-data directory the check also runs (repeatable): `input_0.pb`, `input_1.pb`, ...
    /// for the graph inputs in order, or `test_data_set_*` directories of them (the ONNX
    /// backend tests' layout). Where the original fails on random inputs, these sets are the
    /// check.
    #[arg(long = "check-data", value_name = "DIR")]
    pub check_data: Vec<PathBuf>,
    /// Refuse to write the result when the check cannot run (by default it is written with a
    /// warning: the original cannot run in the interpreter, or fails on every input tried).
    #[arg(long)]
    pub require_check: bool,
    /// Do not fold constants (overrides the pipeline).
    #[arg(long)]
    pub no_fold: bool,
    /// Fold regardless of result size (by default a folded constant may not be larger than its
    /// constant inputs, or 1 KiB).
    #[arg(long)]
    pub fold_unbounded: bool,
    /// Extraction cost model (default: the pipeline's).
    #[arg(long, value_enum)]
    pub cost: Option<CostArg>,
    /// Store tensors of at least this many bytes in `<output>.data`.
    #[arg(long, value_name = "BYTES")]
    pub external_threshold: Option<usize>,
    #[command(flatten)]
    pub save: SaveArgs,
    #[command(flatten)]
    pub out: OutArgs,
    /// Land at this opset of the default domain (only operators legal there are extracted).
    #[arg(long, value_name = "N")]
    pub target_opset: Option<i64>,
    /// Optimize for a runtime, with its own operators: `onnxruntime` (its com.microsoft
    /// contrib ops: GroupQueryAttention, SkipSimplifiedLayerNormalization; the `onnxruntime`
    /// pipeline, and opset 23 for a model below it unless --target-opset says otherwise).
    #[arg(long, value_name = "RUNTIME", conflicts_with = "pipeline")]
    pub target: Option<String>,
    /// Give a graph input a fixed shape (repeatable): its symbolic dims become these values in
    /// the output model, and shape arithmetic folds through them.
    #[arg(long = "input-shape", value_name = "NAME:D1,D2,...", value_parser = parse_input_shape)]
    pub input_shapes: Vec<(String, Vec<i64>)>,
    /// Make an inputs' symbolic dim the same size as another (repeatable): `--same-dim
    /// s15=s69` renames it in every declaration, the output's too. An assumption about the
    /// inputs the model will get, which the check keeps (for example one KV-cache length for
    /// every layer, where torch's dynamo exporter names one per layer).
    #[arg(long = "same-dim", value_name = "NAME=OTHER", value_parser = parse_same_dim)]
    pub same_dims: Vec<(String, String)>,
    /// Assume an input's values (repeatable): `--assume attention_mask=ones` takes every
    /// element as 1 (true), as when no sequence is padded. What is computed from them folds;
    /// the input stays in the interface, and the check draws its inputs under the assumption,
    /// so the output equals the input model only on inputs that satisfy it.
    #[arg(long = "assume", value_name = "NAME=ones", value_parser = parse_assume)]
    pub assumed: Vec<(String, onnx_opt::Assumption)>,
    /// Keep only these graph outputs, in this order (`--outputs a b` or `--outputs a,b`); what
    /// only the others needed is removed.
    #[arg(long, value_name = "NAME", num_args = 1.., value_delimiter = ',')]
    pub outputs: Vec<String>,
    #[command(flatten)]
    pub rules: RuleArgs,
}

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    pub model: PathBuf,
    /// The target opset of the default domain.
    #[arg(long, value_name = "N")]
    pub opset: i64,
    #[arg(short, long)]
    pub output: PathBuf,
    /// Random trials of the differential check (0 turns it off, for huge models).
    #[arg(long, value_name = "N", default_value_t = onnx_opt::DEFAULT_CHECK_TRIALS)]
    pub check: usize,
    /// Value of a symbolic dimension for --check's random inputs (repeatable).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, i64)>,
    /// A test-data directory the check also runs (repeatable): `input_0.pb`, `input_1.pb`, ...
    /// for the graph inputs in order, or `test_data_set_*` directories of them (the ONNX
    /// backend tests' layout). Where the original fails on random inputs, these sets are the
    /// check.
    #[arg(long = "check-data", value_name = "DIR")]
    pub check_data: Vec<PathBuf>,
    /// Refuse to write the result when the check cannot run (by default it is written with a
    /// warning: the original cannot run in the interpreter, or fails on every input tried).
    #[arg(long)]
    pub require_check: bool,
    #[command(flatten)]
    pub save: SaveArgs,
    #[command(flatten)]
    pub out: OutArgs,
}

/// How `optimize` and `convert` save the output's tensors.
#[derive(Debug, clap::Args)]
pub struct SaveArgs {
    /// Leave tensors that are unchanged in the input's external data files where they are: the
    /// output refers to those files (which must be inside its directory) and only new or
    /// changed tensors go to `<output>.data`. The output must not replace the input model.
    #[arg(long)]
    pub reuse_external_data: bool,
}

/// What `optimize` and `convert` leave out and print.
#[derive(Debug, clap::Args)]
pub struct OutArgs {
    /// Write the before/after figures as JSON (with the firings of every rule); `-` writes it
    /// on stdout (the table then goes to stderr).
    #[arg(long, value_name = "FILE.json|-")]
    pub report: Option<PathBuf>,
    /// Leave out rules by name, by file (`fusion`, `fusion.rules`, a --rules file's path) or by
    /// label, or a pass by name (repeatable; `onnx-opt rules list` and `onnx-opt pipelines`
    /// list them). A name that matches nothing is an error listing the close ones.
    #[arg(long = "skip", value_name = "RULE|FILE|LABEL|PASS")]
    pub skip: Vec<String>,
    /// Print nothing on success (no table, no progress); warnings and errors still go to stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Which rules to run.
#[derive(Debug, Clone, clap::Args)]
pub struct RuleArgs {
    /// A rule file to add to the built-in rules (repeatable).
    #[arg(long = "rules", value_name = "FILE")]
    pub rule_files: Vec<PathBuf>,
    /// Leave out the built-in rules.
    #[arg(long)]
    pub no_builtin_rules: bool,
    /// Also run rules tagged `unsafe` (float-unsafe: x + 0 -> x, reassociation, ...).
    #[arg(long)]
    pub unsafe_rules: bool,
}

impl RuleArgs {
    pub fn selection(&self) -> onnx_opt::RuleSelection {
        onnx_opt::RuleSelection {
            no_builtin: self.no_builtin_rules,
            files: self.rule_files.clone(),
            float_unsafe: self.unsafe_rules,
            version: false,
            targets: false,
        }
    }
}

/// `onnx-opt rules ...`.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// List the rules (built-in and --rules files) with their opset windows and tags.
    List {
        #[command(flatten)]
        rules: RuleArgs,
    },
    /// Parse and check rule files (default: the built-in ones), then prove every rule on
    /// random instances in the reference interpreter.
    Check {
        /// Rule files to check (default: the built-in rules).
        files: Vec<PathBuf>,
        /// Only check the rules with these names (repeatable).
        #[arg(long = "rule", value_name = "NAME")]
        only: Vec<String>,
        /// Seed of the random instances.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Parse and check only; do not prove.
        #[arg(long)]
        no_prove: bool,
    },
    /// For each site where a rule could apply in a model, say whether it fired or which part
    /// of the pattern or which guard failed.
    Explain {
        rule: String,
        model: PathBuf,
        #[command(flatten)]
        rules: RuleArgs,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CostArg {
    Latency,
    Nodes,
}

/// Parses `--dim NAME=VALUE`.
fn parse_dim(s: &str) -> anyhow::Result<(String, i64)> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("expected NAME=VALUE, got '{s}'"))?;
    let v: i64 = value
        .parse()
        .map_err(|_| anyhow::anyhow!("'{value}' is not an integer"))?;
    if v < 0 {
        anyhow::bail!("dimension {name} must not be negative");
    }
    Ok((name.to_string(), v))
}

/// Parses `--input-shape NAME:1,3,224,224` (the name may hold `:`; the last one splits).
fn parse_input_shape(s: &str) -> anyhow::Result<(String, Vec<i64>)> {
    let (name, dims) = s
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("expected NAME:D1,D2,..., got '{s}'"))?;
    let dims = match dims.trim() {
        "" => Vec::new(),
        d => d
            .split(',')
            .map(|x| {
                x.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v >= 0)
                    .ok_or_else(|| anyhow::anyhow!("'{x}' is not a dim (an integer >= 0)"))
            })
            .collect::<anyhow::Result<_>>()?,
    };
    Ok((name.to_string(), dims))
}

fn parse_same_dim(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((name, other)) if !name.trim().is_empty() && !other.trim().is_empty() => {
            Ok((name.trim().to_string(), other.trim().to_string()))
        }
        _ => anyhow::bail!("expected NAME=OTHER, got '{s}'"),
    }
}

fn parse_assume(s: &str) -> anyhow::Result<(String, onnx_opt::Assumption)> {
    match s.split_once('=') {
        Some((name, what)) if !name.trim().is_empty() => {
            let what = what.trim().parse().map_err(anyhow::Error::msg)?;
            Ok((name.trim().to_string(), what))
        }
        _ => anyhow::bail!("expected NAME=ones, got '{s}'"),
    }
}

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    pub model: PathBuf,
    /// An input value: `NAME=FILE.pb` (TensorProto, SequenceProto or OptionalProto, as the
    /// input's type requires) or `NAME=FILE.npy` (a NumPy array of the input's element type).
    /// Repeatable.
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_input)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Fill the inputs not given with seeded random values.
    #[arg(long)]
    pub random_inputs: bool,
    /// Seed of --random-inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Value of a symbolic dimension for --random-inputs (repeatable).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, i64)>,
    /// Write output i as DIR/output_i.pb.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Run inference N times and print the median time (inference only).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: usize,
    /// Print the inference time spent per operator type, summed over every run.
    #[arg(long)]
    pub profile: bool,
}

/// Parses `--input NAME=FILE`.
fn parse_input(s: &str) -> anyhow::Result<(String, PathBuf)> {
    let (name, file) = s
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("expected NAME=FILE, got '{s}'"))?;
    Ok((name.to_string(), PathBuf::from(file)))
}

/// Exit codes of the binary.
pub mod exit {
    pub const SUCCESS: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const USAGE: u8 = 2;
}

const SUBCOMMANDS: &[&str] = &[
    "info",
    "copy",
    "check",
    "print",
    "run",
    "optimize",
    "convert",
    "rules",
    "pipelines",
    "help",
];

/// Parses `args` (the program name first; `onnx-opt MODEL -o OUT` means `optimize`), runs
/// the command and returns the exit code (0 success, 1 error, 2 usage).
pub fn run(mut args: Vec<std::ffi::OsString>) -> u8 {
    if let Some(first) = args.get(1).and_then(|a| a.to_str()) {
        if !first.starts_with('-')
            && !SUBCOMMANDS.contains(&first)
            && SUBCOMMANDS.contains(&"optimize")
        {
            args.insert(1, "optimize".into());
        }
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::ERROR
        }
    }
}
