//! What this client holds, and the one renewal loop that keeps watchdog locks alive.
//!
//! Every successful acquire records a hold under (lock name, owner); every release pops one.
//! Holds taken without a lease are renewed by a single task per client that wakes every
//! `watchdog_timeout / 3` and renews all of them in batched scripts, pipelined in one round
//! trip. When a renewal finds a lock gone (expired during a partition, force-unlocked, deleted),
//! the holder is told at once: its [`CancellationToken`] is cancelled and the client's lost-lock
//! listener runs. Redisson silently drops such a lock; we do not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::connection::Conn;
use crate::owner::Owner;
use crate::scripts;

/// A lock this client's `owner` found lost.
#[derive(Debug, Clone)]
pub struct LostLock {
    /// The lock's name.
    pub name: String,
    /// The owner that held it.
    pub owner: Owner,
}

/// Called (on a runtime thread) for every lock a renewal found gone.
pub type LostListener = Arc<dyn Fn(LostLock) + Send + Sync>;

#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldKey {
    pub(crate) name: Arc<str>,
    pub(crate) owner: Owner,
}

pub(crate) struct Hold {
    /// One entry per acquire still in force, innermost last: `None` for a watchdog hold,
    /// `Some(lease)` for a hold with an explicit lease.
    leases: Vec<Option<Duration>>,
    pub(crate) lost: CancellationToken,
    holder: String,
    /// Which tenure this is: a hold released and taken again is a new tenure, so a renewal that
    /// ran in the gap between the two is not mistaken for a loss of the new one.
    tenure: u64,
    /// Releases of this hold in flight: a renewal that finds the lock gone meanwhile saw our own
    /// release, not a loss.
    releasing: u32,
}

impl Hold {
    fn watched(&self) -> bool {
        self.leases.iter().any(Option::is_none)
    }
}

pub(crate) struct Holds {
    map: Mutex<HashMap<HoldKey, Hold>>,
    /// Set (under `map`'s lock) when the client closes: no new hold may be recorded after.
    closed: std::sync::atomic::AtomicBool,
    next_tenure: std::sync::atomic::AtomicU64,
    changed: Notify,
    watchdog_timeout: Duration,
    batch: usize,
}

