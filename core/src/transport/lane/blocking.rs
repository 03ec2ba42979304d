//! Lanes: a blocking caller's own thread makes the round trip itself.
//!
//! A caller that blocks anyway (a sync Python method) gains nothing from handing its call to the
//! runtime: that costs a wake-up of a runtime worker, the multiplexed connection's driver writing
//! the request on one worker and reading the reply on another, and a wake-up of the caller to
//! hand the result back, about four context switches for one round trip. A plain client (redis-py)
//! writes on the caller's thread and sleeps in `read` until the reply: one.
//!
//! [`crate::host::begin_here`] polls a call's future once on the caller's thread with this
//! thread marked as [`on_lane`](super::ambient::on_lane). While it is, [`crate::transport::Conn::eval`] sends each script
//! over a *lane*: a plain blocking socket to the same node, borrowed from the node's pool for that
//! one round trip. An uncontended acquire or release thus completes inside that first poll, on the
//! caller's thread, with no hand-off at all; anything that has to wait (a busy lock's wait loop, a
//! connect) returns `Pending` and goes on as a runtime task, on the multiplexed connection, exactly
//! as before.
//!
//! What a lane promises, so that its calls behave as the multiplexed connection's:
//!
//! - **Same outcomes.** A lane runs the same script with the same arguments on the same node, and
//!   its reply goes through the same [`Conn`](crate::transport::Conn) bookkeeping (script cache,
//!   health, Sentinel suspicion). A reply that does not come within the response timeout is a
//!   lost reply (`Unavailable`, "no answer"), settled by the engine as on the multiplexed
//!   connection.
//! - **A lost reply is settled after the request, never before.** On one connection Redis runs
//!   commands in order, so the engine's settle (the owner's hold count, asked after a lost
//!   acquire) always sees what the lost request did. A lane is another connection: a settle sent
//!   on the multiplexed connection could run *before* the late request still waiting in the
//!   lane's socket, and a retried acquire plus that late one would leave a hold nobody counts.
//!   So the lane is not closed when its reply is overdue (closing it would not stop Redis from
//!   running what it already received): a thread keeps reading it until the reply arrives or the
//!   server drops the connection, and until then every command to that node waits
//!   ([`LanePool::settled`]). That wait is bounded by the response timeout, after which the command
//!   is sent all the same: a command never sent could not run when the server answers again (a
//!   give-up, a give-back), and that matters more. So the guarantee is exact as long as the
//!   server answers within the response timeout of the lost request, and best-effort beyond it
//!   (a server frozen longer than that, with both requests waiting in it, may run them in either
//!   order). [`ORPHAN_LIMIT`] bounds the watch.
//! - **Wait limits are kept.** A blocking round trip cannot be raced against a deadline, so an
//!   acquire attempt whose wait limit is shorter than the response timeout takes the usual path.
//! - **No stale sockets.** Only lanes used within [`FRESH`] are reused (a server's idle `timeout`
//!   is at least 1 s), and each is first checked without blocking for a close the server sent
//!   meanwhile (`CLIENT KILL`, a restart): such a lane is dropped, not written to.
//! - **Only where it pays.** Lanes exist for a single server, a Sentinel group's master or each
//!   master of a cluster (found by slot, [`crate::transport::cluster::NodeLanes`]) over TCP or
//!   a Unix socket (not TLS), only while calls come in quick succession (a lone call every few
//!   seconds goes the usual way rather than opening a socket), and at most [`MAX_LANES`] per
//!   node. Never in a forked child: the parent's lanes are its sockets too.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, RedisResult, Value};

use crate::scripts::Lua;
use crate::transport::lane::socket::{Restarting, Socket, write_all};
use crate::transport::script_call::{ToArg, script_cmd, with_noscript_fallback_blocking};
use crate::util::lock;

/// How long an idle lane may be reused, and how recent the last lane call must be for a new one
/// to be opened: well under the smallest idle `timeout` a server can have (1 s).
pub(crate) const FRESH: Duration = Duration::from_millis(500);

/// The most lanes one node's pool opens; callers beyond it take the usual path.
const MAX_LANES: usize = 16;

