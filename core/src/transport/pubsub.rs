//! Shared subscriptions: one per channel per client, however many local waiters use it.
//!
//! A waiter [`subscribe`](PubSub::subscribe)s, gets a [`Subscription`], and awaits
//! [`Subscription::notified`] between attempts. The first waiter of a channel sends SUBSCRIBE;
//! the last one to leave sends UNSUBSCRIBE. Subscribe and unsubscribe of one channel are
//! serialized by the channel's entry, so a waiter arriving while the last one leaves never ends
//! up unsubscribed.
//!
//! What a message does is the channel's [`WakePolicy`], applied to the payload as Redisson's
//! `LockPubSub` does: an unlock (`0`) wakes one local waiter, a write unlock (`1`) wakes them
//! all; a fair lock's per-waiter channel wakes its waiter; a semaphore release wakes as many
//! waiters as permits are available (`SemaphorePubSub`); a latch reaching zero wakes them all
//! (`CountDownLatchPubSub`). When the connection drops every waiter is woken to retry at once, since messages may have
//! been missed, and again once it is back.
//!
//! [`PubSub::channel_count`] counts channels that have local users: the client's own view
//! settles when the last waiter leaves, before Redis has processed the UNSUBSCRIBE.
//!
//! A connection that drops comes back subscribed to every channel whose subscription the server
//! had confirmed on it (redis-rs replays them), so an UNSUBSCRIBE that got no answer (the
//! connection dropped as it was sent, or its reply was lost) is sent again until one is
//! answered: otherwise the channel nobody waits on any more stays subscribed on the new
//! connection (a `CLIENT KILL TYPE pubsub` at the moment of a release did that).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::runtime;
use crate::telemetry::Event;
use crate::transport::{Conn, Pushes, Route, Timeouts};
use crate::util::lock;

/// How a message on a channel wakes the local waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakePolicy {
    /// Lock channels: `1` (a write-lock release) wakes every waiter, anything else (`0`) one.
    Lock,
    /// Every message wakes every waiter (a fair lock's per-waiter channel).
    All,
    /// Semaphore channels (the payload is the permits now available): wakes that many waiters,
    /// at least one.
    Permits,
    /// Latch channels: `0` (the count reached zero) wakes every waiter, anything else nobody.
    Latch,
}

struct Entry {
    channel: String,
    wake: WakePolicy,
    /// Number of live `Subscription`s; guarded by the map's mutex.
    users: std::sync::atomic::AtomicUsize,
    /// Messages delivered on the channel so far (see [`Subscription::wake_marks`]).
    messages: std::sync::atomic::AtomicU64,
    notify: Notify,
    /// What the server has; holding this serializes SUBSCRIBE/UNSUBSCRIBE.
    subscribed: tokio::sync::Mutex<Subscribed>,
}

/// Whether the server has a channel's subscription, as far as this client knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subscribed {
    /// Not subscribed: nothing sent, or an UNSUBSCRIBE answered.
    No,
    /// A SUBSCRIBE answered.
    Yes,
    /// A (un)subscription got no answer, or its caller stopped waiting for it: the server may
    /// have the subscription, now or once the connection comes back (redis-rs replays what the
    /// server had confirmed). The next waiter subscribes; the last one to leave unsubscribes.
    Unknown,
}

/// How many times a leaving waiter's UNSUBSCRIBE is sent while it gets no answer (a pause
/// between tries growing to 550 ms: about as long as the subscription connection's own recovery
/// keeps trying).
const UNSUBSCRIBE_TRIES: u32 = 200;

/// The channels with local users, by name.
type Entries = Mutex<HashMap<String, Arc<Entry>>>;

struct Shared {
    conn: Conn,
    entries: Arc<Entries>,
    /// The client's: once cancelled, nothing is sent again.
    stop: CancellationToken,
    /// How many times the subscription connection dropped (see [`PubSub::drops`]).
    drops: std::sync::atomic::AtomicU64,
    /// How many times every waiter was woken at once (see [`Subscription::wake_marks`]).
    everyone_woken: std::sync::atomic::AtomicU64,
}

