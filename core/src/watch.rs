//! Following one object live: [`Client::watch`], what the `crosslock watch` command prints.
//!
//! How a watch sees changes, and what it can and cannot tell apart, is documented on [`Watch`].

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::inspect::{Inspection, ObjectKind};
use crate::layout;
use crate::objects::check_name;
use crate::transport::{Conn, Timeouts};

/// What changed, in a [`WatchEvent`].
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::time::Duration;
/// use crosslock::WatchEventKind;
/// let mut watch = client.watch("orders:42", Duration::from_millis(100)).await?;
/// let event = watch.next().await?;
/// if event.kind == WatchEventKind::Expired {
///     println!("{} let its lease run out", event.holder.unwrap_or_default());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEventKind {
    /// A holder took the lock (or a read hold of it), or a permit of a permit-expirable
    /// semaphore was taken.
    Acquired,
    /// A holder took the lock again (its hold count went up).
    Reentered,
    /// A holder gave back one of several holds (its count went down; it still holds).
    Exited,
    /// A holder's last hold (or a permit) was given back: a release message came with it.
    Released,
    /// A lock held more than once disappeared with one release message: a force-unlock.
    ForceUnlocked,
    /// A hold (or a permit) disappeared without a message once its lease had run out.
    Expired,
    /// A hold or an object disappeared without a message before its lease ran out (a lock kind
    /// that publishes nothing, such as a non-reentrant lock, or a delete).
    Removed,
    /// A waiter joined a fair lock's queue.
    Queued,
    /// A waiter left a fair lock's queue without taking the lock (it gave up, timed out, or was
    /// skipped as dead).
    Dequeued,
    /// A counter (a semaphore's permits, a latch's count) changed or appeared.
    Count,
    /// A read-write lock changed mode (`read` ↔ `write`).
    Mode,
    /// The name now holds something the watch does not follow (another Redis type).
    Other,
}

impl WatchEventKind {
    /// The event's name as the command line prints it: `acquired`, `reentered`, `exited`,
    /// `released`, `force-unlocked`, `expired`, `removed`, `queued`, `dequeued`, `count`, `mode`,
    /// `other`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::WatchEventKind::ForceUnlocked.as_str(), "force-unlocked");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            WatchEventKind::Acquired => "acquired",
            WatchEventKind::Reentered => "reentered",
            WatchEventKind::Exited => "exited",
            WatchEventKind::Released => "released",
            WatchEventKind::ForceUnlocked => "force-unlocked",
            WatchEventKind::Expired => "expired",
            WatchEventKind::Removed => "removed",
            WatchEventKind::Queued => "queued",
            WatchEventKind::Dequeued => "dequeued",
            WatchEventKind::Count => "count",
            WatchEventKind::Mode => "mode",
            WatchEventKind::Other => "other",
        }
    }
}

impl fmt::Display for WatchEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change seen by a [`Watch`].
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::time::Duration;
/// let mut watch = client.watch("orders:42", Duration::from_millis(100)).await?;
/// let event = watch.next().await?;
/// println!("{} {:?} {}", event.kind, event.holder, event.detail);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WatchEvent {
    /// When the change was seen (the snapshot that showed it).
    pub at: SystemTime,
    /// What changed.
    pub kind: WatchEventKind,
    /// The holder (`<client-uuid>:<n>`) or permit id concerned, if any.
    pub holder: Option<String>,
    /// The details in words: hold counts, lease, token, queue place, counts before and after.
    pub detail: String,
    /// The object as it is after the change.
    pub state: Inspection,
}

impl WatchEvent {
    /// Milliseconds since the Unix epoch of [`at`](Self::at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let mut watch = client.watch("orders:42", Duration::from_millis(100)).await?;
    /// println!("seen at {} ms since the epoch", watch.next().await?.at_ms());
    /// # Ok(()) }
    /// ```
    pub fn at_ms(&self) -> i64 {
        epoch_ms(self.at)
    }
}

