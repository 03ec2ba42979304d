//! The inspector: what lives at a name, as Redis has it now, in plain data — for operators ("who
//! holds `orders:42`?") and for the bindings' `inspect` calls and command-line tools.
//!
//! One read-only script call reads the main key and every sibling key crosslock and Redisson keep
//! beside it (a fair lock's queue and deadlines, a fenced lock's token counter, a permit-expirable
//! semaphore's permits, each reader's lease keys), so the snapshot is consistent. Nothing is
//! changed. [`Client::scan`] lists the names of such objects with `SCAN` (never `KEYS`), so it is
//! safe on a busy server.

use std::fmt;
use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::error::{Error, Result, What};
use crate::layout;
use crate::objects::check_name;
use crate::scripts;

/// What kind of object lives at a name, as far as its keys tell.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::ObjectKind;
/// match client.inspect("orders:42").await?.kind {
///     ObjectKind::Absent => println!("free"),
///     ObjectKind::Lock | ObjectKind::FairLock => println!("a lock"),
///     other => println!("a {other}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectKind {
    /// Nothing: no key of any kind under this name.
    Absent,
    /// A lock hash (`Lock`, `SpinLock`, `NonReentrantLock`: Redisson stores them alike).
    Lock,
    /// A lock hash with a fencing-token counter beside it (`FencedLock`); the hash may be gone
    /// while the counter stays.
    FencedLock,
    /// A lock hash with a waiter queue beside it (`FairLock`); the hash may be gone while waiters
    /// are queued.
    FairLock,
    /// A read-write lock hash (it has a `mode` field).
    ReadWriteLock,
    /// A counter: a `Semaphore`'s permits or a `CountDownLatch`'s count, with nobody waiting on
    /// it (Redis then cannot tell which, nor tell it from an application's counter).
    Counter,
    /// A `Semaphore`'s permits: a number that waiters are subscribed to as a semaphore's.
    Semaphore,
    /// A `CountDownLatch`'s count: a number that waiters are subscribed to as a latch's.
    CountDownLatch,
    /// A `PermitExpirableSemaphore`: permits available, and the permits out with their deadlines.
    PermitExpirableSemaphore,
    /// Some other Redis value (its `TYPE`), not a crosslock object (a hash whose fields are not
    /// hold counts is `Other("hash")`).
    Other(String),
}

impl ObjectKind {
    /// A short name: `absent`, `lock`, `fenced_lock`, `fair_lock`, `read_write_lock`, `counter`,
    /// `semaphore`, `count_down_latch`, `permit_expirable_semaphore`, or the Redis type of
    /// anything else.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::ObjectKind::FairLock.as_str(), "fair_lock");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            ObjectKind::Absent => "absent",
            ObjectKind::Lock => "lock",
            ObjectKind::FencedLock => "fenced_lock",
            ObjectKind::FairLock => "fair_lock",
            ObjectKind::ReadWriteLock => "read_write_lock",
            ObjectKind::Counter => "counter",
            ObjectKind::Semaphore => "semaphore",
            ObjectKind::CountDownLatch => "count_down_latch",
            ObjectKind::PermitExpirableSemaphore => "permit_expirable_semaphore",
            ObjectKind::Other(t) => t,
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holder of a lock.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// for h in client.inspect("orders:42").await?.holders {
///     println!("{} (client {}) holds it {} time(s)", h.holder, h.client_id, h.holds);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The holder string as stored: `<client-uuid>:<n>` (Redisson: `<client-uuid>:<thread-id>`).
    pub holder: String,
    /// The client part of the holder (the UUID), or the whole holder if it has no `:`.
    pub client_id: String,
    /// How many times it holds the lock (re-entries).
    pub holds: i64,
    /// Whether this is the write hold of a read-write lock (its field ends with `:write`).
    pub write: bool,
    /// For a reader of a read-write lock: the remaining lease of each of its read holds (a hold
    /// whose lease key is gone is left out).
    pub read_leases: Vec<Duration>,
    /// The process behind the holder, when it is a crosslock client connected to the node that
    /// has the key (found by its connection name in `CLIENT LIST`, see [`crate::naming`]);
    /// `None` for a Redisson holder, a client gone, or a server that refuses `CLIENT LIST`.
    pub process: Option<crate::ProcessInfo>,
}

