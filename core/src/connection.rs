//! Connections to the deployment, behind one type whatever its topology.
//!
//! Only a single node ships today. Everything else in the crate talks to [`Conn`] through a few
//! operations (run a script on the node owning a key, publish command to use, subscribe), so
//! Sentinel and Cluster slot in here without touching the lock types.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion};

use crate::scripts::Lua;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result, What};

/// Where and how to connect, parsed from the user's URL.
#[derive(Clone)]
pub(crate) struct Endpoint {
    info: ConnectionInfo,
    /// PEM root certificates to trust instead of the built-in roots (`rediss://` only).
    tls_ca: Option<Vec<u8>>,
    /// `host:port` (or the socket path), safe to print: never contains a password.
    pub(crate) address: String,
}

impl Endpoint {
    pub(crate) fn parse(url: &str, tls_ca: Option<Vec<u8>>) -> Result<Self> {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(Error::invalid(format!(
                "'{}' is not a Redis URL; write redis://[user:password@]host:port/db (or rediss:// \
                 for TLS)",
                redact(url)
            )));
        }
        let info = url.into_connection_info().map_err(|e| {
            Error::invalid(format!(
                "cannot parse the Redis URL '{}': {e}; write redis://[user:password@]host:port/db",
                redact(url)
            ))
        })?;
        let address = match info.addr() {
            ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
            ConnectionAddr::Unix(path) => path.display().to_string(),
            _ => "the configured address".to_owned(),
        };
        if tls_ca.is_some() && !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
            return Err(Error::invalid(format!(
                "a TLS CA certificate was given but '{}' is not a rediss:// URL",
                redact(url)
            )));
        }
        Ok(Endpoint {
            info,
            address,
            tls_ca,
        })
    }

    fn client(&self, protocol: ProtocolVersion) -> Result<redis::Client> {
        let settings = self.info.redis_settings().clone().set_protocol(protocol);
        let info = self.info.clone().set_redis_settings(settings);
        let client = match &self.tls_ca {
            Some(pem) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
            None => redis::Client::open(info),
        };
        client.map_err(|e| {
            Error::invalid(format!(
                "cannot set up the connection to {}: {e}",
                self.address
            ))
            .with_source(e)
        })
    }
}

/// Hides the password of a URL before it goes into a message.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}:***{}", &url[..scheme_end + 3], user, &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Timeouts for the connections of one client.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

/// A connection to the deployment: commands and scripts.
///
/// A RESP3 connection manager: when the server closes the connection (an idle `timeout`, a
/// `CLIENT KILL`, a restart) the manager hears it at once and reconnects before the next command
/// needs it, and a keepalive `PING` keeps an otherwise idle connection from being closed at all.
/// Every command is bounded by the response timeout, whatever the manager is doing underneath
/// (reconnecting included).
#[derive(Clone)]
pub(crate) struct Conn {
    manager: ConnectionManager,
    response_timeout: Duration,
    /// When a command was last sent (ms since `epoch`), for the keepalive.
    last_used: Arc<AtomicU64>,
    epoch: Instant,
    /// The scripts this connection has run (by SHA1): the others are sent whole (see
    /// [`crate::scripts`]).
    loaded: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    health: Arc<Health>,
}

/// Whether a connection is up, as its last command found it: the one place that logs a
/// connection going down and coming back (once per change, not per failed command).
struct Health {
    /// `command` or `subscription`.
    role: &'static str,
    /// `host:port`: never the password.
    address: String,
    down: std::sync::atomic::AtomicBool,
}

impl Health {
    fn lost(&self, why: &dyn std::fmt::Display) {
        if !self.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "crosslock",
                "{} connection to {} lost ({why}); reconnecting",
                self.role,
                self.address
            );
        }
    }

    fn answered(&self) {
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed) {
            tracing::info!(
                target: "crosslock",
                "{} connection to {} is back",
                self.role,
                self.address
            );
        }
    }
}

/// How long a connection may stay idle before the keepalive pings it. Well under the smallest
/// idle `timeout` a server can be configured with (1 s is the smallest non-zero value).
const KEEPALIVE_IDLE: Duration = Duration::from_millis(400);

impl Conn {
    /// Connects the command connection; its keepalive runs until `stop` is cancelled.
    pub(crate) async fn connect(
        endpoint: &Endpoint,
        timeouts: Timeouts,
        stop: CancellationToken,
    ) -> Result<Self> {
        let client = endpoint.client(ProtocolVersion::RESP3)?;
        // The manager reconnects by itself when the server closes the connection; its
        // disconnection notice is how that gets logged.
        let (pushes, mut notices) = tokio::sync::mpsc::unbounded_channel();
        let config = manager_config(timeouts).set_push_sender(pushes);
        let manager = connect_within(
            endpoint,
            timeouts,
            client.get_connection_manager_with_config(config),
        )
        .await?;
        let conn = Conn::new(manager, timeouts, "command", endpoint);
        tracing::debug!(target: "crosslock", "connected to {}", endpoint.address);
        let health = Arc::downgrade(&conn.health);
        crate::runtime::spawn(async move {
            while let Some(notice) = notices.recv().await {
                let Some(health) = health.upgrade() else {
                    return;
                };
                if notice.kind == redis::PushKind::Disconnection {
                    health.lost(&"the server closed it");
                }
            }
        });
        crate::runtime::spawn(keepalive(conn.clone(), stop));
        Ok(conn)
    }

