//! Dev-only: finds the shared test data that lives beside the repository, and decides what a
//! test that needs it does when it is absent.
//!
//! The shared directory is `$ONNX_OPT_SHARED`, or `<workspace root>/../shared` when that
//! variable is unset or empty. It is *present* when it holds both `onnx-backend/` (the ONNX
//! backend test suite) and `models/` (the development models).
//!
//! When it is absent, a test that needs it is skipped: it writes one line to stderr, past the
//! test harness's output capture so that it shows even for a passing test,
//!
//! ```text
//! onnx-testdata: SKIPPED root::cli::info_summarizes_a_model: the shared test data (../shared or $ONNX_OPT_SHARED) is absent (looked in /src/shared)
//! ```
//!
//! and returns. With `ONNX_OPT_REQUIRE_SHARED=1` (CI sets it: there, absence is a failure) it
//! panics instead, so a run can never pass by skipping silently. Tests that do not need the
//! shared data do not use this crate and run everywhere.
//!
//! In a test, [`require_shared!`] gives the directory or returns from the test:
//!
//! ```no_run
//! #[test]
//! fn every_model_loads() {
//!     let shared = onnx_testdata::require_shared!();
//!     let models = shared.join("models");
//!     // ...
//! }
//! ```
//!
//! The decision itself is [`lookup`], a function of the two variables' values, so it can be
//! tested without touching the process environment:
//!
//! ```
//! use std::ffi::OsStr;
//! use std::path::Path;
//! use onnx_testdata::{lookup, Lookup};
//!
//! let missing = Path::new("/nonexistent/shared");
//! let default = Path::new("/elsewhere");
//! assert_eq!(
//!     lookup(Some(missing.as_os_str()), None, default),
//!     Lookup::Skip(missing.to_path_buf())
//! );
//! assert_eq!(
//!     lookup(Some(missing.as_os_str()), Some(OsStr::new("1")), default),
//!     Lookup::Missing(missing.to_path_buf())
//! );
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The variable naming the shared directory (instead of `../shared` beside the repository).
pub const SHARED_VAR: &str = "ONNX_OPT_SHARED";

/// The variable that turns a skip into a failure when set to `1`.
pub const REQUIRE_VAR: &str = "ONNX_OPT_REQUIRE_SHARED";

/// The outcome of looking for the shared directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The directory holds `onnx-backend/` and `models/`.
    Present(PathBuf),
    /// The directory (named here) is absent or incomplete, and that is allowed: skip.
    Skip(PathBuf),
    /// The directory (named here) is absent or incomplete, and `ONNX_OPT_REQUIRE_SHARED=1`:
    /// fail.
    Missing(PathBuf),
}

/// `<workspace root>/../shared`: where the shared directory is when `ONNX_OPT_SHARED` is unset.
pub fn default_dir() -> PathBuf {
    // This crate is `<workspace root>/crates/onnx-testdata`.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    match manifest.ancestors().nth(3) {
        Some(beside) => beside.join("shared"),
        None => manifest.join("../../../shared"),
    }
}

/// Whether `dir` holds both `onnx-backend/` and `models/`.
pub fn is_present(dir: &Path) -> bool {
    dir.join("onnx-backend").is_dir() && dir.join("models").is_dir()
}

/// Decides from the values of `ONNX_OPT_SHARED` (`shared_var`) and `ONNX_OPT_REQUIRE_SHARED`
/// (`require_var`), and the directory to use when the first is unset or empty. Reads the file
/// system (to see whether the directory is there) but not the environment.
pub fn lookup(shared_var: Option<&OsStr>, require_var: Option<&OsStr>, default: &Path) -> Lookup {
    let dir = match shared_var {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => default.to_path_buf(),
    };
    if is_present(&dir) {
        Lookup::Present(dir)
    } else if require_var.is_some_and(|v| v == "1") {
        Lookup::Missing(dir)
    } else {
        Lookup::Skip(dir)
    }
}

