//! The `onnx-opt` command line as a library: [`run`] parses arguments and runs one command,
//! thin over the `onnx-opt` library. The `onnx-opt` binary and the Python package's
//! `onnx-opt` command both call [`main`], so they are one CLI.

mod cli;

pub use cli::run;

/// Runs the command line on the process arguments, after [`prepare_process`].
pub fn main() -> std::process::ExitCode {
    prepare_process();
    std::process::ExitCode::from(run(std::env::args_os().collect()))
}

/// Sets up the process as the command line expects: a closed pipe on stdout ends it quietly,
/// and glibc keeps freed tensor buffers for reuse. Call it before any other thread starts.
pub fn prepare_process() {
    tune_allocator();
    default_sigpipe();
}

/// A closed pipe on stdout (`onnx-opt info MODEL | head`) ends the process quietly, as it does
/// any Unix filter; Rust ignores SIGPIPE by default, so `println!` would panic instead. Output
/// files are written to a temporary name and renamed, so none is left half-written.
#[cfg(unix)]
fn default_sigpipe() {
    // SAFETY: restores the default disposition of one signal before any other thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn default_sigpipe() {}

/// The interpreter allocates a tensor-sized buffer per node and frees it a few nodes later.
/// By default glibc serves large blocks with a fresh mmap (or trims the heap top on free), so
/// every node page-faults its output in again: a quarter of mobilenet_v2's inference time.
/// Serving blocks up to 32 MiB from the heap, and keeping up to 256 MiB of freed heap, reuses
/// the pages; the peak resident size does not change (measured on the development models).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    // SAFETY: mallopt only sets allocator parameters; it runs before any other thread starts.
    // A refused value (return 0) leaves glibc's default, which is correct, only slower.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}