/// A waiter queued on a fair lock.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// for (place, w) in client.inspect("printer").await?.queue.iter().enumerate() {
///     println!("#{}: {} (deadline {:?})", place + 1, w.holder, w.deadline_ms);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// Its holder string.
    pub holder: String,
    /// The deadline (epoch milliseconds) past which it is skipped as dead unless it tries again;
    /// `None` if the queue entry has no deadline.
    pub deadline_ms: Option<i64>,
    /// The process behind it, as [`HolderInfo::process`].
    pub process: Option<crate::ProcessInfo>,
}

/// A permit out of a permit-expirable semaphore.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// for p in client.inspect("slots").await?.permits {
///     println!("permit {} expires at {:?}", p.id, p.expires_ms);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitInfo {
    /// The permit id, 32 hex characters (as Redisson shows it).
    pub id: String,
    /// When it expires (epoch milliseconds); `None` for a permit without expiry.
    pub expires_ms: Option<i64>,
}

/// A snapshot of the object at a name: see [`Client::inspect`].
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// let seen = client.inspect("orders:42").await?;
/// println!("{} is a {} with {} holder(s), {:?} left", seen.name, seen.kind, seen.holders.len(), seen.ttl);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The name inspected.
    pub name: String,
    /// What lives there.
    pub kind: ObjectKind,
    /// The main key's remaining time to live (a lock's lease); `None` when there is no key or it
    /// never expires.
    pub ttl: Option<Duration>,
    /// The holders of a lock, in the hash's order.
    pub holders: Vec<HolderInfo>,
    /// A read-write lock's mode: `read` or `write`.
    pub mode: Option<String>,
    /// A fair lock's waiters, head first.
    pub queue: Vec<QueuedWaiter>,
    /// A fenced lock's last token handed out.
    pub token: Option<i64>,
    /// A counter's value: a semaphore's available permits or a latch's count.
    pub count: Option<i64>,
    /// A permit-expirable semaphore's permits out.
    pub permits: Vec<PermitInfo>,
}

/// Permits stored without expiry carry this score (Redisson's).
const NO_EXPIRY: i64 = 922_337_203_685_477;

/// The client part of a holder string (`<client-uuid>:<n>`, or a read-write lock's
/// `<client-uuid>:<n>:write`).
fn client_part(holder: &str) -> &str {
    holder.split(':').next().unwrap_or(holder)
}

impl Inspection {
    /// Fills in each holder's and waiter's process from a `CLIENT LIST` reply.
    fn name_processes(&mut self, client_list: &str) {
        let found = crate::naming::processes(client_list);
        let find = |holder: &str| {
            let id = crate::naming::id_prefix(client_part(holder));
            found
                .iter()
                .find(|(prefix, _)| *prefix == id)
                .map(|(_, p)| p.clone())
        };
        for h in &mut self.holders {
            h.process = find(&h.holder);
        }
        for w in &mut self.queue {
            w.process = find(&w.holder);
        }
    }

    /// Whether a lock held under a watchdog of `watchdog_timeout` was renewed within the last
    /// renewal period (a third of it): its TTL is then above two thirds of the timeout, less a
    /// second of slack. `None` when nothing is held. `Some(false)` means the holder is dead,
    /// paused, cut off, or holds with an explicit lease shorter than the watchdog's.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let seen = client.inspect("orders:42").await?;
    /// if seen.renewed_within_period(Duration::from_secs(30)) == Some(false) {
    ///     println!("the holder looks dead, paused or cut off");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn renewed_within_period(&self, watchdog_timeout: Duration) -> Option<bool> {
        if self.holders.is_empty() {
            return None;
        }
        let floor = (watchdog_timeout * 2 / 3).saturating_sub(Duration::from_secs(1));
        Some(match self.ttl {
            None => true, // no expiry: nothing can run out
            Some(ttl) => ttl >= floor,
        })
    }
}

/// Seconds as the inspector prints them: `1.234 s` below ten seconds, `12.3 s` above.
fn secs(d: Option<Duration>) -> String {
    match d {
        None => "no expiry".to_owned(),
        Some(d) if d < Duration::from_secs(10) => format!("{:.3} s", d.as_secs_f64()),
        Some(d) => format!("{:.1} s", d.as_secs_f64()),
    }
}