/// How long a lane whose reply is overdue is watched for it. After that it is reset (closed
/// with `SO_LINGER` 0, so the server's end discards what it has not read) and commands go on.
pub(crate) const ORPHAN_LIMIT: Duration = Duration::from_secs(60);

/// One node's pool of lanes.
pub(crate) struct LanePool {
    info: ConnectionInfo,
    /// The connections' name (see [`crate::naming`]).
    name: Arc<str>,
    connect_timeout: Duration,
    response_timeout: Duration,
    idle: Arc<Mutex<Vec<Lane>>>,
    /// Whether a lane is being opened (in the background, one at a time).
    opening: Arc<std::sync::atomic::AtomicBool>,
    /// Lanes that exist, idle or lent out.
    open: Arc<AtomicUsize>,
    /// Lanes whose reply is overdue (see the module docs).
    overdue: Arc<Overdue>,
    /// When a lane was last asked for (ms since `epoch`).
    asked: AtomicU64,
    epoch: Instant,
    id: u64,
    /// Dropped with the pool: an event loop's lane to a node nobody routes to any more (the old
    /// master after a failover) is closed when the loop finds this gone.
    alive: Arc<()>,
    /// The event loops' lanes to this node, and the connections opened for them not yet taken
    /// into use: retired and closed when the client closes or the pool is dropped, rather than
    /// when their loop next looks for a lane (which a loop that makes no more calls to this
    /// node never does). Shared with the threads that open connections in the background.
    loops: Arc<Mutex<LoopRefs>>,
    /// The process the lanes belong to: a forked child shares their sockets with its parent
    /// and must never use them.
    pid: u32,
}

impl Drop for LanePool {
    fn drop(&mut self) {
        self.retire_loop_lanes();
    }
}

/// What a pool knows of the event loops' use of it (see [`LanePool::loops`]).
#[derive(Default)]
struct LoopRefs {
    lanes: Vec<std::sync::Weak<crate::transport::lane::loop_lane::LoopLane>>,
    parked: Vec<std::sync::Weak<Parked>>,
    /// The client closed (or the pool is being dropped): no more lanes or connections are
    /// noted, and the idle pool takes no more lanes.
    closed: bool,
}

/// A connection opened in the background for an event loop, kept in that loop until a call
/// there takes it into use ([`Parked::take`]). Counted as one of the pool's open lanes until
/// then; closed, and no longer counted, when it is dropped untaken or when the client closes
/// first.
pub(crate) struct Parked {
    socket: Mutex<Option<Socket>>,
    open: Arc<AtomicUsize>,
}

impl Parked {
    /// The connection, for a lane of its loop (which counts it from then on); `None` once the
    /// client closed.
    pub(crate) fn take(&self) -> Option<Socket> {
        lock(&self.socket).take()
    }

    /// Whether the connection is still here to take.
    pub(crate) fn is_parked(&self) -> bool {
        lock(&self.socket).is_some()
    }

    fn close(&self) {
        if self.take().is_some() {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.close();
    }
}

/// Lanes whose reply is overdue, and the signal that one was settled.
#[derive(Default)]
pub(crate) struct Overdue {
    pub(crate) count: AtomicUsize,
    done: tokio::sync::Notify,
}

impl Overdue {
    /// One overdue reply came (or can no longer come).
    pub(crate) fn settle_one(&self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        self.done.notify_waiters();
    }
}

/// Numbers the pools, so an event loop's lanes never outlive theirs under a reused address.
static POOL_IDS: AtomicU64 = AtomicU64::new(1);

/// The outcome of one round trip over a lane.
pub(crate) enum Trip {
    /// The node answered (a value or an error reply), or the socket failed.
    Reply(RedisResult<Value>),
    /// No answer within the response timeout: the lane was closed with the answer still due.
    NoAnswer,
}

impl LanePool {
    /// A pool for the node `info` points at, or `None` where lanes are not used (TLS).
    pub(crate) fn new(
        info: &ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
        name: Arc<str>,
    ) -> Option<Self> {
        match info.addr() {
            ConnectionAddr::Tcp(..) | ConnectionAddr::Unix(_) => Some(LanePool {
                info: info.clone(),
                name,
                connect_timeout,
                response_timeout,
                idle: Arc::default(),
                opening: Arc::default(),
                open: Arc::new(AtomicUsize::new(0)),
                overdue: Arc::default(),
                asked: AtomicU64::new(0),
                epoch: Instant::now(),
                pid: crate::runtime::pid(),
                id: POOL_IDS.fetch_add(1, Ordering::Relaxed),
                alive: Arc::new(()),
                loops: Arc::default(),
            }),
            _ => None,
        }
    }

