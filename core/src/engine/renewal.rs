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
//! master's renewals. On a cluster the per-node scripts go over a link of the loop's own to each
//! master ([`MasterLinks`]), never to another node in its stead.
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

use crate::error::What;
use crate::scripts;
use crate::transport::{Conn, MasterLinks, ToArg};
use crate::util::{lock, sleep_until};

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
    let mut view = ClusterView {
        ranges: None,
        stale: false,
        // Found at connect: the nodes run the per-node scripts' cross-slot mark.
        per_node: conn.cross_slot_scripts(),
        links: MasterLinks::default(),
        recheck: false,
    };
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
                    &conn,
                    &listener,
                    &mut view,
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

/// What the renewal loop knows of a cluster between rounds.
struct ClusterView {
    /// The masters' slot ranges (`CLUSTER SLOTS`): asked for when missing or stale.
    ranges: Option<Vec<crate::transport::SlotRange>>,
    /// Whether `ranges` are to be read again (a node turned out not to serve a key they gave
    /// it). Until a read succeeds they are used as they are: a read that gets no answer (it went
    /// to a node that stopped answering) must not leave the round without them, or every
    /// master's batches would be one group, behind that node's.
    stale: bool,
    /// Whether holds are renewed with one script per node: where the cluster ran a script with
    /// the cross-slot flag when the client connected (Redis before 7 has no such flag), until a
    /// node refuses one (a node of another version, mid-upgrade): one script per slot from then
    /// on.
    per_node: bool,
    /// The links the per-node scripts go over, one to each master.
    links: MasterLinks,
    /// Whether the next round reads the map again beside its batches (a master could not be
    /// reached: it may have been failed over).
    recheck: bool,
}

impl ClusterView {
    /// The map as just read; the links to nodes that are not masters any more are closed.
    fn set_ranges(&mut self, ranges: Vec<crate::transport::SlotRange>) {
        self.links
            .retain(|node| ranges.iter().any(|(_, _, master)| master == node));
        self.ranges = Some(ranges);
        self.stale = false;
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

/// One renewal script call: holds of one kind, and where it goes.
struct Batch<'a> {
    holds: Vec<&'a Watched>,
    /// `Some(slot)`: the per-node script, sent to the master serving `slot`; `None`: the script
    /// with declared keys, routed by them.
    node: Option<u16>,
}

/// The fewest holds a round's window takes (a window of few holds would pipeline little).
const WINDOW_MIN: usize = 1024;
/// The most windows a round is cut into (each window scans the table of holds once).
const WINDOWS_MAX: usize = 8;

/// Renews every watched hold once (but those confirmed after `renewed_since`), window by window
/// (see [`Holds::watched_window`]); `false` if any batch failed (to be retried).
async fn renew_round(
    holds: &Holds,
    conn: &Conn,
    listener: &ArcSwapOption<LostListener>,
    view: &mut ClusterView,
    window: &mut Vec<Vec<Watched>>,
    round: u32,
    renewed_since: Option<Instant>,
) -> bool {
    // Whole batches per window, so that windows cost no more scripts than one pass would.
    let size = WINDOW_MIN
        .max(holds.watched_count().div_ceil(WINDOWS_MAX))
        .next_multiple_of(holds.batch);
    let silent = Silent::default();
    let mut all_ok = true;
    while holds.watched_window(round, renewed_since, size, window) > 0 {
        all_ok &= renew_window(holds, conn, listener, view, window, &silent).await;
    }
    all_ok
}

/// Where a renewal script goes: a cluster master (`host`, `port`), or `None` for the one server
/// (or a master not known).
type Node = Option<(String, u16)>;

/// The nodes that left a renewal of this round unanswered (no answer within the response
/// timeout, or the connection dropped): their other batches of the round are not sent (they
/// would wait just as long, or fail just the same), and the round ends unsuccessful, to be
/// retried. So a master that stops answering costs each round one response timeout, however
/// many of its holds there are, and holds back no other master's renewals.
#[derive(Default)]
struct Silent(std::sync::Mutex<Vec<Node>>);

impl Silent {
    fn contains(&self, node: &Node) -> bool {
        lock(&self.0).contains(node)
    }