/// The line a skipped test writes to stderr.
pub fn skip_line(test: &str, dir: &Path) -> String {
    format!(
        "onnx-testdata: SKIPPED {test}: the shared test data (../shared or ${SHARED_VAR}) is \
         absent (looked in {})",
        dir.display()
    )
}

/// The message a test panics with when the shared data is required but absent.
pub fn missing_message(test: &str, dir: &Path) -> String {
    format!(
        "{test}: the shared test data is required ({REQUIRE_VAR}=1) but absent: {} does not \
         hold both onnx-backend/ and models/ (put it at ../shared beside the repository, or set \
         {SHARED_VAR})",
        dir.display()
    )
}

/// Acts on a [`Lookup`] for `test`: the directory, or `None` after writing the skip line to
/// stderr; panics on [`Lookup::Missing`] (at the caller's location, through
/// [`shared_dir_for`] and [`require_shared!`]: the test's own line).
#[track_caller]
pub fn settle(found: Lookup, test: &str) -> Option<PathBuf> {
    // Straight to the stream, not `eprintln!`: the harness captures that for passing tests,
    // and a skip must be visible.
    settle_to(found, test, &mut std::io::stderr().lock())
}

/// [`settle`], writing the skip line to `out`.
#[track_caller]
fn settle_to(found: Lookup, test: &str, out: &mut impl Write) -> Option<PathBuf> {
    match found {
        Lookup::Present(dir) => Some(dir),
        Lookup::Skip(dir) => {
            let _ = writeln!(out, "{}", skip_line(test, &dir));
            None
        }
        Lookup::Missing(dir) => panic!("{}", missing_message(test, &dir)),
    }
}

/// The shared directory for `test` (a name for the skip line and the panic message), from the
/// process environment: `None` after the skip line when it is absent; panics when it is absent
/// and `ONNX_OPT_REQUIRE_SHARED=1`.
#[track_caller]
pub fn shared_dir_for(test: &str) -> Option<PathBuf> {
    let shared = std::env::var_os(SHARED_VAR);
    let require = std::env::var_os(REQUIRE_VAR);
    settle(
        lookup(shared.as_deref(), require.as_deref(), &default_dir()),
        test,
    )
}

/// [`shared_dir_for`] naming the current thread (the test harness names each test's thread
/// after the test). In a test function, prefer [`require_shared!`].
#[track_caller]
pub fn shared_dir() -> Option<PathBuf> {
    let thread = std::thread::current();
    shared_dir_for(thread.name().unwrap_or("an unnamed test"))
}

