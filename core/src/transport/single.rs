//! One node's connections: opening a connection manager, naming it, keeping it alive,
//! resubscribing after a reconnect, and saying why a connect failed.

use crate::transport::*;

pub(in crate::transport) async fn open_manager(
    endpoint: &Endpoint,
    node: &Node,
    timeouts: Timeouts,
    pushes: Pushes,
    subscriber: bool,
) -> Result<ConnectionManager> {
    let client = endpoint.client(node, ProtocolVersion::RESP3)?;
    let mut config = manager_config(timeouts).set_push_sender(pushes);
    if subscriber {
        config = config.set_automatic_resubscription();
    }
    connect_within(
        node,
        timeouts,
        client.get_connection_manager_with_config(config),
        Some(&client),
    )
    .await
}

/// Sends `CLIENT SETNAME name` on `manager` (to every node, on a cluster) without waiting for
/// it; a failure is only logged (the name is for operators and the inspector).
pub(in crate::transport) fn name_connection(manager: Handle, name: Arc<str>, response: Duration) {
    crate::runtime::spawn(async move {
        let mut manager = manager;
        let mut cmds = vec![redis::cmd("CLIENT")];
        cmds[0].arg("SETNAME").arg(&*name);
        if let Handle::Cluster(_) = manager {
            // redis-rs's handshake of a cluster node's connection says `redis-rs`: ours is
            // said here (an older server refuses SETINFO; that is ignored).
            for (field, value) in [
                ("LIB-NAME", crate::naming::LIB_NAME),
                ("LIB-VER", crate::naming::LIB_VER),
            ] {
                let mut cmd = redis::cmd("CLIENT");
                cmd.arg("SETINFO").arg(field).arg(value);
                cmds.push(cmd);
            }
        }
        for (i, cmd) in cmds.iter().enumerate() {
            match tokio::time::timeout(response, cmd.query_async::<redis::Value>(&mut manager))
                .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) if i == 0 => {
                    tracing::debug!(target: "crosslock", "naming a connection '{name}' failed: {e}")
                }
                Ok(Err(_)) => {}
                Err(_) => {
                    tracing::debug!(target: "crosslock", "naming a connection '{name}': no answer");
                    return;
                }
            }
        }
    });
}

/// Subscribes `manager` (the new master's) to everything `conn` is subscribed to, and leaves
/// again what was unsubscribed while that ran.
pub(in crate::transport) async fn resubscribe(conn: &Conn, mut manager: ConnectionManager) {
    let (channels, patterns) = {
        let subs = lock(&conn.inner.subscriptions);
        (
            subs.channels.iter().cloned().collect::<Vec<_>>(),
            subs.patterns.iter().cloned().collect::<Vec<_>>(),
        )
    };
    let timeout = conn.inner.response_timeout;
    for channel in &channels {
        let _ = tokio::time::timeout(timeout, manager.subscribe(channel)).await;
    }
    for pattern in &patterns {
        let _ = tokio::time::timeout(timeout, manager.psubscribe(pattern)).await;
    }
    let gone: Vec<String> = {
        let subs = lock(&conn.inner.subscriptions);
        channels
            .into_iter()
            .filter(|c| !subs.channels.contains(c))
            .collect()
    };
    for channel in gone {
        let _ = tokio::time::timeout(timeout, manager.unsubscribe(&channel)).await;
    }
}