impl Shared {
    /// Sets a channel's state `subscribed` to `to`, telling telemetry (if any) when the
    /// subscription is had or no longer known to be had: `crosslock.pubsub.subscriptions` counts
    /// the channels in [`Subscribed::Yes`].
    fn set(&self, subscribed: &mut Subscribed, to: Subscribed) {
        let was = std::mem::replace(subscribed, to) == Subscribed::Yes;
        if was != (to == Subscribed::Yes)
            && let Some(telemetry) = self.conn.telemetry()
        {
            telemetry.record(match was {
                false => &Event::Subscribed,
                true => &Event::Unsubscribed,
            });
        }
    }
}

impl Drop for Shared {
    /// The client is gone, and its subscriptions with its connection: told to telemetry.
    fn drop(&mut self) {
        let Some(telemetry) = self.conn.telemetry() else {
            return;
        };
        for entry in lock(&self.entries).values() {
            // Nobody else can hold an entry's state now: its users hold `Shared`.
            if let Ok(subscribed) = entry.subscribed.try_lock()
                && *subscribed == Subscribed::Yes
            {
                telemetry.record(&Event::Unsubscribed);
            }
        }
    }
}

/// The subscription connection of one client and its channel table.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
}

impl PubSub {
    pub(crate) async fn connect(
        route: &Arc<Route>,
        timeouts: Timeouts,
        stop: CancellationToken,
    ) -> Result<Self> {
        let entries: Arc<Entries> = Arc::default();
        // A message wakes its waiter on the connection's own task, as it is read; the rest
        // (disconnections, moves), which need async work, goes to the dispatcher.
        let (tx, rx) = mpsc::unbounded_channel();
        let table = entries.clone();
        let pushes = Pushes::new(move |push| match push.kind {
            redis::PushKind::Message | redis::PushKind::SMessage => deliver(&table, &push),
            _ => {
                let _ = tx.send(push);
            }
        });
        let conn = Conn::connect_subscriber(route, timeouts, pushes).await?;
        let shared = Arc::new(Shared {
            conn,
            entries,
            stop: stop.clone(),
            drops: 0.into(),
            everyone_woken: 0.into(),
        });
        runtime::spawn(dispatch(Arc::downgrade(&shared), rx, stop.clone()));
        runtime::spawn(keepalive(Arc::downgrade(&shared), stop));
        Ok(PubSub { shared })
    }

    /// Joins the subscription to `channel`, subscribing if this is its first local user.
    ///
    /// Returns once Redis has confirmed the subscription, so a message published after this
    /// returns is seen.
    pub(crate) async fn subscribe(&self, channel: &str, wake: WakePolicy) -> Result<Subscription> {
        let (entry, first) = {
            let mut entries = lock(&self.shared.entries);
            let entry = entries
                .entry(channel.to_owned())
                .or_insert_with(|| {
                    Arc::new(Entry {
                        channel: channel.to_owned(),
                        wake,
                        users: 0.into(),
                        messages: 0.into(),
                        notify: Notify::new(),
                        subscribed: tokio::sync::Mutex::new(Subscribed::No),
                    })
                })
                .clone();
            let before = entry
                .users
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (entry, before == 0)
        };
        if first {
            // A channel kept after a won wait (`Subscription::linger`) may hold a wake-up from a
            // message nobody waited for; the caller tries again right after joining anyway, so
            // drop it rather than spend an attempt on it.
            let mut stale = std::pin::pin!(entry.notify.notified());
            stale.as_mut().enable();
        }
        // From here on the Subscription's Drop undoes the join, even if SUBSCRIBE fails or the
        // caller is cancelled while waiting for it.
        let subscription = Subscription {
            shared: self.shared.clone(),
            entry,
            left: false,
        };
        let mut subscribed = subscription.entry.subscribed.lock().await;
        if *subscribed != Subscribed::Yes {
            // Unknown before SUBSCRIBE is sent: a caller cancelled while it is in flight drops
            // the Subscription, whose clean-up must then still UNSUBSCRIBE (the server may have
            // subscribed us). A SUBSCRIBE that failed stays unknown: its answer may still come
            // (after a response timeout), so the next waiter subscribes again and the last one
            // to leave unsubscribes.
            *subscribed = Subscribed::Unknown;
            if let Err(e) = self.shared.conn.subscribe(channel).await {
                tracing::debug!(target: "crosslock", "subscribing to {channel} failed: {e}");
                return Err(e);
            }
            self.shared.set(&mut subscribed, Subscribed::Yes);
            tracing::debug!(target: "crosslock", "subscribed to {channel}");
        }
        drop(subscribed);
        Ok(subscription)
    }