    /// Runs `script` over a lane: `EVALSHA` when `known`, the whole script otherwise or on
    /// `NOSCRIPT`. `None` when no lane is to be had (the caller then takes the usual path).
    pub(crate) fn eval(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        known: bool,
    ) -> Option<Trip> {
        // A wait limit shorter than the response timeout cannot be kept by a blocking round
        // trip (the deadline could not interrupt it): such an attempt takes the usual path,
        // where it is raced against the deadline.
        if let Some(deadline) = crate::transport::lane::ambient::deadline()
            && deadline.saturating_duration_since(Instant::now()) < self.response_timeout
        {
            return None;
        }
        let mut lane = self.take()?;
        let sent = with_noscript_fallback_blocking(&mut lane, !known, |lane, whole| {
            lane.round_trip(&script_cmd(script, keys, args, whole))
        });
        let trip = match sent {
            Ok(trip) => trip,
            Err(unsent) => return self.unsent(lane, unsent),
        };
        match &trip {
            Trip::Reply(Ok(_)) => self.put_back(lane),
            Trip::Reply(Err(e)) if e.is_unrecoverable_error() || e.is_io_error() => {
                self.discard(lane)
            }
            Trip::Reply(Err(_)) => self.put_back(lane),
            Trip::NoAnswer => self.watch_overdue(lane),
        }
        Some(trip)
    }