    /// Connects a RESP3 connection whose pushes (messages, disconnections) go to `pushes`, and
    /// which re-subscribes by itself after reconnecting.
    pub(crate) async fn connect_subscriber(
        endpoint: &Endpoint,
        timeouts: Timeouts,
        pushes: UnboundedSender<redis::PushInfo>,
    ) -> Result<Self> {
        let client = endpoint.client(ProtocolVersion::RESP3)?;
        let config = manager_config(timeouts)
            .set_push_sender(pushes)
            .set_automatic_resubscription();
        let manager = connect_within(
            endpoint,
            timeouts,
            client.get_connection_manager_with_config(config),
        )
        .await?;
        Ok(Conn::new(manager, timeouts, "subscription", endpoint))
    }

    fn new(
        manager: ConnectionManager,
        timeouts: Timeouts,
        role: &'static str,
        endpoint: &Endpoint,
    ) -> Self {
        Conn {
            manager,
            response_timeout: timeouts.response,
            last_used: Arc::new(AtomicU64::new(0)),
            epoch: Instant::now(),
            loaded: Arc::default(),
            health: Arc::new(Health {
                role,
                address: endpoint.address.clone(),
                down: false.into(),
            }),
        }
    }

    /// Logs the connection going down (once) when `e` says it was lost.
    pub(crate) fn note_lost(&self, why: &dyn std::fmt::Display) {
        self.health.lost(why);
    }

    /// Logs the connection coming back (once) after it was lost.
    pub(crate) fn note_answered(&self) {
        self.health.answered();
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_used.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_used.load(Ordering::Relaxed)))
    }

    /// The response timeout every command of this connection is bounded by.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// The command a script uses to notify waiters of `channel` (`publish`; `spublish` once
    /// sharded pub/sub on a cluster is supported).
    pub(crate) fn publish_command(&self) -> &'static str {
        "publish"
    }

    /// Runs `script` with `keys` and `args`; errors are attributed to `subject`. Fails with
    /// [`ErrorKind::Unavailable`] when no answer comes within the response timeout.
    ///
    /// The first run on this connection sends the script whole (`EVAL`), the others `EVALSHA`
    /// (falling back to `EVAL` on `NOSCRIPT`): a first run whose caller stops waiting still runs
    /// once Redis gets to it.
    pub(crate) async fn eval<'w, T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let subject = subject.into();
        let mut manager = self.manager.clone();
        self.touch();
        let known = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(script.hash());
        let reply = if known {
            let mut invocation = script.script.prepare_invoke();
            for key in keys {
                invocation.key(*key);
            }
            for arg in args {
                arg.push(&mut invocation);
            }
            tokio::time::timeout(self.response_timeout, invocation.invoke_async(&mut manager)).await
        } else {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(script.code).arg(keys.len());
            for key in keys {
                cmd.arg(*key);
            }
            for arg in args {
                arg.push_cmd(&mut cmd);
            }
            let reply =
                tokio::time::timeout(self.response_timeout, cmd.query_async(&mut manager)).await;
            if let Ok(Ok(_)) = &reply {
                self.loaded
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(script.hash().to_owned());
            }
            reply
        };
        self.settle(reply, subject)
    }

    /// The result of one command bounded by the response timeout: its reply, or the error that
    /// says what happened, noting on the way whether the connection was lost or answered.
    fn settle<T>(
        &self,
        reply: std::result::Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
        subject: What<'_>,
    ) -> Result<T> {
        match reply {
            Ok(Ok(value)) => {
                self.health.answered();
                Ok(value)
            }
            Ok(Err(e)) => {
                self.forget_scripts_if_lost(&e);
                Err(Error::from_redis(e, subject))
            }
            Err(_) => {
                self.no_answer();
                Err(Error::no_answer(subject, self.response_timeout))
            }
        }
    }

    /// After the connection may have been lost, the next connection may reach a server that
    /// restarted (an empty script cache): each script's next run is sent whole again.
    fn forget_scripts(&self) {
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn forget_scripts_if_lost(&self, e: &redis::RedisError) {
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
        {
            self.forget_scripts();
            self.health.lost(e);
        } else {
            self.health.answered();
        }
    }

    fn no_answer(&self) {
        self.forget_scripts();
        self.health.lost(&format_args!(
            "no answer within {:?}",
            self.response_timeout
        ));
    }

    /// Runs one plain command, bounded by the response timeout.
    pub(crate) async fn query<'w, T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let subject = subject.into();
        let mut manager = self.manager.clone();
        self.touch();
        let reply =
            tokio::time::timeout(self.response_timeout, cmd.query_async(&mut manager)).await;
        self.settle(reply, subject)
    }

    pub(crate) async fn subscribe(&self, channel: &str) -> Result<()> {
        let mut manager = self.manager.clone();
        self.touch();
        match tokio::time::timeout(self.response_timeout, manager.subscribe(channel)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(e, What::Connection)),
            Err(_) => Err(Error::no_answer(What::Connection, self.response_timeout)),
        }
    }

    /// Subscribes to every channel matching `pattern` (PSUBSCRIBE).
    pub(crate) async fn psubscribe(&self, pattern: &str) -> Result<()> {
        let mut manager = self.manager.clone();
        self.touch();
        match tokio::time::timeout(self.response_timeout, manager.psubscribe(pattern)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(e, What::Connection)),
            Err(_) => Err(Error::no_answer(What::Connection, self.response_timeout)),
        }
    }

    pub(crate) async fn unsubscribe(&self, channel: &str) -> Result<()> {
        let mut manager = self.manager.clone();
        self.touch();
        match tokio::time::timeout(self.response_timeout, manager.unsubscribe(channel)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(e, What::Connection)),
            Err(_) => Err(Error::no_answer(What::Connection, self.response_timeout)),
        }
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.query::<()>(&redis::cmd("PING"), What::Connection)
            .await
    }
}