    /// How many times the subscription connection dropped so far. A waiter woken by a drop
    /// whose attempts cannot be settled checks that Redis answers before it tries again: the
    /// command connection most likely went down with it, and an attempt sent on a dead
    /// connection would fail with an outcome nobody can tell.
    pub(crate) fn drops(&self) -> u64 {
        self.shared.drops.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The number of channels some local waiter uses (for tests and diagnostics). A channel
    /// whose last waiter left counts no more, even before its UNSUBSCRIBE reached Redis.
    pub(crate) fn channel_count(&self) -> usize {
        use std::sync::atomic::Ordering;
        lock(&self.shared.entries)
            .values()
            .filter(|e| e.users.load(Ordering::Relaxed) > 0)
            .count()
    }
}

/// One waiter's share of a channel subscription. Dropping it leaves the channel, unsubscribing
/// when it was the last local user ([`linger`](Self::linger) unsubscribes a moment later).
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    entry: Arc<Entry>,
    /// Left already (by [`linger`](Self::linger)); the drop has nothing more to do.
    left: bool,
}

impl Subscription {
    /// A future that completes at the next wake-up meant for this waiter.
    ///
    /// Call [`enable`](tokio::sync::futures::Notified::enable) on it *before* the attempt it
    /// follows, so a message arriving during the attempt is not missed.
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.entry.notify.notified()
    }

    /// How many times every waiter was woken at once (the subscription connection came back, or
    /// moved, and what was published meanwhile reached nobody), and how many messages came on
    /// this channel, so far. A wake-up after which the first changed, or the second did not, was
    /// a reconnect's (a reconnect wakes a waiter, and may leave it one more wake-up); one after
    /// a new message only, a message's.
    pub(crate) fn wake_marks(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        (
            self.shared.everyone_woken.load(Ordering::Relaxed),
            self.entry.messages.load(Ordering::Relaxed),
        )
    }

    /// Whether this is the only local waiter on its channel (a message then wakes it whatever
    /// the policy).
    pub(crate) fn alone(&self) -> bool {
        self.entry.users.load(std::sync::atomic::Ordering::Relaxed) == 1
    }

    /// Leaves the channel like dropping does, but if this was its last local user, keeps the
    /// subscription for `grace` first: a waiter of the same channel arriving meanwhile (the same
    /// owner waiting again, on a fair lock's per-waiter channel) joins it without a SUBSCRIBE,
    /// and the UNSUBSCRIBE it would have cost is saved too. Only for a wait that was won: one
    /// that was cancelled or timed out leaves nothing behind (drop it instead).
    pub(crate) fn linger(mut self, grace: Duration) {
        self.leave(Some(grace));
    }

    fn leave(&mut self, grace: Option<Duration>) {
        use std::sync::atomic::Ordering;
        self.left = true;
        let last = {
            let _entries = lock(&self.shared.entries);
            self.entry.users.fetch_sub(1, Ordering::Relaxed) == 1
        };
        if !last {
            return;
        }
        let entry = self.entry.clone();
        // A kept channel must not keep the connection: the client may close meanwhile.
        let (strong, weak) = match grace {
            None => (Some(self.shared.clone()), Weak::new()),
            Some(_) => (None, Arc::downgrade(&self.shared)),
        };
        runtime::spawn(async move {
            if let Some(grace) = grace {
                tokio::time::sleep(grace).await;
            }
            let Some(shared) = strong.or_else(|| weak.upgrade()) else {
                return; // the client closed, and its connection with it
            };
            let mut subscribed = entry.subscribed.lock().await;
            if entry.users.load(Ordering::Relaxed) > 0 {
                return; // someone joined meanwhile and keeps the subscription
            }
            let weak = Arc::downgrade(&shared);
            if *subscribed != Subscribed::No {
                unsubscribe(shared, &entry, &mut subscribed).await;
            } else {
                drop(shared);
            }
            let Some(shared) = weak.upgrade() else {
                return; // the client is gone, and its connection with it
            };
            let mut entries = lock(&shared.entries);
            if entry.users.load(Ordering::Relaxed) == 0
                && let Some(current) = entries.get(&entry.channel)
                && Arc::ptr_eq(current, &entry)
            {
                entries.remove(&entry.channel);
            }
            // Otherwise a waiter joined during UNSUBSCRIBE; it holds the entry and will
            // resubscribe once we release `subscribed`.
        });
    }
}

