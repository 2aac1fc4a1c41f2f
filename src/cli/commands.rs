//! One function per subcommand; each returns the process exit code or an error to render.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Command;
use onnx_opt::info::ModelInfo;

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Info { model } => {
            let loaded = onnx_proto::load_model(&model)?;
            print!("{}", ModelInfo::of(&loaded.model));
            println!("file size: {} bytes", loaded.file_size);
            Ok(ExitCode::SUCCESS)
        }
        Command::Copy {
            model,
            output,
            external_threshold,
        } => {
            let loaded = onnx_proto::load_model(&model)?;
            let options = onnx_proto::SaveOptions {
                external: external_threshold
                    .map(|t| onnx_proto::ExternalDataOptions::for_model(&output, t)),
                ..Default::default()
            };
            onnx_proto::save_model(&loaded.model, Some(&loaded.dir), &output, &options)
                .with_context(|| format!("saving {}", output.display()))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