/// Pings `conn` whenever it has been idle for [`KEEPALIVE_IDLE`], so a server with an idle
/// `timeout` never closes it, and a connection the server dropped is noticed (and replaced)
/// before a renewal needs it.
async fn keepalive(conn: Conn, stop: CancellationToken) {
    loop {
        let idle = conn.idle_for();
        let pause = KEEPALIVE_IDLE
            .saturating_sub(idle)
            .max(Duration::from_millis(50));
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.cancelled() => return,
        }
        if conn.idle_for() >= KEEPALIVE_IDLE {
            let _ = conn.ping().await;
        }
    }
}

/// Script arguments of mixed types.
pub(crate) trait ToArg: Sync {
    fn push(&self, invocation: &mut redis::ScriptInvocation<'_>);
    fn push_cmd(&self, cmd: &mut redis::Cmd);
}

impl<T: redis::ToRedisArgs + Sync> ToArg for T {
    fn push(&self, invocation: &mut redis::ScriptInvocation<'_>) {
        invocation.arg(self);
    }

    fn push_cmd(&self, cmd: &mut redis::Cmd) {
        cmd.arg(self);
    }
}

fn manager_config(timeouts: Timeouts) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(Some(timeouts.response))
        .set_number_of_retries(3)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

async fn connect_within<F>(
    endpoint: &Endpoint,
    timeouts: Timeouts,
    connecting: F,
) -> Result<ConnectionManager>
where
    F: std::future::Future<Output = redis::RedisResult<ConnectionManager>>,
{
    let address = &endpoint.address;
    let unreachable = |detail: String| {
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "cannot connect to Redis at {address} within {:?}: {detail}; check that \
                 redis-server runs there and the URL is right",
                timeouts.connect
            ),
        )
    };
    let e = match tokio::time::timeout(timeouts.connect, connecting).await {
        Ok(Ok(manager)) => return Ok(manager),
        Ok(Err(e)) => e,
        Err(_) => return Err(unreachable("no answer".to_owned())),
    };
    let text = e.to_string();
    let error = if matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
        || text.contains("invalid username-password")
        || text.contains("Authentication required")
    {
        Error::new(
            ErrorKind::Auth,
            format!(
                "Redis at {address} refused the credentials in the URL ({e}); fix the user and \
                 password (redis://user:password@host:port/db). Retrying will not help"
            ),
        )
    } else if text.contains("DB index is out of range") || text.contains("invalid DB index") {
        Error::invalid(format!(
            "Redis at {address} has no database {} ({e}); use a database index below the \
             server's `databases` setting (16 by default) in the URL's path",
            endpoint.info.redis_settings().db()
        ))
    } else if text.contains("max number of clients") || refuses_clients(endpoint).await {
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "Redis at {address} refused the connection: it has reached its maximum number of \
                 clients (maxclients); close idle clients or raise maxclients, then retry"
            ),
        )
    } else {
        unreachable(text)
    };
    Err(error.with_source(e))
}

/// Whether the server at `endpoint` greets a new connection with "max number of clients
/// reached". When it does, it closes at once, and a client that already sent its handshake often
/// sees only a reset; a silent probe reads the greeting. (Plain TCP only.)
async fn refuses_clients(endpoint: &Endpoint) -> bool {
    use tokio::io::AsyncReadExt;
    let ConnectionAddr::Tcp(host, port) = endpoint.info.addr() else {
        return false;
    };
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), *port))
            .await
            .ok()?;
        let mut buf = [0u8; 128];
        let n = stream.read(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).contains("max number of clients"))
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(300), probe).await,
        Ok(Some(true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_password() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
    }

    #[test]
    fn rejects_foreign_scheme() {
        let err = Endpoint::parse("http://localhost:6379", None)
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("redis://"));
    }
}