/// Sends UNSUBSCRIBE for the channel whose last waiter left, again while it gets no answer: a
/// connection that dropped as it was sent (or before its answer came) comes back subscribed to
/// it, since the server had confirmed the subscription. Stops when it is answered, a waiter
/// joins (it subscribes itself: the state is left unknown), or the client goes away (the tries
/// after the first do not keep it).
async fn unsubscribe(shared: Arc<Shared>, entry: &Entry, subscribed: &mut Subscribed) {
    use std::sync::atomic::Ordering;
    let weak = Arc::downgrade(&shared);
    let mut first = Some(shared);
    for attempt in 0..UNSUBSCRIBE_TRIES {
        let Some(s) = first.take().or_else(|| weak.upgrade()) else {
            return; // the client is gone, and its connection with it
        };
        if attempt > 0 && s.stop.is_cancelled() {
            return; // the client closed: its connection closes with its last waiter
        }
        match s.conn.unsubscribe(&entry.channel).await {
            Ok(()) => {
                s.set(subscribed, Subscribed::No);
                tracing::debug!(target: "crosslock", "unsubscribed from {}", entry.channel);
                return;
            }
            Err(e) => {
                s.set(subscribed, Subscribed::Unknown);
                tracing::debug!(
                    target: "crosslock",
                    "unsubscribing from {} failed ({e}); trying again",
                    entry.channel
                );
            }
        }
        drop(s);
        tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt.min(10) + 1))).await;
        if entry.users.load(Ordering::Relaxed) > 0 {
            return; // a waiter joined: it subscribes, and unsubscribes when it leaves
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.left {
            return;
        }
        self.leave(None);
    }
}

