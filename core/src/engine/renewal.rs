//! The one renewal loop of a client, and the lost-lock signal.
//!
//! Holds taken without a lease are renewed by a single task per client that wakes every
//! `watchdog_timeout / 3` and renews all of them in batched scripts (one script per renewal kind
//! and batch, pipelined a few at a time; on a cluster, one per node, kind and batch). A renewal
//! that fails (the connection was closed, Redis did not answer) is retried at once and then with a
//! short back-off until it succeeds or the next period comes: a connection closed between
//! renewals never costs a renewal. A retry renews only the holds the failed round did not renew,
//! so the nodes that answered are renewed once a period as usual, not again at every retry. A
//! node that leaves a renewal unanswered gets no more of that round's batches, and on a cluster
//! the masters are renewed side by side: one master that stops answering delays no other
//! master's renewals. Which batches there are and where each goes (the nodes, the per-node
//! scripts over a link of the loop's own to each master, never to another node in its stead) is
//! the transport's [`Fanout`]: this loop says what a batch sends and what its answer means.
//!
//! The holder is told its lock is lost in two cases, whichever comes first:
//!
//! - a renewal finds the lock gone in Redis ([`LostReason::Gone`]: it expired, was
//!   force-unlocked, or Redis lost its data);
//! - no renewal (or other operation setting the lease) has been *confirmed* by the time the lease
//!   set by the last confirmed one runs out, counted from when that operation was **sent**, less
//!   a clock-drift margin of `lease / 100 + 2 ms` ([`LostReason::Expired`]). This fires with or
//!   without an answer from Redis: during a partition the holder hears it while the partition
//!   lasts, at the latest when another client could first take the lock. A hold taken with an
//!   explicit lease is told the same way when that lease runs out while it is still held.
//!
//! Redisson silently drops a lock its renewal finds gone; crosslock never does.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio_util::sync::CancellationToken;

use crate::scripts;
use crate::telemetry::{Event, spans};
use crate::transport::fanout::{Call, Fanout, Job};
use crate::transport::{Conn, ToArg};
use crate::util::sleep_until;

use super::holds::{Holds, RenewKind, Watched};
use super::lost::{LostListener, LostLock, LostReason};

/// The first pause before retrying a failed renewal; it doubles up to a quarter of the period.
const RETRY_FIRST: Duration = Duration::from_millis(20);