    /// Adds `node`; `false` if it was in already.
    fn insert(&self, node: &Node) -> bool {
        let mut silent = lock(&self.0);
        let new = !silent.contains(node);
        if new {
            silent.push(node.clone());
        }
        new
    }

    fn any(&self) -> bool {
        !lock(&self.0).is_empty()
    }
}

/// Renews the holds of one window; `false` if any batch failed or was not sent.
///
/// On one server: one script per kind and batch of `watchdog_batch_size`, pipelined
/// [`BATCHES_IN_FLIGHT`] at a time. On a cluster: one script per master, kind and batch (keys of
/// any slot the master serves), each master's batches on their own ([`BATCHES_IN_FLIGHT`] at a
/// time per master); a key a master turns out not to serve (a slot moved since the slot map was
/// read) is renewed again in the same round by a script routed by its slot, as on a cluster
/// before Redis 7.
async fn renew_window(
    holds: &Holds,
    conn: &Conn,
    listener: &ArcSwapOption<LostListener>,
    view: &mut ClusterView,
    watched: &[Vec<Watched>],
    silent: &Silent,
) -> bool {
    if !conn.is_cluster() {
        // One server: each chunk (one kind, at most a batch) is a batch.
        let batches = watched
            .iter()
            .map(|chunk| Batch {
                holds: chunk.iter().collect(),
                node: None,
            })
            .collect();
        let nodes = vec![(None, batches)];
        return run_batches(holds, conn, listener, nodes, silent, &view.links)
            .await
            .ok;
    }
    let mut pending: Vec<&Watched> = watched.iter().flatten().collect();
    let mut all_ok = true;
    // The map groups the batches by master, in both ways of renewing: without it the per-slot
    // scripts would be one group, and a master that does not answer would hold up the others.
    if (view.ranges.is_none() || view.stale)
        && let Ok(ranges) = conn.cluster_slot_ranges().await
    {
        view.set_ranges(ranges);
    }
    if view.per_node {
        // Read beside the batches, not before them: while a master hangs, the read may wait
        // for it, and the other masters' renewals must not.
        let recheck = std::mem::take(&mut view.recheck);
        let mut fresh = None;
        if let Some(ranges) = &view.ranges {
            let mut by_node =
                std::collections::BTreeMap::<(&(String, u16), usize), Vec<&Watched>>::new();
            let mut unplaced = Vec::new();
            for w in pending.drain(..) {
                let slot = crate::transport::cluster::slot(renewed_key(w).as_bytes());
                match master_of(ranges, slot) {
                    Some(node) => by_node.entry((node, w.renew.index())).or_default().push(w),
                    None => unplaced.push(w),
                }
            }
            let mut nodes: Vec<(Node, Vec<Batch<'_>>)> = Vec::new();
            for ((node, _), group) in by_node {
                let batches = group.chunks(holds.batch).map(|chunk| Batch {
                    node: Some(crate::transport::cluster::slot(
                        renewed_key(chunk[0]).as_bytes(),
                    )),
                    holds: chunk.to_vec(),
                });
                // The map is ordered by node first: a node's kinds are neighbours.
                match nodes.last_mut() {
                    Some((last, all)) if last.as_ref() == Some(node) => all.extend(batches),
                    _ => nodes.push((Some(node.clone()), batches.collect())),
                }
            }
            let read = async {
                match recheck {
                    true => conn.cluster_slot_ranges().await.ok(),
                    false => None,
                }
            };
            let batches = run_batches(holds, conn, listener, nodes, silent, &view.links);
            let (outcome, read) = futures_util::future::join(batches, read).await;
            fresh = read;
            all_ok &= outcome.ok;
            if !outcome.retry.is_empty() || !unplaced.is_empty() {
                view.stale = true;
            }
            // A master that could not be reached may have been failed over: the retry reads
            // the map again (beside its batches).
            view.recheck = silent.any();
            if let Some(refusal) = &outcome.refused {
                tracing::info!(
                    target: "crosslock",
                    "a cluster master refused the per-master renewal script, which the cluster ran \
                     when this client connected ({refusal}; a node of another version, mid-upgrade?): \
                     renewing one script per slot until this client connects again"
                );
                view.per_node = false;
            }
            pending = outcome.retry;
            pending.extend(unplaced);
        }
        if let Some(ranges) = fresh {
            view.set_ranges(ranges);
        }
    }
    if pending.is_empty() {
        return all_ok;
    }
    // One script with declared keys may only touch one slot: a group per slot, and the groups
    // of one master (when the map at hand names it) together.
    let ranges = view.ranges.as_deref();
    let mut groups =
        std::collections::BTreeMap::<(Option<&(String, u16)>, u16, usize), Vec<&Watched>>::new();
    for w in pending {
        let slot = crate::transport::cluster::slot(renewed_key(w).as_bytes());
        let node = ranges.and_then(|ranges| master_of(ranges, slot));
        groups
            .entry((node, slot, w.renew.index()))
            .or_default()
            .push(w);
    }
    let mut nodes: Vec<(Node, Vec<Batch<'_>>)> = Vec::new();
    for ((node, _, _), group) in groups {
        let batches = group.chunks(holds.batch).map(|chunk| Batch {
            node: None,
            holds: chunk.to_vec(),
        });
        match nodes.last_mut() {
            Some((last, all)) if last.as_ref() == node => all.extend(batches),
            _ => nodes.push((node.cloned(), batches.collect())),
        }
    }
    let outcome = run_batches(holds, conn, listener, nodes, silent, &view.links).await;
    all_ok && outcome.ok
}

/// The master serving `slot` in `ranges`, if any.
fn master_of(ranges: &[crate::transport::SlotRange], slot: u16) -> Option<&(String, u16)> {
    ranges
        .iter()
        .find(|(first, last, _)| (*first..=*last).contains(&slot))
        .map(|(_, _, node)| node)
}

/// What became of one round's batches.
struct Outcome<'a> {
    /// Every batch got an answer (or was handed on in `retry`).
    ok: bool,
    /// Holds a per-node script could not look at (to renew again by slot).
    retry: Vec<&'a Watched>,
    /// A per-node script was refused by Redis itself for its cross-slot mark: the refusal.
    refused: Option<String>,
}

/// How many renewal batches are in flight at once. Enough to keep the connection's pipeline busy
/// (Redis runs them one after another anyway), and few enough that a round's transient memory (the
/// batches' commands and replies) stays the same however many locks are held: sent all at once,
/// 10,000 holds left hundreds of bytes each behind in the allocator after every round.
const BATCHES_IN_FLIGHT: usize = 8;

/// Sends one batch's renewal script; returns the batch, when it was sent and Redis's answer.
async fn renew_batch<'a>(
    holds: &Holds,
    conn: &Conn,
    links: &MasterLinks,
    node: &Node,
    batch: Batch<'a>,
    lease_ms: u64,
    now_ms: u64,
) -> (Batch<'a>, Instant, crate::Result<Vec<i64>>) {
    let keys: Vec<&str> = batch.holds.iter().map(|w| renewed_key(w)).collect();
    let prefixes: Vec<Option<&str>> = batch
        .holds
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
    let mut ends = Vec::with_capacity(batch.holds.len());
    for w in &batch.holds {
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
    let count = keys.len();
    let mut args: Vec<&dyn ToArg> = Vec::with_capacity(3 * count + 3);
    if batch.node.is_some() {
        args.push(&count);
        for key in &keys {
            args.push(key);
        }
    }
    args.push(&lease_ms);
    if matches!(
        batch.holds[0].renew,
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
    let (by_slot, by_node) = scripts_of(&batch.holds[0].renew);
    let sent = Instant::now();
    let call = async {
        match (batch.node, node) {
            (Some(slot), Some(master)) => {
                let subject = What::Connection;
                conn.eval_on_master(links, master, slot, by_node, &args, subject)
                    .await
            }
            (None, _) => conn.eval(by_slot, &keys, &args, What::Connection).await,
            // Never made: a per-node batch is always in the group of its master.
            (Some(_), None) => Err(crate::Error::new(
                crate::ErrorKind::Redis,
                "a per-node renewal script had no master to go to (a crosslock bug)",
            )),
        }
    };
    // A renewal waits for its answer a renewal period at most (the response timeout, if that is
    // shorter): on a cluster, a master that stops answering holds its round until then, and with
    // it the next renewal of every other master's holds. Waiting out a response timeout longer
    // than a period let a short watchdog's leases run out on the masters that answer.
    let bound = (holds.watchdog_timeout / 3).min(conn.response_timeout());
    let result = match tokio::time::timeout(bound, call).await {
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
    (batch, sent, result)
}

/// Makes sure `links` has a link to `master`, waiting no longer than for a renewal's answer
/// (see [`renew_batch`]): a master that accepts connections but does not answer (a paused
/// process) must not hold up the next round of the others.
async fn link_ready(
    holds: &Holds,
    conn: &Conn,
    links: &MasterLinks,
    master: &(String, u16),
) -> crate::Result<()> {
    let bound = (holds.watchdog_timeout / 3).min(conn.response_timeout());
    match tokio::time::timeout(bound, links.ready(conn, master)).await {
        Ok(ready) => ready,
        Err(_) => Err(crate::Error::new(
            crate::ErrorKind::Unavailable,
            format!(
                "no connection to the master within {:.3}s (a renewal period, or the response \
                 timeout if shorter)",
                bound.as_secs_f64()
            ),
        )),
    }
}

/// Sends each node's batches, [`BATCHES_IN_FLIGHT`] at a time per node (the multiplexed
/// connection pipelines them; on a cluster each node's go to it, and the nodes' go on side by
/// side), and settles each hold by its answer: renewed, gone (the lost signal), or, from a
/// per-node script, to be renewed again by slot. A node's batches after one it left unanswered
/// are not sent ([`Silent`]).
async fn run_batches<'a>(
    holds: &Holds,
    conn: &Conn,
    listener: &ArcSwapOption<LostListener>,
    nodes: Vec<(Node, Vec<Batch<'a>>)>,
    silent: &Silent,
    links: &MasterLinks,
) -> Outcome<'a> {
    let lease = holds.watchdog_timeout;
    let lease_ms = lease.as_millis() as u64;
    let now_ms = crate::engine::epoch_ms();
    let outcome = std::sync::Mutex::new(Outcome {
        ok: true,
        retry: Vec::new(),
        refused: None,
    });
    let outcome_ref = &outcome;
    let node_batches = |(node, batches): (Node, Vec<Batch<'a>>)| async move {
        // A master's link for its per-node scripts, opened once here rather than by each of
        // its batches in flight: one that cannot be reached costs one attempt to connect.
        if let Some(master) = &node
            && batches.iter().any(|batch| batch.node.is_some())
            && !silent.contains(&node)
            && let Err(e) = link_ready(holds, conn, links, master).await
        {
            silent.insert(&node);
            let count = batches.iter().map(|batch| batch.holds.len()).sum();
            tell_failure(count, &node, &e);
            // Kept: the retry (or the local deadline) settles them.
            lock(outcome_ref).ok = false;
            return;
        }
        // Each batch's call is made only when it is its turn, so the futures alive at once
        // (each with its command and arguments) are at most BATCHES_IN_FLIGHT per node
        // whatever the number of holds; and it is not sent once the node left one unanswered.
        let calls = batches.into_iter().map(|batch| {
            let node = &node;
            async move {
                if silent.contains(node) {
                    return (batch, None);
                }
                let (batch, sent, result) =
                    renew_batch(holds, conn, links, node, batch, lease_ms, now_ms).await;
                (batch, Some((sent, result)))
            }
        });
        // Each answer is settled as it comes (and let go of), not gathered for the end.
        crate::engine::at_most_in_flight(BATCHES_IN_FLIGHT, calls, |(batch, answer)| {
            let mut outcome = lock(outcome_ref);
            match answer {
                // Not sent: renewed by the retry of the round.
                None => outcome.ok = false,
                Some(answer) => {
                    // Told once per node and round: its other failures are the same one.
                    let mut first = true;
                    if matches!(&answer.1, Err(e) if e.kind() == crate::ErrorKind::Unavailable) {
                        first = silent.insert(&node);
                    }
                    let tell = first.then_some(&node);
                    settle(holds, listener, batch, answer, lease, tell, &mut outcome);
                }
            }
        })
        .await;
    };
    futures_util::future::join_all(nodes.into_iter().map(node_batches)).await;
    outcome.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Settles one batch's answer: renewed holds are confirmed, gone ones reported lost, and (from
/// a per-node script) the ones to renew by slot handed on in `outcome`. A failure is logged as a
/// warning when `tell` names the batch's node (`Some(None)` on one server), else as a debug
/// event (another failure of a node already told of this round).
fn settle<'a>(
    holds: &Holds,
    listener: &ArcSwapOption<LostListener>,
    batch: Batch<'a>,
    (sent, result): (Instant, crate::Result<Vec<i64>>),
    lease: Duration,
    tell: Option<&Node>,
    outcome: &mut Outcome<'a>,
) {
    let flags = match result {
        Ok(flags) => flags,
        Err(e) if batch.node.is_some() && e.kind() != crate::ErrorKind::Unavailable => {
            // Redis itself refused the per-node script: these holds are renewed by slot.
            tracing::debug!(target: "crosslock", "per-node renewal refused: {e}");
            let message = e.to_string();
            if crate::scripts::refuses_cross_slot_mark(&message) {
                outcome.refused = Some(message);
            }
            outcome.retry.extend(batch.holds);
            return;
        }
        Err(e) => {
            // Keep the holds: the retry (or the local deadline) settles them.
            match tell {
                Some(node) => tell_failure(batch.holds.len(), node, &e),
                None => tracing::debug!(
                    target: "crosslock",
                    "watchdog renewal of {} more lock(s) failed: {e}",
                    batch.holds.len()
                ),
            }
            outcome.ok = false;
            return;
        }
    };
    for (w, flag) in batch.holds.iter().zip(flags) {
        match flag {
            1 => holds.confirm(&w.key, Some(w.tenure), sent, lease),
            -1 if batch.node.is_some() => outcome.retry.push(w),
            // Gone, or (with declared keys) a key of another type: the hold is lost.
            _ => {
                if let Some(lost) = holds.mark_lost(&w.key, w.tenure, LostReason::Gone) {
                    report(listener, vec![lost]);
                }
            }
        }
    }
}

/// Logs that the renewal of `count` holds on `node` (a cluster master, or `None`: the one server)
/// failed and is retried.
fn tell_failure(count: usize, node: &Node, e: &crate::Error) {
    match node {
        Some((host, port)) => tracing::warn!(
            target: "crosslock",
            "watchdog renewal of {count} lock(s) on cluster master {} failed, retrying: {e}",
            crate::transport::endpoint::host_port(host, *port)
        ),
        None => tracing::warn!(
            target: "crosslock",
            "watchdog renewal of {count} lock(s) failed, retrying: {e}"
        ),
    }
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
