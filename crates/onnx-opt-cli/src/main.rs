//! The `onnx-opt` command line: thin over the library. Parses arguments, runs one command,
//! renders errors, and returns the exit code (0 success, 1 error, 2 usage).

fn main() -> std::process::ExitCode {
    onnx_opt_cli::main()
}