async fn dispatch(
    shared: Weak<Shared>,
    mut pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
    stop: CancellationToken,
) {
    loop {
        let push = tokio::select! {
            push = pushes.recv() => match push { Some(p) => p, None => return },
            _ = stop.cancelled() => return,
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        match push.kind {
            // Messages are delivered as they are read (see `PubSub::connect`).
            // A cluster node that no longer owns a channel's slot (a failover, a resharding)
            // drops its sharded subscribers. A channel still wanted is subscribed again (on the
            // node that owns it now: the cluster connection follows the MOVED reply), then its
            // waiters retry, since whatever was published meanwhile reached nobody.
            redis::PushKind::SUnsubscribe => {
                let Some(redis::Value::BulkString(bytes)) = push.data.first() else {
                    continue;
                };
                let channel = String::from_utf8_lossy(bytes).into_owned();
                if !shared.conn.is_subscribed(&channel) {
                    continue; // our own unsubscription, confirmed
                }
                let shared = Arc::downgrade(&shared);
                let stop = stop.clone();
                runtime::spawn(async move {
                    for attempt in 0..100u32 {
                        let Some(s) = shared.upgrade() else { return };
                        if stop.is_cancelled() || !s.conn.is_subscribed(&channel) {
                            return;
                        }
                        if s.conn.subscribe(&channel).await.is_ok() {
                            tracing::info!(
                                target: "crosslock",
                                "the sharded subscription to '{channel}' moved with its slot"
                            );
                            wake_all(&s);
                            return;
                        }
                        drop(s);
                        tokio::time::sleep(Duration::from_millis(
                            50 * u64::from(attempt.min(10) + 1),
                        ))
                        .await;
                    }
                });
            }
            redis::PushKind::Other(kind) if kind == crate::transport::MOVED => {
                // The subscription moved to a new master: what was published meanwhile went
                // nowhere, so every waiter retries.
                wake_all(&shared);
            }
            redis::PushKind::Disconnection => {
                shared
                    .conn
                    .note_lost(&"the server closed it; waiters retry at once");
                shared
                    .drops
                    .fetch_add(1, std::sync::atomic::Ordering::Release);
                wake_all(&shared);
                // Once the connection is back (and re-subscribed), wake everyone again: a
                // release during the gap published to nobody.
                let shared = Arc::downgrade(&shared);
                let stop = stop.clone();
                runtime::spawn(async move {
                    for attempt in 0..200u32 {
                        let Some(s) = shared.upgrade() else { return };
                        if stop.is_cancelled() {
                            return;
                        }
                        if s.conn.recover().await {
                            s.conn.note_answered();
                            wake_all(&s);
                            return;
                        }
                        drop(s);
                        tokio::time::sleep(Duration::from_millis(
                            50 * u64::from(attempt.min(10) + 1),
                        ))
                        .await;
                    }
                });
            }
            _ => {}
        }
    }
}

/// Wakes the waiters a message (plain or sharded: the same channels, the same payloads) is for.
fn deliver(entries: &Entries, push: &redis::PushInfo) {
    let Some(redis::Value::BulkString(channel)) = push.data.first() else {
        return;
    };
    let Ok(channel) = std::str::from_utf8(channel) else {
        return; // not one of ours: every channel we subscribe to is UTF-8
    };
    let entry = lock(entries).get(channel).cloned();
    if let Some(entry) = entry {
        wake(&entry, push.data.get(1));
    }
}

/// Applies the entry's policy to one message's payload.
fn wake(entry: &Entry, payload: Option<&redis::Value>) {
    entry
        .messages
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let payload: Option<i64> = match payload {
        Some(redis::Value::BulkString(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        Some(redis::Value::Int(n)) => Some(*n),
        _ => None,
    };
    let all = |entry: &Entry| {
        entry.notify.notify_waiters();
        entry.notify.notify_one();
    };
    match entry.wake {
        WakePolicy::Lock if payload == Some(1) => all(entry),
        WakePolicy::Lock => entry.notify.notify_one(),
        WakePolicy::All => all(entry),
        WakePolicy::Latch if payload == Some(0) => all(entry),
        WakePolicy::Latch => {}
        WakePolicy::Permits => {
            use std::sync::atomic::Ordering;
            let waiters = entry.users.load(Ordering::Relaxed).max(1) as i64;
            for _ in 0..payload.unwrap_or(1).clamp(1, waiters) {
                entry.notify.notify_one();
            }
        }
    }
}

fn wake_all(shared: &Shared) {
    shared
        .everyone_woken
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let entries: Vec<_> = lock(&shared.entries).values().cloned().collect();
    for entry in entries {
        entry.notify.notify_waiters();
        entry.notify.notify_one();
    }
}

/// Keeps the subscription connection alive: if Redis was gone for longer than the reconnect
/// budget, the connection manager only reconnects on the next command, so send one regularly.
async fn keepalive(shared: Weak<Shared>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.cancelled() => return,
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if lock(&shared.entries).is_empty() {
            continue;
        }
        let _ = shared.conn.ping().await;
    }
}