    /// Waits (at most `limit`) until no lane of this node has a reply overdue; `false` if one
    /// still has. Every command to the node waits for this first.
    pub(crate) async fn settled(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.overdue.done.notified();
            if self.overdue.count.load(Ordering::Acquire) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.overdue.count.load(Ordering::Acquire) == 0;
            }
        }
    }

    /// Whether a lane of this node has a reply overdue (no waiting).
    pub(crate) fn has_overdue(&self) -> bool {
        self.overdue.count.load(Ordering::Acquire) != 0
    }

    /// Keeps reading `lane`, whose reply is overdue, on a thread of its own until the reply
    /// comes, the server drops the connection or [`ORPHAN_LIMIT`] passes.
    fn watch_overdue(&self, mut lane: Lane) {
        self.overdue.count.fetch_add(1, Ordering::AcqRel);
        let overdue = self.overdue.clone();
        let open = self.open.clone();
        let watch = move || {
            let deadline = Instant::now() + ORPHAN_LIMIT;
            let answered = loop {
                match lane.read_reply() {
                    Err(e) if e.is_timeout() && Instant::now() < deadline => continue,
                    Err(e) if e.is_timeout() => break false,
                    // A reply, or the server's end is gone: nothing more can run from it.
                    _ => break true,
                }
            };
            if !answered {
                lane.reset();
            }
            drop(lane);
            open.fetch_sub(1, Ordering::Relaxed);
            overdue.settle_one();
        };
        if let Err(e) = std::thread::Builder::new()
            .name("crosslock-lane".into())
            .spawn(watch)
        {
            // No thread to spare (the lane was closed with the closure): let the node's commands
            // go on rather than hold them back for good.
            tracing::warn!(target: "crosslock", "cannot watch an overdue reply: {e}");
            self.closed_one();
            self.overdue.settle_one();
        }
    }

    /// A lane that was used within [`FRESH`] and is still open, else a new one if calls come
    /// in quick succession; `None` otherwise.
    fn take(&self) -> Option<Lane> {
        if crate::runtime::pid() != self.pid {
            return None;
        }
        let hot = self.note_asked();
        loop {
            let popped = lock(&self.idle).pop();
            let Some(lane) = popped else { break };
            if lane.used.elapsed() < FRESH && lane.socket.still_open() {
                return Some(lane);
            }
            self.discard(lane);
        }
        if hot {
            // Opened off the caller's thread (a server that does not answer must not hold up a
            // call twice, once for the handshake and once for its own round trip); the calls that
            // come next use it.
            let (idle, loops, open) = (self.idle.clone(), self.loops.clone(), self.open.clone());
            self.open_in_background(move |lane| {
                // Under the loops' lock, which `close` takes before it empties the idle pool: a
                // lane opened after the client closed is closed rather than left idle.
                let loops = lock(&loops);
                if loops.closed {
                    drop(lane);
                    open.fetch_sub(1, Ordering::Relaxed);
                } else {
                    lock(&idle).push(lane);
                }
            });
        }
        None
    }

    /// Notes a call that asked for a lane; says whether the one before came within [`FRESH`]
    /// (calls in quick succession: worth a lane of their own).
    pub(crate) fn note_asked(&self) -> bool {
        let now = self.epoch.elapsed().as_millis() as u64;
        let before = self.asked.swap(now, Ordering::Relaxed);
        now.saturating_sub(before) <= FRESH.as_millis() as u64
    }

    /// Opens a lane for an event loop in the background, if calls come in quick succession and
    /// the pool has room: `deliver` gets its connection (handshake done), parked, on a
    /// blocking-pool thread; not if the client closed meanwhile (the connection is closed).
    pub(crate) fn open_for_loop(&self, deliver: impl FnOnce(Arc<Parked>) + Send + 'static) {
        if crate::runtime::pid() == self.pid && self.note_asked() {
            let (loops, open) = (self.loops.clone(), self.open.clone());
            self.open_in_background(move |lane| {
                let parked = Arc::new(Parked {
                    socket: Mutex::new(Some(lane.socket)),
                    open,
                });
                {
                    let mut loops = lock(&loops);
                    if loops.closed {
                        return; // `parked` is dropped: closed, and no longer counted
                    }
                    loops.parked.retain(|p| p.strong_count() > 0);
                    loops.parked.push(Arc::downgrade(&parked));
                }
                deliver(parked);
            });
        }
    }

    /// Opens one lane on a blocking-pool thread (never more than one at a time) and hands it to
    /// `deliver`; a failure is only logged (calls keep taking the usual path).
    fn open_in_background(&self, deliver: impl FnOnce(Lane) + Send + 'static) {
        if self.opening.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.open.fetch_add(1, Ordering::Relaxed) >= MAX_LANES {
            self.open.fetch_sub(1, Ordering::Relaxed);
            self.opening.store(false, Ordering::Release);
            return;
        }
        let (info, name, connect, response) = (
            self.info.clone(),
            self.name.clone(),
            self.connect_timeout,
            self.response_timeout,
        );
        let (open, opening) = (self.open.clone(), self.opening.clone());
        crate::runtime::spawn_blocking(move || {
            let opened = Socket::connect(&info, connect, response)
                .map_err(redis::RedisError::from)
                .and_then(|socket| Lane::handshake_on(socket, &info, &name));
            match opened {
                Ok(lane) => deliver(lane),
                Err(e) => {
                    tracing::debug!(target: "crosslock", "cannot open a lane: {e}");
                    open.fetch_sub(1, Ordering::Relaxed);
                }
            }
            opening.store(false, Ordering::Release);
        });
    }

    /// One lane of this pool was closed.
    pub(crate) fn closed_one(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether lanes may be used here: not in a forked child (the parent's sockets are its too).
    pub(crate) fn in_this_process(&self) -> bool {
        crate::runtime::pid() == self.pid
    }

    /// Gone once the pool is dropped.
    pub(crate) fn alive(&self) -> std::sync::Weak<()> {
        Arc::downgrade(&self.alive)
    }

    /// Notes an event loop's lane to this node, to retire with the pool; `false` (not noted)
    /// once the client closed: the caller retires it.
    pub(crate) fn add_loop_lane(
        &self,
        lane: std::sync::Weak<crate::transport::lane::loop_lane::LoopLane>,
    ) -> bool {
        let mut loops = lock(&self.loops);
        if loops.closed {
            return false;
        }
        loops.lanes.retain(|lane| lane.strong_count() > 0);
        loops.lanes.push(lane);
        true
    }

    fn retire_loop_lanes(&self) {
        let (lanes, parked) = {
            let mut loops = lock(&self.loops);
            // Under the lock: a lane or connection noted after this is refused instead.
            loops.closed = true;
            (
                std::mem::take(&mut loops.lanes),
                std::mem::take(&mut loops.parked),
            )
        };
        for lane in lanes.iter().filter_map(std::sync::Weak::upgrade) {
            // A reply still due is read to the end by a thread of its own, as always.
            lane.retire(None);
        }
        // Opened for a loop that has not taken them into use, and may never call again.
        for parked in parked.iter().filter_map(std::sync::Weak::upgrade) {
            parked.close();
        }
    }

    pub(crate) fn overdue(&self) -> Arc<Overdue> {
        self.overdue.clone()
    }

    pub(crate) fn open_count(&self) -> Arc<AtomicUsize> {
        self.open.clone()
    }

    pub(crate) fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// Closes the idle lanes that are no longer reused (idle for [`FRESH`] or more).
    pub(crate) fn close_stale(&self) {
        let stale: Vec<Lane> = {
            let mut idle = lock(&self.idle);
            let (stale, fresh) = idle
                .drain(..)
                .partition(|lane| lane.used.elapsed() >= FRESH);
            *idle = fresh;
            stale
        };
        stale.into_iter().for_each(|lane| self.discard(lane));
    }

    /// Closes the idle lanes and retires the event loops' lanes: the client closed.
    pub(crate) fn close(&self) {
        // Marked closed first: a lane opened in the background from now on is closed, not put
        // in the idle pool emptied next.
        self.retire_loop_lanes();
        let idle: Vec<Lane> = std::mem::take(&mut *lock(&self.idle));
        idle.into_iter().for_each(|lane| self.discard(lane));
    }

    fn put_back(&self, mut lane: Lane) {
        lane.used = Instant::now();
        lock(&self.idle).push(lane);
    }

    /// A command `lane` could not write whole. With the connection gone it never ran, and the
    /// caller takes the usual path (`None`) instead of hearing an unknown outcome; after a
    /// timed-out write the response timeout is spent, and the caller hears that Redis did not
    /// answer.
    fn unsent(&self, lane: Lane, error: io::Error) -> Option<Trip> {
        self.discard(lane);
        match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                Some(Trip::Reply(Err(error.into())))
            }
            _ => None,
        }
    }

    fn discard(&self, lane: Lane) {
        drop(lane);
        self.closed_one();
    }
}

