//! Redis Sentinel: which node is the master of a named group, now and after a failover.
//!
//! A `redis+sentinel://` URL names the sentinels and the master group. The client asks every
//! sentinel (`SENTINEL MASTER <name>`) and believes the answer with the highest configuration
//! epoch, so one sentinel that has not yet heard of a failover cannot send it back to the old
//! master. It asks again at once when a sentinel announces a failover (`+switch-master`, to which
//! the client listens on one sentinel at a time) or a command suggests the master moved (a
//! `READONLY` reply, a lost connection, no answer), and every [`POLL`] (Redisson's
//! `scanInterval`) in case an announcement was missed.
//!
//! Its connections to the sentinels carry the client's connection name (`CLIENT SETNAME`, see
//! [`crate::naming`]) and `CLIENT SETINFO LIB-NAME`/`LIB-VER` where the sentinel takes them
//! (Redis ≥ 7.2; an older sentinel's refusal is ignored), so that `CLIENT LIST` on a sentinel
//! names the process too.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::{Error, ErrorKind, Result};
use crate::transport::endpoint::{UrlForm, credentials, host_port, split_url};

/// How often the sentinels are asked where the master is, failover or not.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The default port of a sentinel.
const DEFAULT_PORT: u16 = 26379;

/// A `redis+sentinel://` URL, parsed.
#[derive(Clone)]
pub(crate) struct SentinelSpec {
    /// The master group's name, as the sentinels know it (`sentinel monitor <name> …`).
    pub(crate) master: String,
    /// The sentinels, `host:port`.
    pub(crate) sentinels: Vec<(String, u16)>,
    /// TLS to the sentinels and to the data nodes (`rediss+sentinel://`).
    pub(crate) tls: bool,
    /// Database, user and password for the data nodes (the URL's user info and path).
    pub(crate) node: RedisConnectionInfo,
    /// User and password for the sentinels (`sentinel_username`, `sentinel_password`).
    sentinel_auth: RedisConnectionInfo,
}

/// The sentinel URL form, `redis+sentinel://` (or `rediss+sentinel://`).
pub(crate) const URL: UrlForm = UrlForm {
    plain: "redis+sentinel://",
    tls: "rediss+sentinel://",
    kind: "sentinel",
    written: "redis+sentinel://[user:password@]host:port[,host:port…]/<master name>[/db]\
              [?sentinel_password=…&sentinel_username=…] (or rediss+sentinel:// for TLS)",
};

impl SentinelSpec {
    /// Parses `redis+sentinel://…` or `rediss+sentinel://…`; `shown` is the URL without its
    /// passwords, for messages.
    pub(crate) fn parse(url: &str, shown: &str) -> Result<Self> {
        let parts = split_url(url, shown, &URL)?;
        let sentinels = parts.hosts(DEFAULT_PORT, "sentinel")?;
        let mut segments = parts.path.split('/').filter(|s| !s.is_empty());
        let master = segments.next().ok_or_else(|| {
            // `host/name@x`: the last '@' ends the user info (a password may hold '/'), so an
            // '@' of the master name took the hosts and the name with it.
            let hint = if parts.userinfo.is_some_and(|u| u.contains('/')) {
                " (an '@' in the master name is written %40)"
            } else {
                ""
            };
            parts.bad(format!("names no master group{hint}"))
        })?;
        let master = decode(master).map_err(|what| parts.bad(what))?;
        let db = match segments.next() {
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|db| crate::limits::DB.contains((*db).into()))
                .ok_or_else(|| {
                    parts.bad(format!(
                        "has '{db}' where the database number goes (a whole number in {})",
                        crate::limits::DB.shown
                    ))
                })?,
            None => 0,
        };
        if let Some(extra) = segments.next() {
            return Err(parts.bad(format!("has '{extra}' after the database number")));
        }
        // The data nodes' credentials: let redis-rs read (and percent-decode) the user info.
        let node = parts.credentials()?.set_db(db);
        let mut sentinel_user = String::new();
        let mut sentinel_password = String::new();
        for pair in parts.pairs("sentinel_username=…&sentinel_password=…") {
            match pair? {
                ("sentinel_username", value) => sentinel_user = value.to_owned(),
                ("sentinel_password", value) => sentinel_password = value.to_owned(),
                (other, _) => {
                    return Err(parts.bad(format!(
                        "has the unknown parameter '{other}' (sentinel_username and \
                         sentinel_password are the ones there are)"
                    )));
                }
            }
        }
        let sentinel_auth = if sentinel_user.is_empty() && sentinel_password.is_empty() {
            RedisConnectionInfo::default()
        } else {
            credentials(&format!("{sentinel_user}:{sentinel_password}"), shown)?
        };
        Ok(SentinelSpec {
            master,
            sentinels,
            tls: parts.tls,
            node,
            sentinel_auth,
        })
    }

    /// `master 'name' via sentinels h1:p1,h2:p2`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "master '{}' via sentinels {}",
            self.master,
            self.sentinel_list()
        )
    }

    fn sentinel_list(&self) -> String {
        self.sentinels
            .iter()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The connection info of a data node at `host:port`.
    pub(crate) fn node_info(&self, host: &str, port: u16) -> Result<ConnectionInfo> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let info = format!("{scheme}://{}/", host_port(host, port))
            .into_connection_info()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("the sentinels named the master '{host}:{port}', which is not an address: {e}"),
                )
            })?;
        Ok(info.set_redis_settings(self.node.clone()))
    }

    /// The connection info of the sentinel at `host:port`, speaking `protocol`.
    fn sentinel_info(
        &self,
        host: &str,
        port: u16,
        protocol: redis::ProtocolVersion,
    ) -> Result<ConnectionInfo> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let info = format!("{scheme}://{}/", host_port(host, port))
            .into_connection_info()
            .map_err(|e| Error::invalid(format!("bad sentinel address '{host}:{port}': {e}")))?;
        Ok(info.set_redis_settings(
            self.sentinel_auth
                .clone()
                .set_protocol(protocol)
                // In the handshake, whose SETINFO replies are ignored: a sentinel before 7.2
                // refuses SETINFO and is still connected to.
                .set_lib_name(crate::naming::LIB_NAME, crate::naming::LIB_VER),
        ))
    }
}

