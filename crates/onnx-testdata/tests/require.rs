//! [`require_shared!`](onnx_testdata::require_shared) in a function, against the real process
//! environment. This binary holds a single test, so no other thread reads the environment while
//! the test changes it.

use std::path::PathBuf;

use onnx_testdata::{REQUIRE_VAR, SHARED_VAR};

/// A test body that needs the shared data: records the directory the macro gave.
fn needs_shared(seen: &mut Option<PathBuf>) {
    let dir = onnx_testdata::require_shared!();
    *seen = Some(dir);
}

/// What the macro gave, or `None` when it returned early.
fn run_the_macro() -> Option<PathBuf> {
    let mut seen = None;
    needs_shared(&mut seen);
    seen
}

#[test]
fn require_shared_gives_the_dir_returns_early_or_panics() {
    let present =
        std::env::temp_dir().join(format!("onnx-testdata-require-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&present);
    std::fs::create_dir_all(present.join("onnx-backend")).unwrap();
    std::fs::create_dir_all(present.join("models")).unwrap();

    std::env::set_var(SHARED_VAR, &present);
    std::env::set_var(REQUIRE_VAR, "1");
    assert_eq!(run_the_macro(), Some(present.clone()));

    std::env::set_var(SHARED_VAR, "/nonexistent/onnx-testdata/shared");
    std::env::remove_var(REQUIRE_VAR);
    assert_eq!(run_the_macro(), None);

    std::env::set_var(REQUIRE_VAR, "1");
    let panic = std::panic::catch_unwind(run_the_macro).expect_err("required but absent");
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    assert!(message.starts_with("require::needs_shared: "), "{message}");
    assert!(
        message.contains("/nonexistent/onnx-testdata/shared"),
        "{message}"
    );

    std::fs::remove_dir_all(&present).unwrap();
}
