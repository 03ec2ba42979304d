//! A second knock for completions a runtime's thread-safe function failed to wake JavaScript for.
//!
//! Deno's `napi_call_threadsafe_function` queues the call and wakes its event loop through an
//! `AtomicWaker`, and the loop drains that queue by checking a flag and only then registering its
//! waker (`V8TaskSpawnerFactory::poll_inner` in deno's `libs/core/tasks.rs`, as of 2.9). A call
//! made between the two finds no waker to wake: the completion sits in the queue until something
//! else wakes the loop, a timer or other I/O, which in a process waiting only on crosslock can be
//! seconds (a lane's reply unread for 3 s was seen, long enough for watchdog leases to run out).
//!
//! Where the lanes are watched by a thread (`uv.rs`: the runtimes whose libuv is a stand-in), each
//! environment's queue is [`Paced`]: its deliveries are counted as sent and as run, and one thread
//! for the process looks, [`AFTER`] a pause, at every queue with deliveries outstanding. A queue
//! that has not run what was sent before the pause is called once more with nothing to run, which
//! wakes a loop whose waker is registered by then. An idle process has nothing outstanding and the
//! thread sleeps on a condition variable; under a steady flow of replies it wakes once per pause.
//! On Node (a real libuv, whose thread-safe function wakes through `uv_async_send`) nothing is
//! paced.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

/// Poison-tolerant: the nudger's list stays usable after a panic elsewhere.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a delivery may stay unrun before its queue is called again. A lost wake-up then costs
/// at most about twice this, and a busy process one look per pause.
pub(super) const AFTER: Duration = Duration::from_millis(2);

/// A completion queue the nudger can look at and knock on.
pub(super) trait Paced: Send + Sync {
    fn pace(&self) -> &Pace;
    /// Calls the thread-safe function once more with nothing to run; `false` once it is closed.
    fn knock(&self) -> bool;
}

/// One queue's deliveries, as sent and as run.
#[derive(Default)]
pub(super) struct Pace {
    sent: AtomicU64,
    ran: AtomicU64,
    /// On the nudger's list (or about to be).
    listed: AtomicBool,
}

impl Pace {
    /// A delivery of `queue` was handed to its thread-safe function.
    pub(super) fn sent(&self, queue: &Weak<dyn Paced>) {
        self.sent.fetch_add(1, Ordering::AcqRel);
        if !self.listed.swap(true, Ordering::AcqRel) {
            nudger().list(queue.clone());
        }
    }

    /// A delivery ran on the JavaScript thread.
    pub(super) fn ran(&self) {
        self.ran.fetch_add(1, Ordering::AcqRel);
    }

    fn outstanding(&self) -> bool {
        self.ran.load(Ordering::Acquire) < self.sent.load(Ordering::Acquire)
    }
}

struct Nudger {
    listed: Mutex<Vec<Weak<dyn Paced>>>,
    work: Condvar,
}

impl Nudger {
    fn list(&self, queue: Weak<dyn Paced>) {
        lock(&self.listed).push(queue);
        self.work.notify_one();
    }

    fn run(&self) {
        loop {
            // Every listed queue, with what it had sent when this look began.
            let looked: Vec<(Weak<dyn Paced>, u64)> = {
                let mut listed = lock(&self.listed);
                while listed.is_empty() {
                    listed = self.work.wait(listed).unwrap_or_else(|e| e.into_inner());
                }
                std::mem::take(&mut *listed)
                    .into_iter()
                    .filter_map(|q| {
                        let sent = q.upgrade()?.pace().sent.load(Ordering::Acquire);
                        Some((q, sent))
                    })
                    .collect()
            };
            thread::sleep(AFTER);
            let mut keep = Vec::with_capacity(looked.len());
            for (weak, sent_before) in looked {
                let Some(queue) = weak.upgrade() else {
                    continue;
                };
                let pace = queue.pace();
                if pace.ran.load(Ordering::Acquire) < sent_before {
                    // Sent before the pause and still not run: the wake-up may have been lost.
                    if queue.knock() {
                        keep.push(weak);
                    } else {
                        pace.listed.store(false, Ordering::Release);
                    }
                } else if pace.outstanding() {
                    keep.push(weak); // more sent since: look again after the next pause
                } else {
                    pace.listed.store(false, Ordering::Release);
                    // A delivery sent between the look and the store saw `listed` set and did not
                    // list the queue: list it here.
                    if pace.outstanding() && !pace.listed.swap(true, Ordering::AcqRel) {
                        keep.push(weak);
                    }
                }
            }
            lock(&self.listed).extend(keep);
        }
    }
}

/// The process's nudger, its thread started on first use. (A forked child has no such thread
/// but the same `OnceLock`: a Node-API process that forks and goes on running JavaScript in the
/// child is not a case any runtime supports.)
fn nudger() -> &'static Nudger {
    static NUDGER: OnceLock<&'static Nudger> = OnceLock::new();
    NUDGER.get_or_init(|| {
        let nudger: &'static Nudger = Box::leak(Box::new(Nudger {
            listed: Mutex::new(Vec::new()),
            work: Condvar::new(),
        }));
        // If the thread cannot start, deliveries are only not re-knocked: as without a nudger.
        let _ = thread::Builder::new()
            .name("crosslock-nudge".into())
            .spawn(move || nudger.run());
        nudger
    })
}
