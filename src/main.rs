//! The `onnx-opt` command line: thin over the library.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