/// Percent-decodes a path segment (the master name).
fn decode(segment: &str) -> std::result::Result<String, String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    format!("has a bad percent escape in the master name '{segment}'")
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("has a master name '{segment}' that is not UTF-8"))
}

/// Where one sentinel says the master is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sighting {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The sentinel's configuration epoch for the group: bumped by every failover.
    epoch: u64,
}

/// Why one sentinel gave no address.
enum Miss {
    /// It answered that it monitors no master of that name.
    Unknown(String),
    /// It refused our credentials.
    Auth(String),
    /// It did not answer, or answered something else.
    Down(String),
}

/// The sentinels of one client, with a connection to each (opened when first needed, reopened
/// after it fails).
pub(crate) struct Sentinels {
    spec: SentinelSpec,
    tls_ca: Option<Vec<u8>>,
    /// The client's connection name (`CLIENT SETNAME`), given to each connection.
    name: Arc<str>,
    links: Vec<tokio::sync::Mutex<Option<MultiplexedConnection>>>,
}

impl Sentinels {
    pub(crate) fn new(spec: SentinelSpec, tls_ca: Option<Vec<u8>>, name: Arc<str>) -> Self {
        let links = spec
            .sentinels
            .iter()
            .map(|_| tokio::sync::Mutex::new(None))
            .collect();
        Sentinels {
            spec,
            tls_ca,
            name,
            links,
        }
    }

    pub(crate) fn spec(&self) -> &SentinelSpec {
        &self.spec
    }