/// The renewal loop of one client. Ends when `stop` is cancelled or the holds are dropped.
pub(crate) async fn run(
    holds: Weak<Holds>,
    conn: Conn,
    stop: CancellationToken,
    listener: Arc<ArcSwapOption<LostListener>>,
) {
    let Some(period) = holds.upgrade().map(|h| h.watchdog_timeout / 3) else {
        return;
    };
    let mut next_round = Instant::now() + period;
    let mut retry_pause = Duration::ZERO;
    // When the last full round (one that renews every watched hold) started: the retries of a
    // round that failed, until a period after it, renew only what it did not.
    let mut full_round = Instant::now();
    let mut was_watched = false;
    // What the renewals know of the deployment's nodes from round to round.
    let mut fanout = conn.fanout();
    // The watched holds of a round's current window, kept between windows and rounds (emptied)
    // so that they reuse its chunks rather than allocate and free them every time.
    let mut window: Vec<Vec<Watched>> = Vec::new();
    // Which round this is: marks the holds a window has taken (0 is never a round).
    let mut round: u32 = 0;
    loop {
        let Some(h) = holds.upgrade() else { return };
        report(&listener, h.expire_due(Instant::now()));
        let watched = h.watched_count() > 0;
        let now = Instant::now();
        if watched && !was_watched {
            // The first watchdog hold after an idle spell: a period from now.
            next_round = now + period;
        }
        was_watched = watched;
        if watched && now >= next_round {
            let started = now;
            round = round.wrapping_add(1).max(1);
            // A retry leaves out the holds renewed since the last full round began (by it, or
            // acquired since): those are renewed by the next full round, a period after the last,
            // as if nothing had failed. Only what did fail is retried, so the nodes that answer
            // are not renewed again at every retry while one does not.
            let retry = !retry_pause.is_zero() && started < full_round + period;
            if !retry {
                full_round = started;
            }
            let renewed_since = retry.then_some(full_round);
            let ok = {
                let round = renew_round(
                    &h,
                    &listener,
                    &mut fanout,
                    &mut window,
                    round,
                    renewed_since,
                );
                tokio::pin!(round);
                // Keep firing deadlines while the round waits for Redis.
                loop {
                    let deadline = h.next_deadline();
                    tokio::select! {
                        ok = &mut round => break ok,
                        _ = sleep_until(deadline) => report(&listener, h.expire_due(Instant::now())),
                        _ = stop.cancelled() => return,
                    }
                }
            };
            // Emptied at once, keeping the chunks' room for the next round.
            for chunk in &mut window {
                chunk.clear();
            }
            if ok {
                retry_pause = Duration::ZERO;
                next_round = full_round + period;
            } else {
                // Retry within the period: at once (the connection manager reconnects on the
                // failure), then backing off.
                retry_pause = if retry_pause.is_zero() {
                    RETRY_FIRST
                } else {
                    (retry_pause * 2).min(period / 4)
                };
                next_round = Instant::now() + retry_pause;
            }
            continue;
        }
        let wake_at = h.plan_sleep(watched, next_round);
        let changed = h.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        tokio::select! {
            _ = sleep_until(wake_at) => {}
            _ = &mut changed => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// The two renewal scripts of a kind: with declared keys (one server, one slot) and per node.
fn scripts_of(kind: &RenewKind) -> (&'static scripts::Lua, &'static scripts::Lua) {
    match kind {
        RenewKind::Hash => (&scripts::RENEW_HASH, &scripts::RENEW_HASH_NODE),
        RenewKind::Read { .. } => (&scripts::RENEW_READ, &scripts::RENEW_READ_NODE),
        RenewKind::Permit { .. } => (&scripts::RENEW_PERMIT, &scripts::RENEW_PERMIT_NODE),
        RenewKind::Group { .. } => (&scripts::RENEW_GROUP, &scripts::RENEW_GROUP_NODE),
    }
}

/// The fewest holds a round's window takes (a window of few holds would pipeline little).
const WINDOW_MIN: usize = 1024;
/// The most windows a round is cut into (each window scans the table of holds once).
const WINDOWS_MAX: usize = 8;

/// Renews every watched hold once (but those confirmed after `renewed_since`), window by window
/// (see [`Holds::watched_window`]); `false` if any batch failed (to be retried).
async fn renew_round(
    holds: &Holds,
    listener: &ArcSwapOption<LostListener>,
    fanout: &mut Fanout,
    window: &mut Vec<Vec<Watched>>,
    round: u32,
    renewed_since: Option<Instant>,
) -> bool {
    // Whole batches per window, so that windows cost no more scripts than one pass would.
    let size = WINDOW_MIN
        .max(holds.watched_count().div_ceil(WINDOWS_MAX))
        .next_multiple_of(holds.batch);
    fanout.start_round();
    let started = Instant::now();
    let job = Renewal {
        holds,
        listener,
        bound: (holds.watchdog_timeout / 3).min(fanout.response_timeout()),
        counts: Default::default(),
    };
    let mut all_ok = true;
    let span = spans::Round::begin(holds.telemetry());
    while holds.watched_window(round, renewed_since, size, window) > 0 {
        all_ok &= spans::Round::within(&span, fanout.run(&job, window)).await;
    }
    let counts = job.counts.map(|c| c.into_inner());
    if let Some(span) = span {
        span.end(counts);
    }
    if let Some(telemetry) = holds.telemetry() {
        let [renewed, gone, failed] = counts;
        telemetry.record(&Event::RenewalRound {
            renewed,
            gone,
            failed,
            took: started.elapsed(),
        });
    }
    all_ok
}

/// How many renewal batches are in flight at once (per master, on a cluster). Enough to keep the
/// connection's pipeline busy (Redis runs them one after another anyway), and few enough that a
/// round's transient memory (the batches' commands and replies) stays the same however many
/// locks are held: sent all at once, 10,000 holds left hundreds of bytes each behind in the
/// allocator after every round.
const BATCHES_IN_FLIGHT: usize = 8;

/// One round's renewals, as the [`Fanout`] sends them: one script call per batch of holds of one
/// kind (the fan-out groups them by node, and on a cluster picks the per-node script or the one
/// with declared keys).
struct Renewal<'r> {
    holds: &'r Holds,
    listener: &'r ArcSwapOption<LostListener>,
    /// How long a renewal waits for its answer (and, on a cluster, for a link to its master): a
    /// renewal period at most (the response timeout, if that is shorter). On a cluster, a master
    /// that stops answering holds its round until then, and with it the next renewal of every
    /// other master's holds. Waiting out a response timeout longer than a period let a short
    /// watchdog's leases run out on the masters that answer.
    bound: Duration,
    /// Holds renewed, found gone, and failed to renew, this round (for telemetry).
    counts: [AtomicU32; 3],
}

impl Job for Renewal<'_> {
    type Item = Watched;
    /// The lease and the wall clock (ms since the epoch) every script of a pass is given.
    type Pass = (u64, u64);

    fn key<'i>(&self, w: &'i Watched) -> &'i str {
        renewed_key(w)
    }

    fn kind(&self, w: &Watched) -> usize {
        w.renew.index()
    }

    fn batch(&self) -> usize {
        self.holds.batch
    }

    fn in_flight(&self) -> usize {
        BATCHES_IN_FLIGHT
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn pass(&self) -> (u64, u64) {
        (
            self.holds.watchdog_timeout.as_millis() as u64,
            crate::engine::epoch_ms(),
        )
    }

    fn send<'s>(
        &'s self,
        &(lease_ms, now_ms): &'s (u64, u64),
        call: Call<'s>,
        batch: &'s [&'s Watched],
    ) -> impl Future<Output = (Instant, crate::Result<Vec<i64>>)> + Send + 's {
        renew_batch(self.holds, self.bound, call, batch, lease_ms, now_ms)
    }

    /// Renewed holds are confirmed, gone ones reported lost.
    fn answered(&self, batch: Vec<&Watched>, sent: Instant, flags: Vec<i64>) {
        let lease = self.holds.watchdog_timeout;
        for (w, flag) in batch.iter().zip(flags) {
            let outcome = if flag == 1 { 0 } else { 1 };
            self.counts[outcome].fetch_add(1, Ordering::Relaxed);
            match flag {
                1 => self.holds.confirm(&w.key, Some(w.tenure), sent, lease),
                // Gone, or (with declared keys) a key of another type: the hold is lost.
                _ => {
                    if let Some(lost) = self.holds.mark_lost(&w.key, w.tenure, LostReason::Gone) {
                        report(self.listener, vec![lost]);
                    }
                }
            }
        }
    }

    /// The holds are kept: the retry (or the local deadline) settles them. Logged as a warning
    /// once per node and round, else as a debug event.
    fn failed(&self, count: usize, master: Option<&str>, e: &crate::Error, again: bool) {
        self.counts[2].fetch_add(count as u32, Ordering::Relaxed);
        match (again, master) {
            (true, _) => tracing::debug!(
                target: "crosslock",
                "watchdog renewal of {count} more lock(s) failed: {e}"
            ),
            (false, Some(master)) => tracing::warn!(
                target: "crosslock",
                "watchdog renewal of {count} lock(s) on cluster master {master} failed, retrying: {e}"
            ),
            (false, None) => tracing::warn!(
                target: "crosslock",
                "watchdog renewal of {count} lock(s) failed, retrying: {e}"
            ),
        }
    }
}