/// One blocking RESP3 connection.
struct Lane {
    socket: Socket,
    /// What was read and is not a whole reply yet (a reply overdue may arrive in pieces).
    inbuf: Vec<u8>,
    used: Instant,
    out: Vec<u8>,
}

impl Lane {
    /// Says hello on a fresh `socket` (RESP3, the URL's credentials and database).
    fn handshake_on(socket: Socket, info: &ConnectionInfo, name: &str) -> RedisResult<Lane> {
        let mut lane = Lane {
            socket,
            inbuf: Vec::with_capacity(256),
            used: Instant::now(),
            out: Vec::with_capacity(256),
        };
        let settings = info.redis_settings();
        let mut hello = redis::cmd("HELLO");
        hello.arg(3);
        if let Some(password) = settings.password() {
            hello
                .arg("AUTH")
                .arg(settings.username().unwrap_or("default"))
                .arg(password);
        }
        hello.arg("SETNAME").arg(name);
        // One round trip: HELLO (which names the connection) and the library's name and
        // version, whose refusal by a server before Redis 7.2 is ignored.
        lane.out.clear();
        hello.write_packed_command(&mut lane.out);
        for (field, value) in [
            ("LIB-NAME", crate::naming::LIB_NAME),
            ("LIB-VER", crate::naming::LIB_VER),
        ] {
            redis::cmd("CLIENT")
                .arg("SETINFO")
                .arg(field)
                .arg(value)
                .write_packed_command(&mut lane.out);
        }
        write_all(&mut lane.socket, &lane.out)?;
        lane.read_reply()?.extract_error()?;
        lane.read_reply()?;
        lane.read_reply()?;
        if settings.db() != 0 {
            lane.handshake(redis::cmd("SELECT").arg(settings.db()))?;
        }
        Ok(lane)
    }

