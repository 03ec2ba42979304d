//! Running a Lua script: the `EVAL`/`EVALSHA` command with its keys and arguments, and the one
//! NOSCRIPT fallback every way of sending a script goes through.

use crate::scripts::Lua;
use crate::transport::lane::Trip;

/// Room for one script argument (a holder string `<uuid>:<n>` is 38 bytes, a number fewer).
const ARG_GUESS: usize = 40;

/// `EVAL <script> …` (`whole`) or `EVALSHA <sha1> …` with `keys` and `args`.
pub(crate) fn script_cmd(
    script: &Lua,
    keys: &[&str],
    args: &[&dyn ToArg],
    whole: bool,
) -> redis::Cmd {
    let (name, head) = if whole {
        ("EVAL", script.code.as_str())
    } else {
        ("EVALSHA", script.hash())
    };
    // Sized up front: built argument by argument, a command's two buffers would otherwise grow
    // (reallocate) several times each, for every call.
    let data = name.len()
        + head.len()
        + 2
        + keys.iter().map(|key| key.len()).sum::<usize>()
        + args.len() * ARG_GUESS;
    let mut cmd = redis::Cmd::with_capacity(3 + keys.len() + args.len(), data);
    cmd.arg(name).arg(head).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    for arg in args {
        arg.add_to_cmd(&mut cmd);
    }
    cmd
}

/// Script arguments of mixed types.
pub(crate) trait ToArg: Sync {
    fn add_to_cmd(&self, cmd: &mut redis::Cmd);
}

impl<T: redis::ToRedisArgs + Sync> ToArg for T {
    fn add_to_cmd(&self, cmd: &mut redis::Cmd) {
        cmd.arg(self);
    }
}

/// Whether Redis answered `NOSCRIPT`: it does not have the script whose SHA1 was sent (a
/// `SCRIPT FLUSH`, a restart, a failover to a node that never ran it).
pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// A reply to a script call, as the NOSCRIPT fallback reads it.
pub(crate) trait ScriptReply {
    /// Whether the reply is Redis's `NOSCRIPT`.
    fn is_noscript(&self) -> bool;
}

impl<T> ScriptReply for redis::RedisResult<T> {
    fn is_noscript(&self) -> bool {
        self.as_ref().err().is_some_and(is_noscript)
    }
}

impl ScriptReply for Trip {
    fn is_noscript(&self) -> bool {
        matches!(self, Trip::Reply(reply) if reply.is_noscript())
    }
}

/// `None`: the call could not be sent (no room on a lane, the lane gone).
impl<R: ScriptReply> ScriptReply for Option<R> {
    fn is_noscript(&self) -> bool {
        self.as_ref().is_some_and(R::is_noscript)
    }
}

/// `Err`: not sent, the lane's socket failed before the request was written.
impl ScriptReply for std::io::Result<Trip> {
    fn is_noscript(&self) -> bool {
        self.as_ref().is_ok_and(Trip::is_noscript)
    }
}

/// The NOSCRIPT fallback, for every way a script is sent (the multiplexed connection, a master
/// link, a pipeline with `WAIT`, an event loop's lane, a sync caller's own lane): `send(conn,
/// whole)` sends the script over `conn` whole (`EVAL`) or by SHA1 (`EVALSHA`) and hands `conn`
/// back with the reply; a call sent by SHA1 that Redis answers `NOSCRIPT` is sent again whole,
/// once, over the same `conn` (in order behind the first, which was answered: nothing of it is
/// left to overtake). Every other reply is the caller's.
pub(crate) async fn with_noscript_fallback<C, R, F>(
    conn: C,
    whole: bool,
    mut send: impl FnMut(C, bool) -> F,
) -> R
where
    R: ScriptReply,
    F: std::future::Future<Output = (C, R)>,
{
    let (conn, reply) = send(conn, whole).await;
    if !whole && reply.is_noscript() {
        return send(conn, true).await.1;
    }
    reply
}

/// [`with_noscript_fallback`] for a blocking round trip (a sync caller's own lane), whose `send`
/// returns its reply rather than a future of it: the same function, polled once (every future
/// it awaits is ready).
pub(crate) fn with_noscript_fallback_blocking<C, R: ScriptReply>(
    conn: C,
    whole: bool,
    mut send: impl FnMut(&mut C, bool) -> R,
) -> R {
    let fallback = with_noscript_fallback(conn, whole, |mut conn, whole| {
        let reply = send(&mut conn, whole);
        std::future::ready((conn, reply))
    });
    let mut fallback = std::pin::pin!(fallback);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fallback.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(reply) => reply,
        std::task::Poll::Pending => unreachable!("it awaits only ready futures"),
    }
}