/// Sends one batch's renewal script; returns when it was sent and Redis's answer.
async fn renew_batch(
    holds: &Holds,
    bound: Duration,
    call: Call<'_>,
    batch: &[&Watched],
    lease_ms: u64,
    now_ms: u64,
) -> (Instant, crate::Result<Vec<i64>>) {
    let prefixes: Vec<Option<&str>> = batch
        .iter()
        .map(|w| match &w.renew {
            RenewKind::Read { prefix } => Some(&**prefix),
            RenewKind::Group { fields, .. } => Some(&**fields),
            _ => None,
        })
        .collect();
    // The holder strings, written one after another into one string (a hold keeps none of its
    // own: `Holds::write_holder` spells each from its key).
    let mut text = String::new();
    let mut ends = Vec::with_capacity(batch.len());
    for w in batch {
        holds.write_holder(&w.key, &mut text);
        ends.push(text.len());
    }
    let mut start = 0;
    let holders: Vec<&str> = ends
        .iter()
        .map(|&end| {
            let holder = &text[start..end];
            start = end;
            holder
        })
        .collect();
    let mut args: Vec<&dyn ToArg> = Vec::with_capacity(2 * batch.len() + 2);
    args.push(&lease_ms);
    if matches!(
        batch[0].renew,
        RenewKind::Permit { .. } | RenewKind::Group { .. }
    ) {
        args.push(&now_ms);
    }
    for (holder, prefix) in holders.iter().zip(&prefixes) {
        args.push(holder);
        if let Some(prefix) = prefix {
            args.push(prefix);
        }
    }
    let (by_keys, per_node) = scripts_of(&batch[0].renew);
    let sent = Instant::now();
    let result = match tokio::time::timeout(bound, call.eval(by_keys, per_node, &args)).await {
        Ok(result) => result,
        Err(_) => Err(crate::Error::new(
            crate::ErrorKind::Unavailable,
            format!(
                "Redis did not answer a watchdog renewal within {:.3}s (a renewal period, a third \
                 of the watchdog timeout); it is retried, and a lock it cannot renew before its \
                 lease runs out is reported lost. Check that the server is up, reachable and not \
                 paused",
                bound.as_secs_f64()
            ),
        )),
    };
    (sent, result)
}

/// The key a renewal script is given for `w`: a permit's semaphore's timeouts set, every other
/// hold's lock name.
fn renewed_key(w: &Watched) -> &str {
    match &w.renew {
        RenewKind::Permit { timeouts } => timeouts,
        RenewKind::Group { key, .. } => key,
        _ => &w.key.name,
    }
}

/// Logs each of `lost` and tells the listener, on the calling (runtime) thread.
pub(super) fn report(listener: &ArcSwapOption<LostListener>, lost: Vec<LostLock>) {
    if lost.is_empty() {
        return;
    }
    for event in &lost {
        tracing::warn!(
            target: "crosslock",
            "lock '{}' lost by {}: {}",
            event.name,
            event.holder,
            event.reason
        );
    }
    let Some(listener) = listener.load_full() else {
        return;
    };
    for event in lost {
        // A panicking listener must not stop the renewal of every other lock.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(event)));
    }
}
