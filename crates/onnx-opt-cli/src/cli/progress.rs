//! A progress line on stderr for runs longer than a second (only when stderr is a terminal).

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shows `phase... Ns` on stderr after the first second, until dropped.
pub struct Progress {
    state: Arc<Mutex<(String, bool)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub fn start() -> Progress {
        let state = Arc::new(Mutex::new((String::new(), false)));
        let thread = std::io::stderr().is_terminal().then(|| {
            let state = state.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut shown = false;
                loop {
                    std::thread::sleep(Duration::from_millis(200));
                    let Ok(s) = state.lock() else { return };
                    if s.1 {
                        if shown {
                            eprint!("\r\x1b[K");
                        }
                        return;
                    }
                    if start.elapsed() >= Duration::from_secs(1) {
                        eprint!("\r\x1b[K{}... {:.1}s", s.0, start.elapsed().as_secs_f64());
                        shown = true;
                    }
                }
            })
        });
        Progress { state, thread }
    }

    pub fn set(&self, phase: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.0 = phase.to_string();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Ok(mut s) = self.state.lock() {
            s.1 = true;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