impl Holds {
    pub(crate) fn new(watchdog_timeout: Duration, batch: usize) -> Arc<Self> {
        Arc::new(Holds {
            map: Mutex::new(HashMap::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
            next_tenure: std::sync::atomic::AtomicU64::new(1),
            changed: Notify::new(),
            watchdog_timeout,
            batch: batch.max(1),
        })
    }

    /// Records one acquire and returns the hold's lost-lock token, or `None` when the client
    /// has closed meanwhile (the caller must give the lock back).
    pub(crate) fn acquired(
        &self,
        key: HoldKey,
        holder: &str,
        lease: Option<Duration>,
    ) -> Option<CancellationToken> {
        use std::sync::atomic::Ordering;
        let mut map = self.map.lock().unwrap();
        if self.closed.load(Ordering::Relaxed) {
            return None;
        }
        let hold = map.entry(key).or_insert_with(|| Hold {
            leases: Vec::new(),
            lost: CancellationToken::new(),
            holder: holder.to_owned(),
            tenure: self.next_tenure.fetch_add(1, Ordering::Relaxed),
            releasing: 0,
        });
        if hold.lost.is_cancelled() {
            // Re-acquired after a loss: a new tenure with a fresh token.
            hold.leases.clear();
            hold.lost = CancellationToken::new();
            hold.tenure = self.next_tenure.fetch_add(1, Ordering::Relaxed);
        }
        hold.leases.push(lease);
        let token = hold.lost.clone();
        let start_watching = lease.is_none();
        drop(map);
        if start_watching {
            self.changed.notify_one();
        }
        Some(token)
    }

    /// Notes that a release of `key` is in flight (see [`Hold::releasing`]); pair with
    /// [`end_release`](Self::end_release).
    pub(crate) fn begin_release(&self, key: &HoldKey) {
        if let Some(hold) = self.map.lock().unwrap().get_mut(key) {
            hold.releasing += 1;
        }
    }

    /// Ends what [`begin_release`](Self::begin_release) began (a no-op if the hold is gone).
    pub(crate) fn end_release(&self, key: &HoldKey) {
        if let Some(hold) = self.map.lock().unwrap().get_mut(key) {
            hold.releasing = hold.releasing.saturating_sub(1);
        }
    }

    /// How many holds this process records for `key` (what Redis should count, too).
    pub(crate) fn count(&self, key: &HoldKey) -> usize {
        self.map.lock().unwrap().get(key).map_or(0, |h| h.leases.len())
    }

    /// The lease the lock should have now: that of the innermost hold, else the watchdog's.
    pub(crate) fn current_lease(&self, key: &HoldKey) -> Duration {
        let map = self.map.lock().unwrap();
        map.get(key)
            .and_then(|h| h.leases.last().copied().flatten())
            .unwrap_or(self.watchdog_timeout)
    }

    /// The lease to keep on a lock when one re-entrant hold of it is released.
    pub(crate) fn lease_after_release(&self, key: &HoldKey) -> Duration {
        let map = self.map.lock().unwrap();
        map.get(key)
            .and_then(|h| {
                let n = h.leases.len();
                if n >= 2 { h.leases[n - 2] } else { None }
            })
            .unwrap_or(self.watchdog_timeout)
    }

    /// Pops one hold (the lock is still held re-entrantly) or all (`fully`).
    pub(crate) fn released(&self, key: &HoldKey, fully: bool) {
        let mut map = self.map.lock().unwrap();
        if let Some(hold) = map.get_mut(key) {
            hold.leases.pop();
            if fully || hold.leases.is_empty() {
                map.remove(key);
            }
        }
    }

    /// Marks a hold lost (a renewal found it gone) but keeps it, so a later release reports the
    /// loss rather than "not held". Only the tenure the renewal checked is marked. `true` if it
    /// was that live hold.
    fn mark_lost(&self, key: &HoldKey, tenure: u64) -> bool {
        let map = self.map.lock().unwrap();
        match map.get(key) {
            Some(hold) if hold.tenure == tenure && hold.releasing == 0 && !hold.lost.is_cancelled() => {
                hold.lost.cancel();
                true
            }
            _ => false,
        }
    }

    /// Forgets a hold that Redis says is gone; `true` if we believed we held it.
    pub(crate) fn forget_lost(&self, key: &HoldKey) -> bool {
        let mut map = self.map.lock().unwrap();
        match map.remove(key) {
            Some(hold) => {
                hold.lost.cancel();
                true
            }
            None => false,
        }
    }

    /// The lost-lock token of a current hold.
    pub(crate) fn token(&self, key: &HoldKey) -> Option<CancellationToken> {
        self.map.lock().unwrap().get(key).map(|h| h.lost.clone())
    }

    /// Whether `key` is a hold we had and lost (and have not released since).
    pub(crate) fn is_lost(&self, key: &HoldKey) -> bool {
        self.map.lock().unwrap().get(key).is_some_and(|h| h.lost.is_cancelled())
    }

    /// Takes every hold away and refuses new ones (the client is closing), returning
    /// (name, holder) pairs.
    pub(crate) fn drain(&self) -> Vec<(Arc<str>, String)> {
        let mut map = self.map.lock().unwrap();
        self.closed.store(true, std::sync::atomic::Ordering::Relaxed);
        map.drain().map(|(k, h)| (k.name, h.holder)).collect()
    }

    /// Number of holds renewed by the watchdog.
    pub(crate) fn watched_count(&self) -> usize {
        self.map.lock().unwrap().values().filter(|h| h.watched() && !h.lost.is_cancelled()).count()
    }

    fn watched(&self) -> Vec<(HoldKey, String, u64)> {
        let map = self.map.lock().unwrap();
        map.iter()
            .filter(|(_, h)| h.watched() && !h.lost.is_cancelled())
            .map(|(k, h)| (k.clone(), h.holder.clone(), h.tenure))
            .collect()
    }
}

/// The renewal loop of one client. Ends when `stop` is cancelled or the holds are dropped.
pub(crate) async fn run(
    holds: Weak<Holds>,
    conn: Conn,
    stop: CancellationToken,
    listener: Arc<arc_swap::ArcSwapOption<LostListener>>,
) {
    loop {
        let Some(h) = holds.upgrade() else { return };
        let period = h.watchdog_timeout / 3;
        // Sleep a period, or until the first watchdog hold appears.
        if h.watched_count() == 0 {
            tokio::select! {
                _ = h.changed.notified() => {}
                _ = stop.cancelled() => return,
            }
        }
        drop(h);
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.cancelled() => return,
        }
        let Some(h) = holds.upgrade() else { return };
        renew_all(&h, &conn, &listener).await;
    }
}

async fn renew_all(holds: &Holds, conn: &Conn, listener: &arc_swap::ArcSwapOption<LostListener>) {
    let watched = holds.watched();
    if watched.is_empty() {
        return;
    }
    let lease_ms = holds.watchdog_timeout.as_millis() as u64;
    let batches = watched.chunks(holds.batch).map(|batch| {
        let keys: Vec<&str> = batch.iter().map(|(k, _, _)| &*k.name).collect();
        let mut args: Vec<&dyn crate::connection::ToArg> = Vec::with_capacity(batch.len() + 1);
        args.push(&lease_ms);
        for (_, holder, _) in batch {
            args.push(holder);
        }
        async move {
            let result: crate::Result<Vec<i64>> =
                conn.eval(&scripts::LOCK_RENEW, &keys, &args, None).await;
            (batch, result)
        }
    });
    // All batches go out at once; the multiplexed connection pipelines them.
    let results = futures_util::future::join_all(batches).await;
    for (batch, result) in results {
        // On an error (Redis unreachable) keep the holds: the next period tries again, and the
        // lock survives if Redis comes back before its lease ends.
        let Ok(flags) = result else { continue };
        for ((key, _, tenure), flag) in batch.iter().zip(flags) {
            if flag == 0 && holds.mark_lost(key, *tenure)
                && let Some(listener) = listener.load_full() {
                    let lost = LostLock { name: key.name.to_string(), owner: key.owner };
                    // A panicking listener must not stop the renewal of every other lock.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(lost)));
                }
        }
    }
}
