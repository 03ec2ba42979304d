//! `client.inspect` for Node: core's [`crosslock::Inspection`] as plain objects (durations in ms,
//! deadlines in epoch ms).

use napi_derive::napi;

/// The process behind a holder: a crosslock client connected to the node that has the key.
#[napi(object)]
pub struct ProcessInfo {
    /// `rs`, `py` or `js`.
    pub language: String,
    /// Its process id (on its own host).
    pub pid: u32,
    /// The host it connects from, as the server sees it.
    pub host: String,
    /// Its connection's `host:port`, as the server sees it.
    pub address: String,
    /// Its connection name, `<clientName>-<language>-<pid>-<id8>`.
    pub name: String,
}

fn process(p: Option<crosslock::ProcessInfo>) -> Option<ProcessInfo> {
    p.map(|p| ProcessInfo {
        language: p.language,
        pid: p.pid,
        host: p.host,
        address: p.address,
        name: p.name,
    })
}

/// One holder of a lock.
#[napi(object)]
pub struct HolderInfo {
    /// The holder string as stored: `<client-uuid>:<n>` (Redisson: `<client-uuid>:<thread-id>`).
    pub holder: String,
    /// The client part of the holder.
    pub client_id: String,
    /// How many times it holds the lock (re-entries).
    pub holds: f64,
    /// Whether this is a read-write lock's write hold.
    pub write: bool,
    /// For a reader: the ms left on each of its read holds.
    pub read_leases: Vec<f64>,
    /// The process behind it, when it is a crosslock client that can be found; null otherwise
    /// (a Redisson holder, a client gone).
    pub process: Option<ProcessInfo>,
}

/// A waiter queued on a fair lock.
#[napi(object)]
pub struct QueuedWaiter {
    /// Its holder string.
    pub holder: String,
    /// Epoch ms past which it is skipped as dead unless it tries again.
    pub deadline: Option<f64>,
    /// The process behind it, as a holder's.
    pub process: Option<ProcessInfo>,
}

/// A permit out of a permit-expirable semaphore.
#[napi(object)]
pub struct PermitInfo {
    /// 32 hex characters, as Redisson shows it.
    pub id: String,
    /// Epoch ms when it expires; null for a permit without expiry.
    pub expires: Option<f64>,
}

/// What lives at a name, as Redis has it.
#[napi(object)]
pub struct Inspection {
    /// The name inspected.
    pub name: String,
    /// `absent`, `lock`, `fenced_lock`, `fair_lock`, `read_write_lock`, `semaphore` or
    /// `count_down_latch` (a number with waiters subscribed as that kind's), `counter` (a number
    /// nobody waits on), `permit_expirable_semaphore`, or the Redis type of anything else.
    pub kind: String,
    /// Ms the main key has left (a lock's lease); null without a key or an expiry.
    pub ttl: Option<f64>,
    /// The holders of a lock.
    pub holders: Vec<HolderInfo>,
    /// A read-write lock's mode: `read` or `write`.
    pub mode: Option<String>,
    /// A fair lock's waiters, head first.
    pub queue: Vec<QueuedWaiter>,
    /// A fenced lock's last token handed out.
    pub token: Option<f64>,
    /// A counter's value: a semaphore's permits or a latch's count.
    pub count: Option<f64>,
    /// A permit-expirable semaphore's permits out.
    pub permits: Vec<PermitInfo>,
}

impl From<crosslock::Inspection> for Inspection {
    fn from(i: crosslock::Inspection) -> Self {
        Inspection {
            kind: i.kind.as_str().to_owned(),
            ttl: i.ttl.map(|d| d.as_millis() as f64),
            holders: i
                .holders
                .into_iter()
                .map(|h| HolderInfo {
                    holder: h.holder,
                    client_id: h.client_id,
                    holds: h.holds as f64,
                    write: h.write,
                    read_leases: h.read_leases.iter().map(|d| d.as_millis() as f64).collect(),
                    process: process(h.process),
                })
                .collect(),
            mode: i.mode,
            queue: i
                .queue
                .into_iter()
                .map(|w| QueuedWaiter {
                    holder: w.holder,
                    deadline: w.deadline_ms.map(|d| d as f64),
                    process: process(w.process),
                })
                .collect(),
            token: i.token.map(|t| t as f64),
            count: i.count.map(|c| c as f64),
            permits: i
                .permits
                .into_iter()
                .map(|p| PermitInfo {
                    id: p.id,
                    expires: p.expires_ms.map(|e| e as f64),
                })
                .collect(),
            name: i.name,
        }
    }
}

/// An inspection with core's text forms (for the `crosslock` command).
#[napi(object)]
pub struct Described {
    /// The data.
    pub inspection: Inspection,
    /// A few lines a person can read.
    pub text: String,
    /// One tab-separated line: name, kind, state.
    pub line: String,
}
