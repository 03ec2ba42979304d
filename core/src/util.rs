//! Small helpers every layer uses: a poison-tolerant mutex lock, a sleep to an optional
//! deadline, and the back-off between retries of a call Redis did not answer.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Locks a std mutex, recovering it if a panic poisoned it: every map and slot crosslock guards
/// with one is updated by single inserts, removes or swaps, so it stays consistent, and a panic
/// elsewhere (a user's listener, a host callback) must not stop every later operation.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A duration as whole milliseconds for a script argument, clamped to
/// [`MAX_DURATION`](crate::MAX_DURATION) (longer values are refused before anything is sent).
pub(crate) fn ms(d: Duration) -> u64 {
    d.as_millis().min(crate::limits::DURATION_MS.max as u128) as u64
}

/// Sleeps until `deadline`; forever when there is none (a wait without a limit).
pub(crate) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// The pause before the first retry of a call whose reply was lost to an outage.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two retries.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// The back-off between retries of a call Redis did not answer: 10 ms, then doubling, up to
/// 500 ms. The caller bounds the whole (a deadline, the response timeout).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPause(Duration);

impl RetryPause {
    /// The pause before a first retry.
    pub(crate) const fn new() -> Self {
        RetryPause(FIRST_RETRY_PAUSE)
    }

    /// The pause to sleep now.
    pub(crate) fn current(self) -> Duration {
        self.0
    }

    /// Doubles the pause (up to the longest), after one was slept.
    pub(crate) fn grow(&mut self) {
        self.0 = (self.0 * 2).min(MAX_RETRY_PAUSE);
    }

    /// Sleeps the current pause, then doubles it.
    pub(crate) async fn sleep(&mut self) {
        tokio::time::sleep(self.0).await;
        self.grow();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_up_to_its_cap() {
        let mut pause = RetryPause::new();
        let mut seen = vec![];
        for _ in 0..8 {
            seen.push(pause.current().as_millis());
            pause.grow();
        }
        assert_eq!(seen, [10, 20, 40, 80, 160, 320, 500, 500]);
    }

    #[test]
    fn a_poisoned_mutex_is_still_locked() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
