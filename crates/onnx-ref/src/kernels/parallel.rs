//! Splitting one large kernel call across the cores. The interpreter runs nodes one after
//! another; a kernel whose work is large enough (a Conv's GEMM, a matrix-vector product over a
//! large weight) splits its output into disjoint parts, and the calling thread and a few
//! persistent helper threads take parts from a shared counter until none is left. The caller
//! always works too and waits only for parts a helper has already taken, so a helper that the
//! OS does not schedule in time (a loaded machine) costs nothing but its own part. Each part is
//! computed exactly as the whole would be (same inner sums, same order), so the result does not
//! depend on the split. Small calls stay on the calling thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// The most threads (the caller and its helpers) one kernel call uses.
const MAX_THREADS: usize = 8;
/// Parts per thread (a part of a split GEMM repacks its left operand: few parts are cheaper).
const PARTS_PER_THREAD: usize = 1;

/// The threads available to this process (its CPU affinity), at most [`MAX_THREADS`].
fn available_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_THREADS)
    })
}

/// Parts to split a call of `work` units (multiply-adds) over `len` independent columns or
/// rows into, each with at least `min_work` units and `min_len` columns: 1 for a small call,
/// or when there is one core.
pub(crate) fn parts_for(work: usize, min_work: usize, len: usize, min_len: usize) -> usize {
    let threads = available_threads();
    if threads == 1 {
        return 1;
    }
    (threads * PARTS_PER_THREAD)
        .min(work / min_work.max(1))
        .min(len / min_len.max(1))
        .max(1)
}

/// Bounds of `parts` near-equal consecutive ranges of `0..len`.
pub(crate) fn split_bounds(len: usize, parts: usize) -> Vec<usize> {
    (0..=parts).map(|t| t * len / parts).collect()
}

/// One split call: `run(i)` for every part `i < total`, taken from `next`.
struct Job {
    /// The caller's closure, its lifetime erased: called only for a taken part `i < total`,
    /// and the caller returns only after every such call has returned (`done == total`).
    run: *const (dyn Fn(usize) + Sync + 'static),
    total: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    panicked: AtomicBool,
    finished: Mutex<bool>,
    finished_cv: Condvar,
}

// SAFETY: `run` points to a `Sync` closure that outlives every call through it (see `Job`).
unsafe impl Send for Job {}
// SAFETY: as above; the other fields are atomics and locks.
unsafe impl Sync for Job {}

impl Job {
    /// Takes and runs parts until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.total {
                return;
            }
            // SAFETY: `i < total`, so the caller is still waiting for this part (`Job::run`).
            let run = unsafe { &*self.run };
            if catch_unwind(AssertUnwindSafe(|| run(i))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.total {
                *self.finished.lock().unwrap_or_else(|e| e.into_inner()) = true;
                self.finished_cv.notify_all();
            }
        }
    }

    fn has_parts_left(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.total
    }
}

/// The helper threads and the job they help with.
struct Pool {
    current: Mutex<Option<Arc<Job>>>,
    wake: Condvar,
}

/// The helpers (one fewer than the available threads), started on first use.
fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            current: Mutex::new(None),
            wake: Condvar::new(),
        }));
        for k in 1..available_threads() {
            let spawned = std::thread::Builder::new()
                .name(format!("onnx-ref-{k}"))
                .spawn(move || helper(pool));
            if spawned.is_err() {
                break;
            }
        }
        pool
    })
}

fn helper(pool: &'static Pool) {
    loop {
        let job = {
            let mut current = pool.current.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(job) = current.as_ref().filter(|j| j.has_parts_left()) {
                    break job.clone();
                }
                current = pool.wake.wait(current).unwrap_or_else(|e| e.into_inner());
            }
        };
        job.work();
    }
}

/// Runs `run(i)` for `i < total`, on the calling thread and the helpers.
fn for_each_part(total: usize, run: &(dyn Fn(usize) + Sync)) {
    if total <= 1 || available_threads() == 1 {
        (0..total).for_each(run);
        return;
    }
    // SAFETY: only the lifetime is erased; this function returns after every call through
    // the pointer has returned (see `Job`).
    let run: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(run) };
    let job = Arc::new(Job {
        run,
        total,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        panicked: AtomicBool::new(false),
        finished: Mutex::new(false),
        finished_cv: Condvar::new(),
    });
    let pool = pool();
    *pool.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(job.clone());
    pool.wake.notify_all();
    job.work();
    let mut finished = job.finished.lock().unwrap_or_else(|e| e.into_inner());
    while !*finished {
        finished = job
            .finished_cv
            .wait(finished)
            .unwrap_or_else(|e| e.into_inner());
    }
    drop(finished);
    let mut current = pool.current.lock().unwrap_or_else(|e| e.into_inner());
    if current.as_ref().is_some_and(|j| Arc::ptr_eq(j, &job)) {
        *current = None;
    }
    drop(current);
    if job.panicked.load(Ordering::Relaxed) {
        panic!("a part of a split kernel call panicked");
    }
}

/// Runs `f(i, part)` for every part on the calling thread and the helpers; returns the error
/// of the first part (by index) that failed.
pub(crate) fn run_parts<P: Send, E: Send>(
    parts: Vec<P>,
    f: impl Fn(usize, P) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let slots: Vec<Mutex<Option<P>>> = parts.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let errors: Mutex<Vec<(usize, E)>> = Mutex::new(Vec::new());
    for_each_part(slots.len(), &|i| {
        let part = slots[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(Err(e)) = part.map(|p| f(i, p)) {
            errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((i, e));
        }
    });
    let mut errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    errors.sort_by_key(|(i, _)| *i);
    match errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_work_stays_whole_and_bounds_cover_the_range() {
        assert_eq!(parts_for(10, 100, 1000, 1), 1);
        assert_eq!(parts_for(1 << 30, 1, 1, 64), 1);
        assert!(parts_for(1 << 30, 1, 1 << 20, 1) <= MAX_THREADS * PARTS_PER_THREAD);
        for (len, parts) in [(0, 1), (7, 2), (100, 3), (5, 5)] {
            let b = split_bounds(len, parts);
            assert_eq!((b[0], b[parts]), (0, len));
            assert!(b.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn every_part_runs_once_and_the_first_error_is_returned() {
        for _ in 0..50 {
            let mut out = vec![0usize; 103];
            let parts: Vec<&mut [usize]> = out.chunks_mut(4).collect();
            run_parts(parts, |t, p: &mut [usize]| -> Result<(), ()> {
                p.iter_mut().for_each(|v| *v += t + 1);
                Ok(())
            })
            .unwrap();
            assert!(out.iter().enumerate().all(|(i, v)| *v == i / 4 + 1));
        }
        let r = run_parts(vec![0; 9], |t, _| if t % 4 == 3 { Err(t) } else { Ok(()) });
        assert_eq!(r, Err(3));
    }
}
