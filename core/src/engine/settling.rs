//! Clean-ups left running in the background, and the acquires that wait for them.
//!
//! A caller that leaves an acquire (its future dropped, an asyncio task cancelled, a wait that
//! timed out with an attempt in flight) returns at once, while what it started finishes in the
//! background: an attempt that won is given back, a fair-lock queue entry is removed. So is a
//! release whose caller left. Until that is done, Redis still shows what the caller believes is
//! gone, and its next acquire of the same object would see it: a read hold it never got refuses
//! its write lock (an upgrade), a non-reentrant lock refuses it as a re-entry, a queue entry
//! about to be removed is taken for its new one. So an acquire first waits for this client's
//! clean-ups of the same name ([`Settling::wait`]); with none running (nearly always) that costs
//! one atomic load.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

use crate::util::lock;

/// The background clean-ups of one client, per object name.
#[derive(Default)]
pub(crate) struct Settling {
    /// How many run, all names together: the fast path's one load.
    running: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The number the next clean-up gets.
    next: u64,
    /// Per name: the numbers of the clean-ups running, and what their ends notify.
    names: HashMap<Arc<str>, (BTreeSet<u64>, Arc<Notify>)>,
}

impl Settling {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Counts a clean-up of `name` until the returned guard is dropped (create it before the
    /// clean-up is spawned, move it into the task).
    pub(crate) fn begin(self: &Arc<Self>, name: &str) -> Running {
        let mut state = self.state();
        let number = state.next;
        state.next += 1;
        let name = match state.names.get_key_value(name) {
            Some((key, _)) => key.clone(),
            None => Arc::from(name),
        };
        state
            .names
            .entry(name.clone())
            .or_insert_with(|| (BTreeSet::new(), Arc::new(Notify::new())))
            .0
            .insert(number);
        drop(state);
        self.running.fetch_add(1, Ordering::AcqRel);
        Running {
            settling: self.clone(),
            name,
            number,
        }
    }

    /// Whether any clean-up runs (for any name).
    pub(crate) fn any(&self) -> bool {
        self.running.load(Ordering::Acquire) > 0
    }

    /// Waits until the clean-ups of `name` running now have ended (those begun later are not
    /// waited for: a stream of them cannot hold an acquire back), or until `until` passes;
    /// `true` if they ended.
    pub(crate) async fn wait(&self, name: &str, until: Instant) -> bool {
        let before = self.state().next;
        loop {
            let notify = {
                let state = self.state();
                match state.names.get(name) {
                    Some((running, notify)) if running.first().is_some_and(|&n| n < before) => {
                        notify.clone()
                    }
                    _ => return true,
                }
            };
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Enabled before looking again: an end between the two is not missed.
            let pending = self
                .state()
                .names
                .get(name)
                .is_some_and(|(running, _)| running.first().is_some_and(|&n| n < before));
            if !pending {
                return true;
            }
            if tokio::time::timeout_at(until.into(), notified)
                .await
                .is_err()
            {
                return false;
            }
        }
    }
}

/// One clean-up counted by [`Settling::begin`]; its drop ends it.
pub(crate) struct Running {
    settling: Arc<Settling>,
    name: Arc<str>,
    number: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        let notify = {
            let mut state = self.settling.state();
            let entry = state.names.get_mut(&self.name).map(|(running, notify)| {
                running.remove(&self.number);
                (running.is_empty(), notify.clone())
            });
            if let Some((true, _)) = entry {
                state.names.remove(&self.name);
            }
            entry.map(|(_, notify)| notify)
        };
        self.settling.running.fetch_sub(1, Ordering::AcqRel);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_acquire_waits_for_the_clean_ups_of_its_name_only() {
        let settling = Arc::new(Settling::default());
        assert!(!settling.any());
        assert!(settling.wait("a", Instant::now()).await);

        let first = settling.begin("a");
        let second = settling.begin("a");
        assert!(settling.any());
        // Another name does not wait.
        assert!(settling.wait("b", Instant::now()).await);
        // Its own name waits until the last clean-up ends, or the limit.
        assert!(
            !settling
                .wait("a", Instant::now() + Duration::from_millis(20))
                .await
        );
        let waiter = {
            let settling = settling.clone();
            tokio::spawn(async move {
                settling
                    .wait("a", Instant::now() + Duration::from_secs(10))
                    .await
            })
        };
        drop(first);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one clean-up of 'a' still runs");
        // One begun after the waiter came is not waited for.
        let later = settling.begin("a");
        drop(second);
        assert!(waiter.await.unwrap());
        drop(later);
        assert!(!settling.any());
        assert!(settling.state().names.is_empty());
    }
}