/// An epoch-ms deadline as "in 12.3 s" from now.
fn from_now(epoch_ms: Option<i64>) -> String {
    let Some(at) = epoch_ms else {
        return "no deadline".to_owned();
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    format!("in {:.1} s", (at - now) as f64 / 1000.0)
}

impl Inspection {
    /// A few lines a person can read at 3 a.m.: the kind, the lease left (and whether a holder
    /// under a watchdog of `watchdog_timeout` looks renewed), each holder with its holds, the
    /// queue, the token, the count, the permits. What the `crosslock inspect` command prints.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// println!("{}", client.inspect("orders:42").await?.describe(Duration::from_secs(30)));
    /// # Ok(()) }
    /// ```
    pub fn describe(&self, watchdog_timeout: Duration) -> String {
        if self.kind == ObjectKind::Absent {
            return format!("{}: nothing there (free)", self.name);
        }
        let mut lines = vec![format!(
            "{}: {}{}",
            self.name,
            self.kind.as_str().replace('_', " "),
            self.mode
                .as_deref()
                .map(|m| format!(", {m} mode"))
                .unwrap_or_default()
        )];
        if !self.holders.is_empty() {
            let mut lease = format!("  lease left: {}", secs(self.ttl));
            if self.renewed_within_period(watchdog_timeout) == Some(false) {
                lease.push_str(&format!(
                    "  (not renewed within the last {:.0} s: holder dead, paused, cut off, or holding with a short lease)",
                    watchdog_timeout.as_secs_f64() / 3.0
                ));
            }
            lines.push(lease);
            for h in &self.holders {
                let what = if h.write {
                    "writer"
                } else if self.mode.is_some() {
                    "reader"
                } else {
                    "holder"
                };
                let mut line = format!("  {what} {} × {}", h.holder, h.holds);
                if let Some(p) = &h.process {
                    line.push_str(&format!(" — {p}"));
                }
                if !h.read_leases.is_empty() {
                    let each: Vec<String> = h.read_leases.iter().map(|l| secs(Some(*l))).collect();
                    line.push_str(&format!("; read holds expire in {}", each.join(", ")));
                }
                lines.push(line);
            }
        } else if matches!(
            self.kind,
            ObjectKind::Lock
                | ObjectKind::FencedLock
                | ObjectKind::FairLock
                | ObjectKind::ReadWriteLock
        ) {
            lines.push("  free".to_owned());
        }
        for (i, w) in self.queue.iter().enumerate() {
            lines.push(format!(
                "  waiting #{}: {}{} (skipped as dead {} unless it tries again)",
                i + 1,
                w.holder,
                w.process
                    .as_ref()
                    .map(|p| format!(" — {p}"))
                    .unwrap_or_default(),
                from_now(w.deadline_ms)
            ));
        }
        if let Some(token) = self.token {
            lines.push(format!("  last fencing token: {token}"));
        }
        if let Some(count) = self.count {
            let label = match self.kind {
                ObjectKind::PermitExpirableSemaphore | ObjectKind::Semaphore => "permits available",
                ObjectKind::CountDownLatch => "count",
                _ => "count (semaphore permits or latch count)",
            };
            lines.push(format!("  {label}: {count}"));
        }
        for p in &self.permits {
            lines.push(format!(
                "  permit {} expires {}",
                p.id,
                from_now(p.expires_ms)
            ));
        }
        lines.join("\n")
    }

    /// One tab-separated line: name, kind, state. What `crosslock list` prints per object.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// for name in client.scan("orders:*", 100).await? {
    ///     println!("{}", client.inspect(&name).await?.summary());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn summary(&self) -> String {
        let mut state = if !self.holders.is_empty() {
            let who: Vec<String> = self
                .holders
                .iter()
                .map(|h| match &h.process {
                    Some(p) => format!("{}×{} ({} at {})", h.holder, h.holds, p.name, p.address),
                    None => format!("{}×{}", h.holder, h.holds),
                })
                .collect();
            format!("held by {}, {} left", who.join(", "), secs(self.ttl))
        } else if let Some(count) = self.count {
            format!("count {count}")
        } else {
            "free".to_owned()
        };
        if !self.queue.is_empty() {
            state.push_str(&format!(", {} waiting", self.queue.len()));
        }
        format!("{}\t{}\t{state}", self.name, self.kind)
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other)
            .and_then(|s| s.parse::<f64>().ok())
            .map(|f| f as i64),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        _ => &[],
    }
}