/// Pings `conn` whenever it has been idle for [`KEEPALIVE_IDLE`], so a server with an idle
/// `timeout` never closes it, and a connection the server dropped is noticed (and replaced)
/// before a renewal needs it.
pub(in crate::transport) async fn keepalive(conn: Conn, stop: CancellationToken) {
    loop {
        let idle = conn.idle_for();
        let pause = KEEPALIVE_IDLE
            .saturating_sub(idle)
            .max(Duration::from_millis(50));
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.cancelled() => {
                // The client closed: so do its lanes, idle or watched by a loop.
                if let Some(lanes) = &conn.inner.link.load().lanes {
                    lanes.close();
                }
                if let Some(nodes) = &conn.inner.node_lanes {
                    nodes.pools().iter().for_each(|lanes| lanes.close());
                }
                return;
            }
        }
        if conn.idle_for() >= KEEPALIVE_IDLE {
            let _ = conn.ping().await;
        }
        if let Some(lanes) = &conn.inner.link.load().lanes {
            lanes.close_stale();
        }
        if let Some(nodes) = &conn.inner.node_lanes {
            nodes.pools().iter().for_each(|lanes| lanes.close_stale());
        }
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

/// How long a connect that ran out of time may take to find out why (see [`connect_within`]).
const WHY_PROBE: Duration = Duration::from_millis(300);

/// Runs `connecting` within the connect timeout, and says what went wrong if it fails.
///
/// A connection manager retries a failing first connection with back-off, a refused password
/// or a database the server lacks too, so a short connect timeout can run out on an answer that
/// retrying cannot change. Then one plain connection of `probe`'s (no retries, at most
/// [`WHY_PROBE`] more) asks the server: its refusal is reported (an invalid argument, bad
/// credentials) rather than "no answer".
pub(in crate::transport) async fn connect_within<F, C>(
    node: &Node,
    timeouts: Timeouts,
    connecting: F,
    probe: Option<&redis::Client>,
) -> Result<C>
where
    F: std::future::Future<Output = redis::RedisResult<C>>,
{
    let e = match tokio::time::timeout(timeouts.connect, connecting).await {
        Ok(Ok(manager)) => return Ok(manager),
        Ok(Err(e)) => e,
        // A server without TLS reads a TLS greeting as the start of a command and never
        // answers it.
        Err(_) if matches!(node.info.addr(), ConnectionAddr::TcpTls { .. }) => {
            return Err(unreachable(
                node,
                timeouts,
                "no answer to the TLS handshake: is TLS enabled on the server? (a server \
                 without TLS needs redis://, not rediss://)"
                    .to_owned(),
            ));
        }
        Err(_) => {
            let refused = match probe {
                Some(client) => {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(WHY_PROBE))
                        .set_response_timeout(Some(WHY_PROBE));
                    let asked = client.get_multiplexed_async_connection_with_config(&config);
                    match tokio::time::timeout(WHY_PROBE, asked).await {
                        Ok(Err(e)) if e.code().is_some() => Some(e),
                        _ => None,
                    }
                }
                None => None,
            };
            match refused {
                Some(e) => e,
                None => return Err(unreachable(node, timeouts, "no answer".to_owned())),
            }
        }
    };
    Err(connect_failed(node, timeouts, e).await)
}

/// The unavailable error of a connect to `node` that failed for `detail`.
fn unreachable(node: &Node, timeouts: Timeouts, detail: String) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!(
            "cannot connect to Redis at {} within {:?}: {detail}; check that redis-server runs \
             there and the URL is right",
            node.address, timeouts.connect
        ),
    )
}

/// What a connect to `node` that failed with `e` tells its caller.
async fn connect_failed(node: &Node, timeouts: Timeouts, e: redis::RedisError) -> Error {
    let address = &node.address;
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
            node.info.redis_settings().db()
        ))
    } else if text.contains("max number of clients") || refuses_clients(node).await {
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "Redis at {address} refused the connection: it has reached its maximum number of \
                 clients (maxclients); close idle clients or raise maxclients, then retry"
            ),
        )
    } else if matches!(node.info.addr(), ConnectionAddr::TcpTls { .. })
        && [
            "corrupt message",
            "InvalidContentType",
            "wrong version number",
            "eof",
            "EOF",
        ]
        .iter()
        .any(|sign| text.contains(sign))
    {
        unreachable(
            node,
            timeouts,
            format!(
                "{text}; the TLS handshake failed: is TLS enabled on the server? A server \
                 without TLS on this port needs redis:// instead of rediss://"
            ),
        )
    } else {
        unreachable(node, timeouts, text)
    };
    error.with_source(e)
}

/// Whether the server at `endpoint` greets a new connection with "max number of clients
/// reached". When it does, it closes at once, and a client that already sent its handshake often
/// sees only a reset; a silent probe reads the greeting. (Plain TCP only.)
async fn refuses_clients(node: &Node) -> bool {
    use tokio::io::AsyncReadExt;
    let ConnectionAddr::Tcp(host, port) = node.info.addr() else {
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
