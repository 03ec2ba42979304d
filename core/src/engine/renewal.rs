//! The one renewal loop of a client, and the lost-lock signal.
//!
//! Holds taken without a lease are renewed by a single task per client that wakes every
//! `watchdog_timeout / 3` and renews all of them in batched scripts (one script per renewal kind
//! and batch, all pipelined in one round trip). A renewal that fails (the connection was closed,
//! Redis did not answer) is retried at once and then with a short back-off until it succeeds or
//! the next period comes: a connection closed between renewals never costs a renewal.
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

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio_util::sync::CancellationToken;

use crate::connection::{Conn, ToArg};
use crate::error::What;
use crate::scripts;

use super::holds::{Holds, LostListener, LostLock, LostReason, RenewKind, Watched};

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
    let mut was_watched = false;
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
            let ok = {
                let round = renew_round(&h, &conn, &listener);
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
            if ok {
                retry_pause = Duration::ZERO;
                next_round = started + period;
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

/// Renews every watched hold once; `false` if any batch failed (to be retried).
async fn renew_round(holds: &Holds, conn: &Conn, listener: &ArcSwapOption<LostListener>) -> bool {
    let watched = holds.watched();
    if watched.is_empty() {
        return true;
    }
    let lease = holds.watchdog_timeout;
    let lease_ms = lease.as_millis() as u64;
    let of = |kind: fn(&RenewKind) -> bool| {
        watched
            .iter()
            .filter(move |w| kind(&w.renew))
            .collect::<Vec<&Watched>>()
    };
    let cluster = conn.is_cluster();
    let groups = [
        (of(|k| matches!(k, RenewKind::Hash)), &*scripts::RENEW_HASH),
        (
            of(|k| matches!(k, RenewKind::Read { .. })),
            &*scripts::RENEW_READ,
        ),
        (
            of(|k| matches!(k, RenewKind::Permit { .. })),
            &*scripts::RENEW_PERMIT,
        ),
    ]
    .into_iter()
    .flat_map(|(holds, script)| {
        // On a cluster one script may only touch one slot: a group per slot.
        let groups: Vec<Vec<&Watched>> = if cluster {
            let mut by_slot = std::collections::BTreeMap::<u16, Vec<&Watched>>::new();
            for w in holds {
                by_slot
                    .entry(crate::cluster::slot(renewed_key(w).as_bytes()))
                    .or_default()
                    .push(w);
            }
            by_slot.into_values().collect()
        } else {
            vec![holds]
        };
        groups.into_iter().map(move |g| (g, script))
    })
    .collect::<Vec<_>>();
    let now_ms = crate::engine::epoch_ms();
    let batches = groups
        .iter()
        .flat_map(|(group, script)| group.chunks(holds.batch).map(move |b| (b, *script)))
        .map(|(batch, script)| async move {
            let keys: Vec<&str> = batch.iter().map(|w| renewed_key(w)).collect();
            let holders: Vec<&str> = batch.iter().map(|w| &*w.holder).collect();
            let prefixes: Vec<Option<&str>> = batch
                .iter()
                .map(|w| match &w.renew {
                    RenewKind::Read { prefix } => Some(&**prefix),
                    _ => None,
                })
                .collect();
            let mut args: Vec<&dyn ToArg> = Vec::with_capacity(2 * batch.len() + 2);
            args.push(&lease_ms);
            if matches!(batch[0].renew, RenewKind::Permit { .. }) {
                args.push(&now_ms);
            }
            for (holder, prefix) in holders.iter().zip(&prefixes) {
                args.push(holder);
                if let Some(prefix) = prefix {
                    args.push(prefix);
                }
            }
            let sent = Instant::now();
            let result: crate::Result<Vec<i64>> =
                conn.eval(script, &keys, &args, What::Connection).await;
            (batch, sent, result)
        });
    // All batches go out at once; the multiplexed connection pipelines them (on a cluster, each
    // to the node owning its slot).
    let results = futures_util::future::join_all(batches).await;
    let mut all_ok = true;
    for (batch, sent, result) in results {
        let flags = match result {
            Ok(flags) => flags,
            Err(e) => {
                // Keep the holds: the retry (or the local deadline) settles them.
                tracing::warn!(
                    target: "crosslock",
                    "watchdog renewal of {} lock(s) failed, retrying: {e}",
                    batch.len()
                );
                all_ok = false;
                continue;
            }
        };
        for (w, flag) in batch.iter().zip(flags) {
            if flag == 1 {
                holds.confirm(&w.key, Some(w.tenure), sent, lease);
            } else if let Some(lost) = holds.mark_lost(&w.key, w.tenure, LostReason::Gone) {
                report(listener, vec![lost]);
            }
        }
    }
    all_ok
}

/// The key a renewal script is given for `w`: a permit's semaphore's timeouts set, every other
/// hold's lock name.
fn renewed_key(w: &Watched) -> &str {
    match &w.renew {
        RenewKind::Permit { timeouts } => timeouts,
        _ => &w.key.name,
    }
}

fn report(listener: &ArcSwapOption<LostListener>, lost: Vec<LostLock>) {
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

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