fn hex(v: &Value) -> String {
    match v {
        Value::BulkString(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
        other => text(other).unwrap_or_default(),
    }
}

fn parse(name: &str, reply: &[Value]) -> Result<Inspection> {
    let bad = || {
        Error::new(
            crate::ErrorKind::Redis,
            format!("inspecting '{name}': an unexpected reply from Redis"),
        )
    };
    if reply.len() != 9 {
        return Err(bad());
    }
    let redis_type = text(&reply[0]).ok_or_else(bad)?;
    let pttl = int(&reply[1]).unwrap_or(-2);
    let ttl = (pttl >= 0).then(|| Duration::from_millis(pttl as u64));
    let hash = items(&reply[2]);
    let queue_names = items(&reply[4]);
    let deadlines = items(&reply[5]);
    let token = int(&reply[6]);
    let permits_raw = items(&reply[7]);
    let leases = items(&reply[8]);

    let mut holders = Vec::new();
    let mut mode = None;
    let mut lock_shaped = true; // every field but `mode` a hold count
    for pair in hash.chunks(2) {
        let (Some(field), Some(count)) = (pair.first().and_then(text), pair.get(1)) else {
            continue;
        };
        if field == "mode" {
            mode = text(count);
            continue;
        }
        let write = field.ends_with(":write") && mode_field_present(hash);
        let base = if write {
            &field[..field.len() - 6]
        } else {
            &field[..]
        };
        let client_id = base.rsplit_once(':').map_or(base, |(c, _)| c).to_owned();
        let read_leases = leases
            .chunks(2)
            .find(|p| p.first().and_then(text).as_deref() == Some(field.as_str()))
            .and_then(|p| p.get(1).and_then(text))
            .map(|each| {
                each.split(',')
                    .filter_map(|ms| ms.parse::<i64>().ok())
                    .filter(|ms| *ms >= 0)
                    .map(|ms| Duration::from_millis(ms as u64))
                    .collect()
            })
            .unwrap_or_default();
        let holds = match count {
            Value::BulkString(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|t| t.parse::<i64>().ok()),
            other => int(other),
        };
        lock_shaped &= holds.is_some();
        holders.push(HolderInfo {
            holder: field.clone(),
            client_id,
            holds: holds.unwrap_or(0),
            write,
            read_leases,
            process: None,
        });
    }
    let scores: Vec<(String, Option<i64>)> = deadlines
        .chunks(2)
        .filter_map(|p| Some((p.first().and_then(text)?, p.get(1).and_then(int))))
        .collect();
    let queue = queue_names
        .iter()
        .filter_map(text)
        .map(|holder| QueuedWaiter {
            deadline_ms: scores
                .iter()
                .find(|(h, _)| *h == holder)
                .and_then(|(_, s)| *s),
            holder,
            process: None,
        })
        .collect::<Vec<_>>();
    let permits = permits_raw
        .chunks(2)
        .filter_map(|p| {
            let id = hex(p.first()?);
            let score = p.get(1).and_then(int);
            Some(PermitInfo {
                id,
                expires_ms: score.filter(|s| *s != NO_EXPIRY),
            })
        })
        .collect::<Vec<_>>();

    let kind = match redis_type.as_str() {
        "hash" if !lock_shaped => ObjectKind::Other("hash".to_owned()),
        "hash" if mode.is_some() => ObjectKind::ReadWriteLock,
        "hash" if !queue.is_empty() || !scores.is_empty() => ObjectKind::FairLock,
        "hash" if token.is_some() => ObjectKind::FencedLock,
        "hash" => ObjectKind::Lock,
        "string" if !permits.is_empty() => ObjectKind::PermitExpirableSemaphore,
        "string" => ObjectKind::Counter,
        "none" if !queue.is_empty() || !scores.is_empty() => ObjectKind::FairLock,
        "none" if token.is_some() => ObjectKind::FencedLock,
        "none" if !permits.is_empty() => ObjectKind::PermitExpirableSemaphore,
        "none" => ObjectKind::Absent,
        other => ObjectKind::Other(other.to_owned()),
    };
    if matches!(kind, ObjectKind::Other(_)) {
        holders.clear(); // not a lock: its fields are no holders
        mode = None;
    }
    let count = if redis_type == "string" {
        int(&reply[3])
    } else {
        None
    };
    Ok(Inspection {
        name: name.to_owned(),
        kind,
        ttl,
        holders,
        mode,
        queue,
        token,
        count,
        permits,
    })
}

fn mode_field_present(hash: &[Value]) -> bool {
    hash.chunks(2)
        .any(|p| p.first().and_then(text).as_deref() == Some("mode"))
}

/// The object a key belongs to: its own name, the name a sibling key (a queue, a token counter,
/// permit deadlines) stands beside, or `None` for keys that never stand alone (lease keys, unlock
/// latches).
fn object_of(key: &str) -> Option<String> {
    if key.contains(&format!(":{}:", layout::RW_TIMEOUT)) || key.starts_with(layout::UNLOCK_LATCH) {
        return None;
    }
    let unbrace = |s: &str| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        Some(inner) if !inner.contains(['{', '}']) => inner.to_owned(),
        _ => s.to_owned(),
    };
    for prefix in layout::SIBLING_PREFIXES {
        if let Some(rest) = key.strip_prefix(prefix).and_then(|k| k.strip_prefix(':')) {
            return Some(unbrace(rest));
        }
    }
    if let Some(rest) = key
        .strip_suffix(layout::PERMIT_TIMEOUTS)
        .and_then(|k| k.strip_suffix(':'))
        && rest.starts_with('{')
        && rest.ends_with('}')
    {
        return Some(unbrace(rest));
    }
    Some(key.to_owned())
}

