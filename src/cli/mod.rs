//! Argument parsing and the command dispatch of the `onnx-opt` binary.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;

/// Optimize ONNX models with equality saturation.
#[derive(Debug, Parser)]
#[command(name = "onnx-opt", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a summary: IR version, opsets, producer, signature, op histogram, parameters.
    Info { model: PathBuf },
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

/// Exit codes of the binary.
pub mod exit {
    pub const ERROR: u8 = 1;
    pub const USAGE: u8 = 2;
}

const SUBCOMMANDS: &[&str] = &["info", "copy", "help"];

/// Parses the process arguments (with `onnx-opt MODEL -o OUT` meaning `optimize`) and runs.
pub fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
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
            return ExitCode::from(code);
        }
    };
    match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}