impl fmt::Display for WatchEvent {
    /// `2026-11-24T22:15:01.123Z  acquired        orders:42  <holder>  holds 1, lease 30.000 s`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}  {:<14}  {}",
            utc(self.at_ms()),
            self.kind.as_str(),
            self.state.name
        )?;
        if let Some(h) = &self.holder {
            write!(f, "  {h}")?;
        }
        if !self.detail.is_empty() {
            write!(f, "  {}", self.detail)?;
        }
        Ok(())
    }
}

/// A live view of one object: see [`Client::watch`].
///
/// Redis records no history, and an acquire publishes nothing (only releases do), so a watch
/// combines the two sources there are: it subscribes to every channel an object of that name can
/// publish on (its own connection, so it never disturbs the client's waiters), and it takes an
/// [`Inspection`] after every message and at least every `interval`. Each new snapshot is compared
/// with the previous one and the differences become [`WatchEvent`]s.
///
/// What an observer can and cannot tell apart:
///
/// - A hold that disappears right after a release message was **released**. When a lock held
///   more than once (re-entered) disappears with a single message, a release (which takes one
///   hold at a time) cannot explain it: it was **force-unlocked**. A force-unlock of a lock held
///   once looks exactly like its release: Redis keeps no trace of the difference.
/// - A hold that disappears without a message once its lease ran out **expired**.
/// - A hold that disappears without a message before its lease ran out was **removed**: a lock kind
///   that publishes nothing (a non-reentrant lock's release), or a `DEL`. Except on a fair lock
///   with nobody queued: its release publishes only to the next waiter, so there it was
///   **released**.
/// - A message comes over the watch's own connection, so one that announced a change may be read
///   after the snapshot that shows the change: a hold that left with no message seen yet is given
///   100 ms for one before it is called expired or removed.
/// - Changes that come and go within one interval with no message between them (a hold taken and
///   given back in a millisecond by a lock kind that publishes nothing) can be missed; a smaller
///   interval misses less and costs one read-only script call per interval.
///
/// Dropping it closes its subscription connection.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::time::Duration;
/// let mut watch = client.watch("orders:42", Duration::from_millis(100)).await?;
/// for _ in 0..3 {
///     println!("{}", watch.next().await?);
/// }
/// drop(watch); // closes its subscription connection
/// # Ok(()) }
/// ```
pub struct Watch {
    client: Client,
    name: String,
    /// Keeps the subscription connection open.
    _subscriber: Conn,
    pushes: UnboundedReceiver<redis::PushInfo>,
    interval: Duration,
    last: Inspection,
    last_at: Instant,
    pending: VecDeque<WatchEvent>,
    /// Whether the name was ever seen as a fair lock (whose queue keys vanish when empty).
    fair: bool,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("name", &self.name)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// The shortest interval a watch accepts.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Lease left at the last snapshot within which a silent disappearance counts as an expiry:
/// the snapshot's TTL was read up to a response time before it arrived.
const EXPIRY_SLACK: Duration = Duration::from_millis(200);

impl Client {
    /// Follows the object at `name` live: returns a [`Watch`] whose [`next`](Watch::next)
    /// answers each change (acquire, re-entry, release, expiry, force-unlock, queue and count
    /// changes) as it is seen. See [`Watch`] for how changes are told apart.
    ///
    /// `interval` is the longest time between two snapshots (changes that publish a message are
    /// seen at once); at least 10 ms. The watch opens its own subscription connection.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name or an
    /// interval below 10 ms; the connection's errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future drops the connection being opened.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let mut watch = client.watch("orders:42", Duration::from_millis(100)).await?;
    /// println!("{}", watch.current().summary());
    /// loop {
    ///     let event = watch.next().await?;
    ///     println!("{event}"); // 2026-11-24T22:15:01.123Z  released  orders:42  <holder>
    /// }
    /// # }
    /// ```
    pub async fn watch(&self, name: &str, interval: Duration) -> Result<Watch> {
        let name = check_name(self, name, "object")?.to_string();
        if interval < MIN_INTERVAL {
            return Err(Error::invalid(format!(
                "watch interval {interval:?} is too short: give at least 10 ms"
            )));
        }
        let options = self.options();
        let timeouts = Timeouts {
            connect: options.connect_timeout,
            response: options.response_timeout,
        };
        let (tx, pushes) = unbounded_channel();
        let route = self.state().await?.route.clone();
        let subscriber = Conn::connect_subscriber(&route, timeouts, tx.into()).await?;
        for channel in channels(&name) {
            subscriber.subscribe(&channel).await?;
        }
        subscriber.psubscribe(&fair_waiter_pattern(&name)).await?;
        // The first snapshot is taken after subscribing: a release from here on is not missed.
        let last = self.inspect_with(&name, false).await?;
        Ok(Watch {
            client: self.clone(),
            name,
            _subscriber: subscriber,
            pushes,
            interval,
            last_at: Instant::now(),
            pending: VecDeque::new(),
            fair: last.kind == ObjectKind::FairLock,
            last,
        })
    }
}

impl Watch {
    /// The object as the last snapshot showed it (when [`Client::watch`] returned, the state
    /// everything after is compared with).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let watch = client.watch("orders:42", Duration::from_millis(100)).await?;
    /// println!("starting from: {}", watch.current().summary());
    /// # Ok(()) }
    /// ```
    pub fn current(&self) -> &Inspection {
        &self.last
    }