    /// Asks every sentinel where the master is and believes the one with the highest epoch.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` when every sentinel that answered knows no such master; `Auth` when
    /// they refused the credentials; `Unavailable` when none answered within `timeout`.
    pub(crate) async fn locate(&self, timeout: Duration) -> Result<Sighting> {
        let asks = (0..self.links.len()).map(|i| self.ask(i, timeout));
        let answers = futures_util::future::join_all(asks).await;
        let mut best: Option<Sighting> = None;
        let mut unknown = Vec::new();
        let mut refused = Vec::new();
        let mut down = Vec::new();
        for ((host, port), answer) in self.spec.sentinels.iter().zip(answers) {
            match answer {
                Ok(sighting) => {
                    if best.as_ref().is_none_or(|b| sighting.epoch > b.epoch) {
                        best = Some(sighting);
                    }
                }
                Err(Miss::Unknown(e)) => unknown.push(format!("{host}:{port}: {e}")),
                Err(Miss::Auth(e)) => refused.push(format!("{host}:{port}: {e}")),
                Err(Miss::Down(e)) => down.push(format!("{host}:{port}: {e}")),
            }
        }
        if let Some(best) = best {
            return Ok(best);
        }
        let master = &self.spec.master;
        if !refused.is_empty() {
            return Err(Error::new(
                ErrorKind::Auth,
                format!(
                    "the sentinels refused the credentials ({}); give the sentinels' own with \
                     ?sentinel_username=…&sentinel_password=… in the URL (the user info before \
                     the '@' is for the data nodes). Retrying will not help",
                    refused.join("; ")
                ),
            ));
        }
        if !unknown.is_empty() && down.is_empty() {
            return Err(Error::invalid(format!(
                "no sentinel knows a master named '{master}' ({}); check the name after the \
                 addresses in the URL (SENTINEL MASTERS on a sentinel lists the names it \
                 monitors)",
                unknown.join("; ")
            )));
        }
        let mut problems = down;
        problems.extend(unknown);
        Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "no sentinel told where master '{master}' is within {timeout:?} ({}); check that \
                 the sentinels run at {} and the URL is right",
                problems.join("; "),
                self.spec.sentinel_list()
            ),
        ))
    }

    async fn ask(&self, i: usize, timeout: Duration) -> std::result::Result<Sighting, Miss> {
        let work = async {
            let mut link = self.links[i].lock().await;
            if link.is_none() {
                *link = Some(self.open(i, timeout).await?);
            }
            let conn = link.as_mut().expect("opened above");
            let reply: redis::RedisResult<redis::Value> = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(&self.spec.master)
                .query_async(conn)
                .await;
            match reply {
                Ok(value) => sighting(&value).ok_or_else(|| {
                    Miss::Down(format!("an unexpected SENTINEL MASTER reply {value:?}"))
                }),
                Err(e) => {
                    let text = e.to_string();
                    if text.contains("No such master") {
                        Err(Miss::Unknown(text))
                    } else {
                        if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
                            *link = None;
                        }
                        Err(refusal(e))
                    }
                }
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(answer) => answer,
            Err(_) => Err(Miss::Down(format!("no answer within {timeout:?}"))),
        }
    }

    /// Listens for `+switch-master` on one sentinel after another, calling `switched` on each
    /// announcement: the failover is followed the moment a sentinel announces it, not at the
    /// next poll. Runs until `stop` is cancelled.
    ///
    /// A RESP3 connection (a sentinel takes `HELLO 3` since Redis 6.0), so that it can be named
    /// before it subscribes; its messages and its end arrive as pushes.
    pub(crate) async fn listen(
        &self,
        timeout: Duration,
        stop: &tokio_util::sync::CancellationToken,
        switched: &(dyn Fn() + Sync),
    ) {
        let mut next = 0;
        loop {
            let (host, port) = &self.spec.sentinels[next % self.spec.sentinels.len()];
            next += 1;
            let listening = async {
                let info = self
                    .spec
                    .sentinel_info(host, *port, redis::ProtocolVersion::RESP3)
                    .ok()?;
                let client = self.client(info).ok()?;
                let (pushes, mut received) = tokio::sync::mpsc::unbounded_channel();
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_push_sender(pushes);
                let mut conn = tokio::time::timeout(
                    timeout,
                    client.get_multiplexed_async_connection_with_config(&config),
                )
                .await
                .ok()?
                .ok()?;
                self.name_link(&mut conn, host, *port, timeout).await;
                tokio::time::timeout(timeout, conn.subscribe("+switch-master"))
                    .await
                    .ok()?
                    .ok()?;
                while let Some(push) = received.recv().await {
                    match push.kind {
                        redis::PushKind::Message => {
                            let text: String = push
                                .data
                                .get(1)
                                .and_then(|v| redis::from_redis_value(v.clone()).ok())
                                .unwrap_or_default();
                            if text.split(' ').next() == Some(self.spec.master.as_str()) {
                                switched();
                            }
                        }
                        redis::PushKind::Disconnection => break,
                        _ => {}
                    }
                }
                Some(())
            };
            tokio::select! {
                _ = listening => {}
                _ = stop.cancelled() => return,
            }
            // The sentinel went away (or never answered): the next one, after a pause.
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = stop.cancelled() => return,
            }
        }
    }

    fn client(&self, info: ConnectionInfo) -> redis::RedisResult<redis::Client> {
        match &self.tls_ca {
            Some(pem) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
            None => redis::Client::open(info),
        }
    }

    async fn open(
        &self,
        i: usize,
        timeout: Duration,
    ) -> std::result::Result<MultiplexedConnection, Miss> {
        let (host, port) = &self.spec.sentinels[i];
        let info = self
            .spec
            .sentinel_info(host, *port, redis::ProtocolVersion::RESP2)
            .map_err(|e| Miss::Down(e.to_string()))?;
        let client = self.client(info).map_err(|e| Miss::Down(e.to_string()))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(refusal)?;
        self.name_link(&mut conn, host, *port, timeout).await;
        Ok(conn)
    }

    /// Names a connection to the sentinel at `host:port` (`CLIENT SETNAME`); a refusal is only
    /// logged (the name is for operators, the connection works without it).
    async fn name_link(
        &self,
        conn: &mut MultiplexedConnection,
        host: &str,
        port: u16,
        timeout: Duration,
    ) {
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("SETNAME").arg(&*self.name);
        match tokio::time::timeout(timeout, cmd.query_async::<redis::Value>(conn)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(
                target: "crosslock",
                "naming the connection to sentinel {}: {e}",
                host_port(host, port)
            ),
            Err(_) => tracing::debug!(
                target: "crosslock",
                "naming the connection to sentinel {}: no answer within {timeout:?}",
                host_port(host, port)
            ),
        }
    }
}