    fn handshake(&mut self, cmd: &redis::Cmd) -> RedisResult<()> {
        match self.round_trip(cmd)? {
            Trip::Reply(reply) => reply.map(|_| ()),
            Trip::NoAnswer => Err(io::Error::from(io::ErrorKind::TimedOut).into()),
        }
    }

    /// Writes `cmd` and reads its reply; `Err` when `cmd` could not be written whole (the server
    /// never runs it: a partial command is dropped with the connection, which is then unusable).
    fn round_trip(&mut self, cmd: &redis::Cmd) -> io::Result<Trip> {
        self.out.clear();
        cmd.write_packed_command(&mut self.out);
        write_all(&mut self.socket, &self.out)?;
        Ok(match self.read_reply() {
            Ok(value) => Trip::Reply(value.extract_error()),
            Err(e) if e.is_timeout() => Trip::NoAnswer,
            Err(e) => Trip::Reply(Err(e)),
        })
    }

    /// Reads the next reply (waiting at most the socket's read timeout at a time: a timeout is
    /// an error whose [`is_timeout`](redis::RedisError::is_timeout) is true, and what arrived of
    /// the reply so far stays for the next call). A top-level error reply is a
    /// [`Value::ServerError`], as redis-rs's parser gives it.
    fn read_reply(&mut self) -> RedisResult<redis::Value> {
        loop {
            if let Some(len) = crate::transport::lane::resp::frame_len(&self.inbuf) {
                let reply = crate::transport::lane::resp::parse(&self.inbuf[..len]);
                self.inbuf.drain(..len);
                return reply;
            }
            let mut chunk = [0u8; 4096];
            match Restarting(&mut self.socket).read(&mut chunk) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Closes the connection with a reset (`SO_LINGER` 0) when it is dropped: the server's end
    /// then discards what it has not read yet.
    fn reset(&self) {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on our own open socket with a correctly sized `linger`.
        unsafe {
            libc::setsockopt(
                self.socket.fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Lane, Socket};
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    /// A reply that arrives in pieces across a read timeout is read whole afterwards, as the
    /// thread that reads an overdue lane to the end relies on; replies in one read come one by
    /// one.
    #[test]
    fn a_reply_split_across_a_timeout_is_read_whole_afterwards() {
        let (ours, mut server) = UnixStream::pair().unwrap();
        let socket = Socket::Unix(ours);
        socket.set_read_timeout(Duration::from_millis(20)).unwrap();
        let mut lane = Lane {
            socket,
            inbuf: Vec::new(),
            used: Instant::now(),
            out: Vec::new(),
        };
        server.write_all(b"*2\r\n$5\r\nhel").unwrap();
        let timed_out = lane.read_reply().unwrap_err();
        assert!(timed_out.is_timeout(), "{timed_out:?}");
        server.write_all(b"lo\r\n:7\r\n_\r\n-ERR no\r\n").unwrap();
        assert_eq!(
            lane.read_reply().unwrap(),
            redis::Value::Array(vec![
                redis::Value::BulkString(b"hello".to_vec()),
                redis::Value::Int(7)
            ])
        );
        assert_eq!(lane.read_reply().unwrap(), redis::Value::Nil);
        assert!(lane.read_reply().unwrap().extract_error().is_err());
        drop(server);
        let closed = lane.read_reply().unwrap_err();
        assert!(closed.is_io_error() && !closed.is_timeout(), "{closed:?}");
    }
}