    /// The next change. Waits as long as nothing changes.
    ///
    /// # Errors
    ///
    /// The connection's errors when a snapshot cannot be taken (the server is unreachable). The
    /// watch stays usable: the next call tries again, and compares with the last snapshot it had.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: an event already found stays queued for the next call.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let mut watch = client.watch("orders:42", Duration::from_millis(100)).await?;
    /// for _ in 0..10 {
    ///     match watch.next().await {
    ///         Ok(event) => println!("{event}"),
    ///         Err(e) => eprintln!("cannot see the server ({e}); the next call retries"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Result<WatchEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            let deadline = self.last_at + self.interval;
            let mut released = false;
            tokio::select! {
                push = self.pushes.recv() => match push {
                    Some(p) => released |= is_message(&p),
                    None => tokio::time::sleep_until(deadline.into()).await,
                },
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
            while let Ok(p) = self.pushes.try_recv() {
                released |= is_message(&p);
            }
            let mut seen = self.client.inspect_with(&self.name, false).await?;
            if !released && holder_left(&self.last, &seen) {
                // A hold left with no message seen yet. The message of a release (or
                // force-unlock) made before this snapshot was written to the subscription before
                // the snapshot's reply, but it comes over another connection and may not have
                // been read yet: give it a moment before calling the hold removed or expired,
                // and if it comes, take the snapshot again (the message may announce more).
                if let Ok(Some(p)) = tokio::time::timeout(MESSAGE_GRACE, self.pushes.recv()).await
                    && is_message(&p)
                {
                    released = true;
                    while let Ok(p) = self.pushes.try_recv() {
                        released |= is_message(&p);
                    }
                    seen = self.client.inspect_with(&self.name, false).await?;
                }
            }
            let at = SystemTime::now();
            let elapsed = self.last_at.elapsed();
            self.fair |= seen.kind == ObjectKind::FairLock;
            let context = Seen {
                released,
                elapsed,
                at,
                fair: self.fair,
            };
            self.pending.extend(diff(&self.last, &seen, &context));
            self.last = seen;
            self.last_at = Instant::now();
        }
    }
}

/// How long a watch waits for a release message before calling a hold that left without one
/// removed or expired (see [`Watch::next`]).
const MESSAGE_GRACE: Duration = Duration::from_millis(100);