fn refusal(e: redis::RedisError) -> Miss {
    let text = e.to_string();
    if matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
        || text.contains("invalid username-password")
        || text.contains("Authentication required")
        || text.contains("without any password configured")
    {
        Miss::Auth(text)
    } else {
        Miss::Down(text)
    }
}

/// Reads `ip`, `port` and `config-epoch` from a `SENTINEL MASTER` reply (a flat array of field
/// and value in RESP2, a map in RESP3).
fn sighting(value: &redis::Value) -> Option<Sighting> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::Int(n) => Some(n.to_string()),
        _ => None,
    };
    let pairs: Vec<(String, String)> = match value {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| Some((text(pair.first()?)?, text(pair.get(1)?)?)))
            .collect(),
        redis::Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        _ => return None,
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    Some(Sighting {
        host: field("ip")?.to_owned(),
        port: field("port")?.parse().ok()?,
        epoch: field("config-epoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
    })
}

/// Following the master through failovers (the `Route` of a Sentinel group).
mod follow {
    use crate::transport::*;

    /// Asks the sentinels where the master is every [`POLL`](super::POLL), and
    /// at once when a command suspects a move, publishing every change to the route's followers.
    pub(in crate::transport) async fn follow_sentinels(
        route: std::sync::Weak<Route>,
        timeouts: Timeouts,
        stop: CancellationToken,
    ) {
        loop {
            {
                let Some(r) = route.upgrade() else { return };
                let Some((_, kick)) = &r.sentinels else {
                    return;
                };
                let kicked = kick.notified();
                tokio::select! {
                    _ = tokio::time::sleep(crate::transport::sentinel::POLL) => {}
                    _ = kicked => {}
                    _ = stop.cancelled() => return,
                }
            }
            let Some(r) = route.upgrade() else { return };
            let Some((sentinels, _)) = &r.sentinels else {
                return;
            };
            match sentinels.locate(timeouts.response).await {
                Ok(found) => {
                    let address = format!("{}:{}", found.host, found.port);
                    if r.current.borrow().address != address {
                        match sentinels.spec().node_info(&found.host, found.port) {
                            Ok(info) => {
                                tracing::warn!(
                                    target: "crosslock",
                                    "master '{}' moved from {} to {address} (a failover); following it",
                                    sentinels.spec().master,
                                    r.current.borrow().address
                                );
                                r.current.send_replace(Node { info, address });
                            }
                            Err(e) => tracing::warn!(target: "crosslock", "{e}"),
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(target: "crosslock", "asking the sentinels failed: {e}");
                }
            }
            drop(r);
            // A burst of suspicious replies makes one question, not one each.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Moves a connection to each new master the route announces: connects to it (retrying while it
    /// is still the master and not yet reachable), subscribes there to what the old one was
    /// subscribed to, then switches; commands in flight finish (or fail) on the old one.
    pub(in crate::transport) async fn follow_master(
        conn: std::sync::Weak<Inner>,
        mut masters: tokio::sync::watch::Receiver<Node>,
        timeouts: Timeouts,
        pushes: Pushes,
        subscriber: bool,
    ) {
        loop {
            if masters.changed().await.is_err() {
                return;
            }
            loop {
                let node = masters.borrow_and_update().clone();
                let Some(inner) = conn.upgrade() else { return };
                if inner.link.load().node == node {
                    break;
                }
                let endpoint = inner.route.endpoint.clone();
                drop(inner);
                match open_manager(&endpoint, &node, timeouts, pushes.clone(), subscriber).await {
                    Ok(manager) => {
                        let Some(inner) = conn.upgrade() else { return };
                        let from = inner.link.load().node.address.clone();
                        inner.link.store(Arc::new(Link::new(
                            Handle::Node(manager.clone()),
                            node.clone(),
                            timeouts,
                            inner.health.role,
                            &inner.route,
                        )));
                        let conn = Conn { inner };
                        conn.forget_scripts();
                        if subscriber {
                            resubscribe(&conn, manager).await;
                            pushes.push(redis::PushInfo {
                                kind: redis::PushKind::Other(MOVED.to_owned()),
                                data: Vec::new(),
                            });
                        }
                        conn.tell(crate::telemetry::ConnectionChange::Failover);
                        tracing::info!(
                            target: "crosslock",
                            "{} connection moved from {from} to the new master {}",
                            conn.inner.health.role,
                            node.address
                        );
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(
                            target: "crosslock",
                            "cannot reach the new master {} yet: {e}",
                            node.address
                        );
                        tokio::select! {
                            changed = masters.changed() => if changed.is_err() { return },
                            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                        }
                    }
                }
            }
        }
    }
}

pub(in crate::transport) use follow::{follow_master, follow_sentinels};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sentinels_master_db_and_credentials() {
        let spec = SentinelSpec::parse(
            "redis+sentinel://app:p%40ss@10.0.0.1:26380,10.0.0.2/orders/3?sentinel_password=s3",
            "shown",
        )
        .unwrap();
        assert_eq!(spec.master, "orders");
        assert_eq!(
            spec.sentinels,
            vec![
                ("10.0.0.1".to_owned(), 26380),
                ("10.0.0.2".to_owned(), 26379)
            ]
        );
        assert!(!spec.tls);
        assert_eq!(spec.node.db(), 3);
        assert_eq!(spec.node.username(), Some("app"));
        assert_eq!(spec.node.password(), Some("p@ss"));
        assert_eq!(spec.sentinel_auth.password(), Some("s3"));
    }

    #[test]
    fn refuses_a_url_without_master_or_with_junk() {
        for url in [
            "redis+sentinel://127.0.0.1:26379",
            "redis+sentinel://127.0.0.1:26379/",
            "redis+sentinel://127.0.0.1:x/m",
            "redis+sentinel://,127.0.0.1/m",
            "redis+sentinel://127.0.0.1/m/db",
            "redis+sentinel://127.0.0.1/m/0/extra",
            "redis+sentinel://127.0.0.1/m?password=x",
        ] {
            let err = SentinelSpec::parse(url, url).err().expect(url);
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}");
            assert!(err.to_string().contains("redis+sentinel://"), "{err}");
        }
        // An unencoded '@' in the master name is read as the end of the user info; the message
        // says how to write it (and the encoded name parses).
        let url = "redis+sentinel://127.0.0.1:26379/my@master";
        let err = SentinelSpec::parse(url, url).err().expect(url);
        assert!(err.to_string().contains("%40"), "{err}");
        let spec = SentinelSpec::parse(
            "redis+sentinel://127.0.0.1:26379/my%40master",
            "redis+sentinel://127.0.0.1:26379/my%40master",
        )
        .unwrap();
        assert_eq!(spec.master, "my@master");
    }

    #[test]
    fn reads_a_sentinel_master_reply() {
        let bulk = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
        let reply = redis::Value::Array(vec![
            bulk("name"),
            bulk("m"),
            bulk("ip"),
            bulk("127.0.0.1"),
            bulk("port"),
            bulk("7001"),
            bulk("config-epoch"),
            bulk("4"),
        ]);
        assert_eq!(
            sighting(&reply),
            Some(Sighting {
                host: "127.0.0.1".to_owned(),
                port: 7001,
                epoch: 4
            })
        );
    }
}