/// The path of the function a `fn here() {}` item was declared in, from its type name.
#[doc(hidden)]
pub fn enclosing_function(here_type_name: &'static str) -> &'static str {
    here_type_name
        .strip_suffix("::here")
        .unwrap_or(here_type_name)
}

/// The path of the enclosing function (`crate::module::function`), at run time.
#[macro_export]
macro_rules! function_path {
    () => {{
        fn here() {}
        $crate::enclosing_function(::std::any::type_name_of_val(&here))
    }};
}

/// In a test function: the shared directory (a `PathBuf`), or, when it is absent, writes the
/// skip line naming the test and `return`s from it. Panics instead when
/// `ONNX_OPT_REQUIRE_SHARED=1`.
#[macro_export]
macro_rules! require_shared {
    () => {
        match $crate::shared_dir_for($crate::function_path!()) {
            ::std::option::Option::Some(dir) => dir,
            ::std::option::Option::None => return,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str, subdirs: &[&str]) -> TempDir {
            let dir =
                std::env::temp_dir().join(format!("onnx-testdata-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for sub in subdirs {
                std::fs::create_dir(dir.join(sub)).unwrap();
            }
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const NOWHERE: &str = "/nonexistent/onnx-testdata/shared";

    #[test]
    fn an_override_to_a_missing_dir_skips_or_fails_under_require() {
        let missing = Path::new(NOWHERE);
        let default = TempDir::new("default-ignored", &["onnx-backend", "models"]);
        let var = Some(missing.as_os_str());
        assert_eq!(lookup(var, None, &default.0), Lookup::Skip(missing.into()));
        assert_eq!(
            lookup(var, Some(OsStr::new("0")), &default.0),
            Lookup::Skip(missing.into())
        );
        assert_eq!(
            lookup(var, Some(OsStr::new("1")), &default.0),
            Lookup::Missing(missing.into())
        );
    }

    #[test]
    fn a_dir_is_present_only_with_both_subdirs() {
        let both = TempDir::new("both", &["onnx-backend", "models"]);
        let backend_only = TempDir::new("backend-only", &["onnx-backend"]);
        let models_only = TempDir::new("models-only", &["models"]);
        let default = Path::new(NOWHERE);
        let require = Some(OsStr::new("1"));
        assert_eq!(
            lookup(Some(both.0.as_os_str()), require, default),
            Lookup::Present(both.0.clone())
        );
        for incomplete in [&backend_only, &models_only] {
            assert_eq!(
                lookup(Some(incomplete.0.as_os_str()), None, default),
                Lookup::Skip(incomplete.0.clone())
            );
            assert_eq!(
                lookup(Some(incomplete.0.as_os_str()), require, default),
                Lookup::Missing(incomplete.0.clone())
            );
        }
    }

    #[test]
    fn an_unset_or_empty_override_uses_the_default() {
        let default = TempDir::new("default", &["onnx-backend", "models"]);
        assert_eq!(
            lookup(None, None, &default.0),
            Lookup::Present(default.0.clone())
        );
        assert_eq!(
            lookup(Some(OsStr::new("")), None, &default.0),
            Lookup::Present(default.0.clone())
        );
        let missing = Path::new(NOWHERE);
        assert_eq!(
            lookup(None, Some(OsStr::new("1")), missing),
            Lookup::Missing(missing.into())
        );
    }

    #[test]
    fn the_default_is_shared_beside_the_workspace() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .and_then(Path::parent)
            .unwrap();
        assert!(workspace.join("Cargo.toml").is_file());
        assert!(workspace.join("crates/onnx-testdata").is_dir());
        assert_eq!(default_dir(), workspace.parent().unwrap().join("shared"));
    }

    #[test]
    fn settle_gives_the_dir_skips_or_panics_with_the_test_name() {
        let dir = PathBuf::from(NOWHERE);
        let mut out = Vec::new();
        assert_eq!(
            settle_to(Lookup::Present(dir.clone()), "t", &mut out),
            Some(dir.clone())
        );
        assert!(out.is_empty());
        assert_eq!(
            settle_to(Lookup::Skip(dir.clone()), "my::test", &mut out),
            None
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            skip_line("my::test", &dir) + "\n"
        );
        let panic = std::panic::catch_unwind(|| settle(Lookup::Missing(dir.clone()), "my::test"))
            .expect_err("a required but absent directory panics");
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        assert_eq!(message, &missing_message("my::test", &dir));
        assert!(message.starts_with("my::test: "), "{message}");
        assert!(message.contains("ONNX_OPT_REQUIRE_SHARED=1"), "{message}");
        assert!(message.contains(NOWHERE), "{message}");
    }

    #[test]
    fn the_skip_line_names_the_test_and_the_place() {
        let line = skip_line("root::cli::info", Path::new(NOWHERE));
        assert_eq!(
            line,
            format!(
                "onnx-testdata: SKIPPED root::cli::info: the shared test data (../shared or \
                 $ONNX_OPT_SHARED) is absent (looked in {NOWHERE})"
            )
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn function_path_names_the_enclosing_function() {
        assert_eq!(
            crate::function_path!(),
            "onnx_testdata::tests::function_path_names_the_enclosing_function"
        );
        assert_eq!(enclosing_function("a::b::here"), "a::b");
        assert_eq!(enclosing_function("a::b"), "a::b");
    }
}