impl Client {
    /// A snapshot of whatever lives at `name`, as Redis has it now: its kind, its lease, each
    /// holder with its hold count (and a reader's per-hold leases), a fair lock's queue with each
    /// waiter's deadline, a fenced lock's last token, a counter's value, a permit-expirable
    /// semaphore's permits with their expiries. Read in one script call; nothing is changed.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name, and the
    /// connection's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let seen = client.inspect("orders:42").await?;
    /// for h in &seen.holders {
    ///     println!("{} holds {} time(s), {:?} left", h.holder, h.holds, seen.ttl);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads (one script that changes nothing).
    pub async fn inspect(&self, name: &str) -> Result<Inspection> {
        self.inspect_with(name, true).await
    }

    /// [`inspect`](Self::inspect); without `processes` only the script's snapshot (what a
    /// watch takes every interval: no `CLIENT LIST`, no `PUBSUB NUMSUB` each time).
    pub(crate) async fn inspect_with(&self, name: &str, processes: bool) -> Result<Inspection> {
        let name = check_name(self, name, "object")?;
        let cx = self.state().await?;
        let queue = layout::fair_queue(&name);
        let deadlines = layout::fair_timeouts(&name);
        let token = layout::fenced_token(&name);
        let permits = layout::permit_timeouts(&name);
        let reader_prefix = layout::tagged(&name);
        let reply: Vec<Value> = cx
            .conn
            .eval(
                &scripts::INSPECT,
                &[&name, &queue, &deadlines, &token, &permits],
                &[&reader_prefix.as_str()],
                Some(&name),
            )
            .await?;
        let mut seen = parse(&name, &reply)?;
        if !processes {
            return Ok(seen);
        }
        if seen.kind == ObjectKind::Counter {
            // A semaphore and a latch are both a number; their waiters' channels tell them
            // apart (one more round trip, only for a number).
            let channels = [
                layout::semaphore_channel(&name),
                layout::latch_channel(&name),
            ];
            let mut cmd = redis::cmd("PUBSUB");
            cmd.arg(if cx.conn.publish_command() == "spublish" {
                "SHARDNUMSUB"
            } else {
                "NUMSUB"
            });
            cmd.arg(&channels[0]).arg(&channels[1]);
            if let Ok(counts) = cx
                .conn
                .query::<Vec<(String, i64)>>(&cmd, None, What::Connection)
                .await
            {
                let waiting = |c: &str| counts.iter().any(|(channel, n)| channel == c && *n > 0);
                if waiting(&channels[0]) {
                    seen.kind = ObjectKind::Semaphore;
                } else if waiting(&channels[1]) {
                    seen.kind = ObjectKind::CountDownLatch;
                }
            }
        }
        if !seen.holders.is_empty() || !seen.queue.is_empty() {
            // A second round trip, only when someone holds or waits; a server that refuses
            // CLIENT LIST (an ACL without it) leaves the processes unknown.
            match cx.conn.client_list(&name).await {
                Ok(list) => seen.name_processes(&list),
                Err(e) => tracing::debug!(
                    target: "crosslock",
                    "inspecting '{name}': CLIENT LIST failed, holders' processes unknown: {e}"
                ),
            }
        }
        Ok(seen)
    }