/// Whether a holder of `before` is not in `after`.
fn holder_left(before: &Inspection, after: &Inspection) -> bool {
    before
        .holders
        .iter()
        .any(|old| !after.holders.iter().any(|h| h.holder == old.holder))
}

fn is_message(push: &redis::PushInfo) -> bool {
    matches!(
        push.kind,
        redis::PushKind::Message | redis::PushKind::PMessage | redis::PushKind::SMessage
    )
}

/// Every channel an object named `name` publishes on, whatever its kind: the lock channel (locks,
/// fenced locks), the read-write lock's, the semaphores', the latch's.
fn channels(name: &str) -> Vec<String> {
    vec![
        layout::lock_channel(name),
        layout::rw_channel(name),
        layout::semaphore_channel(name),
        layout::latch_channel(name),
    ]
}

/// The pattern of a fair lock's per-waiter channels (`redisson_lock__channel:{name}:<holder>`),
/// with the name's glob characters escaped.
fn fair_waiter_pattern(name: &str) -> String {
    let base = layout::lock_channel(name);
    let mut pattern = String::with_capacity(base.len() + 2);
    for c in base.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push_str(":*");
    pattern
}

fn lease(ttl: Option<Duration>) -> String {
    match ttl {
        None => "no expiry".to_owned(),
        Some(d) => format!("lease {:.3} s", d.as_secs_f64()),
    }
}

