//! The `onnx-opt` command line: thin over the library. Parses arguments, runs one command,
//! renders errors, and returns the exit code (0 success, 1 error, 2 usage, 3 check failed).

mod cli;

fn main() -> std::process::ExitCode {
    tune_allocator();
    default_sigpipe();
    cli::main()
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