    /// Deletes the lock at `name` whoever holds it, whatever its kind (a lock, fenced, fair or
    /// read-write lock, as [`inspect`](Self::inspect) finds it), waking its waiters as that kind's
    /// force-unlock does. `Ok(true)` when a lock was deleted, `Ok(false)` when nothing was held.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the name holds something that is
    /// not a lock (a semaphore, a latch, another value): nothing is changed. The connection's
    /// errors.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future after the delete was sent may leave the lock deleted without telling
    /// you which; calling it again is harmless (it answers `Ok(false)` once nothing is held).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// if client.force_unlock_any("orders:42").await? {
    ///     println!("deleted the lock, whatever its kind");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock_any(&self, name: &str) -> Result<bool> {
        let seen = self.inspect(name).await?;
        match seen.kind {
            ObjectKind::Absent => Ok(false),
            ObjectKind::Lock | ObjectKind::FencedLock => self.lock(name)?.force_unlock().await,
            ObjectKind::FairLock => self.fair_lock(name)?.force_unlock().await,
            ObjectKind::ReadWriteLock => {
                let rw = self.read_write_lock(name)?;
                if seen.mode.as_deref() == Some("write") {
                    rw.write().force_unlock().await
                } else {
                    rw.read().force_unlock().await
                }
            }
            other => Err(Error::new(
                crate::ErrorKind::WrongType,
                format!("'{name}' is a {other}, not a lock: force-unlock only deletes locks; nothing was changed"),
            )
            .with_lock(name)),
        }
    }

    /// The names of the crosslock/Redisson objects whose names match `pattern` (Redis glob
    /// syntax, `*` for all), found with `SCAN` (never `KEYS`, so a large database is not blocked),
    /// sorted. An object whose own key is gone but whose sibling key remains (a free fenced lock's
    /// token counter, a fair lock's queue) is listed by its name too; lease keys are left out.
    /// Inspect a name for its details. At most `limit` names are returned.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a `limit` outside [`limits::SCAN_LIMIT`](crate::limits::SCAN_LIMIT);
    /// the connection's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// for name in client.scan("orders:*", 1000).await? {
    ///     println!("{name}: {}", client.inspect(&name).await?.kind);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn scan(&self, pattern: &str, limit: usize) -> Result<Vec<String>> {
        crate::limits::SCAN_LIMIT.check(limit as u64, "scan's limit (how many names)")?;
        let cx = self.state().await?;
        let mut names = std::collections::BTreeSet::new();
        // The names themselves, and the objects that may have no key of their own right now: a
        // free fenced lock (its token counter) and a fair lock whose queue outlives its hash.
        let mut patterns = vec![pattern.to_owned()];
        if !pattern.contains(['{', '}']) {
            patterns.push(layout::fenced_token(pattern));
            patterns.push(layout::fair_queue(pattern));
        }
        'patterns: for pattern in &patterns {
            let mut cursor = 0u64;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let (next, keys): (u64, Vec<String>) =
                    cx.conn.query(&cmd, None, What::Connection).await?;
                names.extend(keys.iter().filter_map(|k| object_of(k)));
                cursor = next;
                if names.len() >= limit {
                    break 'patterns;
                }
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(names.into_iter().take(limit).collect())
    }
}