fn plural(n: i64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// What is known about the time between two snapshots.
#[derive(Clone, Copy)]
struct Seen {
    /// Whether a message came between them.
    released: bool,
    /// How long after the first the second was taken.
    elapsed: Duration,
    /// When the second was taken.
    at: SystemTime,
    /// Whether the name has been seen as a fair lock: its release publishes only to the next
    /// waiter, so with nobody queued it is silent (and its emptied queue keys are gone, so the
    /// snapshot alone may not say it is a fair lock).
    fair: bool,
}

/// The events that turn `before` into `after`.
fn diff(before: &Inspection, after: &Inspection, seen: &Seen) -> Vec<WatchEvent> {
    let Seen {
        released,
        elapsed,
        at,
        fair,
    } = *seen;
    let mut events = Vec::new();
    let mut push = |kind, holder: Option<&str>, detail: String| {
        events.push(WatchEvent {
            at,
            kind,
            holder: holder.map(str::to_owned),
            detail,
            state: after.clone(),
        });
    };
    // Did the lease run out between the snapshots? (Everything of the main key goes at once.)
    let ran_out = |ttl: Option<Duration>| ttl.is_some_and(|t| t <= elapsed + EXPIRY_SLACK);
    if before.mode.is_some() && after.mode.is_some() && before.mode != after.mode {
        push(
            WatchEventKind::Mode,
            None,
            format!(
                "{} → {}",
                before.mode.as_deref().unwrap_or("-"),
                after.mode.as_deref().unwrap_or("-")
            ),
        );
    }
    // Holders that left. A force-unlock removes every hold at once.
    let total_before: i64 = before.holders.iter().map(|h| h.holds).sum();
    let all_gone = after.holders.is_empty() && !before.holders.is_empty();
    for old in &before.holders {
        if after.holders.iter().any(|h| h.holder == old.holder) {
            continue;
        }
        let (kind, detail) = if released && all_gone && total_before > 1 && old.holds > 1 {
            (
                WatchEventKind::ForceUnlocked,
                format!("it held {} at once", plural(old.holds, "hold")),
            )
        } else if released {
            (WatchEventKind::Released, String::new())
        } else if fair && before.queue.is_empty() && !ran_out(before.ttl) {
            // A fair lock publishes only to the next waiter: with nobody queued, a release is
            // silent.
            (WatchEventKind::Released, String::new())
        } else if ran_out(before.ttl)
            || (!old.read_leases.is_empty() && old.read_leases.iter().all(|l| ran_out(Some(*l))))
        {
            (WatchEventKind::Expired, "its lease ran out".to_owned())
        } else {
            (
                WatchEventKind::Removed,
                "gone without a release message (a lock kind that publishes none, or a delete)"
                    .to_owned(),
            )
        };
        push(kind, Some(&old.holder), detail);
    }
    // Holders that arrived or changed their count.
    for new in &after.holders {
        let what = if new.write {
            "write hold"
        } else if after.mode.is_some() {
            "read hold"
        } else {
            "hold"
        };
        match before.holders.iter().find(|h| h.holder == new.holder) {
            None => {
                let mut detail = format!("{}, {}", plural(new.holds, what), lease(after.ttl));
                if let Some(token) = after.token {
                    detail.push_str(&format!(", token {token}"));
                }
                push(WatchEventKind::Acquired, Some(&new.holder), detail);
            }
            Some(old) if new.holds > old.holds => push(
                WatchEventKind::Reentered,
                Some(&new.holder),
                format!("{} now", plural(new.holds, what)),
            ),
            Some(old) if new.holds < old.holds => push(
                WatchEventKind::Exited,
                Some(&new.holder),
                format!("{} left", plural(new.holds, what)),
            ),
            Some(_) => {}
        }
    }
    // A fair lock's queue.
    for w in &after.queue {
        if !before.queue.iter().any(|o| o.holder == w.holder) {
            let place = after
                .queue
                .iter()
                .position(|o| o.holder == w.holder)
                .unwrap_or(0);
            push(
                WatchEventKind::Queued,
                Some(&w.holder),
                format!("place {} of {}", place + 1, after.queue.len()),
            );
        }
    }
    for w in &before.queue {
        let still_queued = after.queue.iter().any(|o| o.holder == w.holder);
        let took_it = after.holders.iter().any(|h| h.holder == w.holder);
        if !still_queued && !took_it {
            push(
                WatchEventKind::Dequeued,
                Some(&w.holder),
                "left the queue without the lock".to_owned(),
            );
        }
    }
    // A permit-expirable semaphore's permits out.
    for p in &before.permits {
        if after.permits.iter().any(|q| q.id == p.id) {
            continue;
        }
        let expired = p.expires_ms.is_some_and(|e| e <= epoch_ms(at));
        let kind = if expired && !released {
            WatchEventKind::Expired
        } else {
            WatchEventKind::Released
        };
        push(
            kind,
            Some(&p.id),
            crate::LockKind::Permit.as_str().to_owned(),
        );
    }
    for p in &after.permits {
        if !before.permits.iter().any(|q| q.id == p.id) {
            let detail = match p.expires_ms {
                Some(e) => format!(
                    "permit, expires in {:.3} s",
                    (e - epoch_ms(at)) as f64 / 1000.0
                ),
                None => "permit, no expiry".to_owned(),
            };
            push(WatchEventKind::Acquired, Some(&p.id), detail);
        }
    }
    if before.count != after.count && (before.count.is_some() || after.count.is_some()) {
        let show = |c: Option<i64>| c.map_or_else(|| "none".to_owned(), |c| c.to_string());
        push(
            WatchEventKind::Count,
            None,
            format!("{} → {}", show(before.count), show(after.count)),
        );
    }
    if before.kind != after.kind && matches!(after.kind, ObjectKind::Other(_)) {
        push(
            WatchEventKind::Other,
            None,
            format!("the name now holds a Redis {}", after.kind),
        );
    }
    events
}

fn epoch_ms(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `2026-11-24T22:15:01.123Z` for epoch milliseconds (UTC, proleptic Gregorian calendar).
pub(crate) fn utc(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_epoch_ms() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_795_558_501_123), "2026-11-24T22:15:01.123Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn fair_waiter_pattern_escapes_glob_characters() {
        assert_eq!(
            fair_waiter_pattern("a*b"),
            "redisson_lock__channel:{a\\*b}:*"
        );
    }
}
