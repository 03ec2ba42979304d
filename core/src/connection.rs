//! Connections to the deployment, behind one type whatever its topology.
//!
//! A single server, the master of a Sentinel group (followed through failovers by [`Route`]),
//! or a Redis Cluster (redis-rs's cluster connection, see [`crate::cluster`]). Everything else in
//! the crate talks to [`Conn`] through a few operations (run a script on the node owning its
//! keys, the publish command to use, subscribe), whatever the topology.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionAddr, ProtocolVersion};

use crate::scripts::Lua;
use tokio_util::sync::CancellationToken;

use crate::cluster::{ClusterSpec, Sharding};
use crate::error::{Error, ErrorKind, Result, What};
use crate::sentinel::Sentinels;
pub(crate) use crate::transport::endpoint::Endpoint;
use crate::transport::endpoint::{Node, Target};
use crate::util::lock;

/// Which node the connections of one client talk to: fixed for a single server; for Sentinel,
/// the current master, followed through failovers.
pub(crate) struct Route {
    endpoint: Endpoint,
    current: tokio::sync::watch::Sender<Node>,
    /// Set for Sentinel: the sentinels, and the signal that a command suspects the master moved.
    sentinels: Option<(Sentinels, Arc<tokio::sync::Notify>)>,
    /// Set for Cluster: the cluster, and what its nodes were found to support at connect.
    cluster: Option<ClusterRoute>,
    /// What every connection of the client is named (`CLIENT SETNAME`, see [`crate::naming`]).
    pub(crate) name: Arc<str>,
}

/// A cluster, and what its nodes were found to support when the client connected: asked of a
/// node, not read from a version string (Valkey's, or a vendor's build, say other things).
pub(crate) struct ClusterRoute {
    spec: Arc<ClusterSpec>,
    /// Whether waiters use sharded pub/sub (`sharded_pubsub=on`, or `auto` where the nodes know
    /// `PUBSUB SHARDNUMSUB`: Redis 7 and later).
    sharded: bool,
    /// Whether the nodes run a script marked `#!lua flags=allow-cross-slot-keys` (Redis 7 and
    /// later; Redis 6.2 cannot compile the mark): the watchdog renews with one script per
    /// master there, and with one script per slot where they do not.
    cross_slot_scripts: bool,
}

impl Route {
    /// Finds the node to talk to (asking the sentinels, for Sentinel) and, for Sentinel, starts
    /// following it until `stop` is cancelled.
    pub(crate) async fn open(
        endpoint: &Endpoint,
        timeouts: Timeouts,
        stop: CancellationToken,
        name: String,
    ) -> Result<Arc<Route>> {
        let name: Arc<str> = name.into();
        match &endpoint.target {
            Target::Node(info) => {
                let node = Node {
                    info: (**info).clone(),
                    address: endpoint.address.clone(),
                };
                Ok(Arc::new(Route {
                    endpoint: endpoint.clone(),
                    current: tokio::sync::watch::Sender::new(node),
                    sentinels: None,
                    cluster: None,
                    name,
                }))
            }
            Target::Cluster(spec) => {
                let seeds = spec.seed_infos()?;
                let node = Node {
                    info: seeds[0].clone(),
                    address: endpoint.address.clone(),
                };
                // Asked of one node each: routed to all of them, the error replies of a
                // cluster without the command (Redis 6.2) came back as a reply redis-rs cannot
                // combine rather than as the servers' answer.
                let ignore = Pushes::new(|_| {});
                let mut probe = open_cluster(endpoint, spec, timeouts, ignore).await?;
                let sharded = match spec.sharding {
                    Sharding::On => true,
                    Sharding::Off => false,
                    // Redisson's AUTO: sharded when the cluster knows the sharded commands
                    // (Redis 7 and later).
                    Sharding::Auto => {
                        let mut cmd = redis::cmd("PUBSUB");
                        cmd.arg("SHARDNUMSUB").arg("0");
                        // An error reply (an unknown subcommand before Redis 7): plain.
                        ask_one_master(&mut probe, cmd, timeouts.response)
                            .await?
                            .is_none()
                    }
                };
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(crate::scripts::CROSS_SLOT_PROBE).arg(0);
                // Only a refusal of the mark itself says no (see renewal's fallback for a node
                // that refuses it later, mid-upgrade).
                let cross_slot_scripts = !ask_one_master(&mut probe, cmd, timeouts.response)
                    .await?
                    .is_some_and(|e| crate::scripts::refuses_cross_slot_mark(&e.to_string()));
                tracing::debug!(
                    target: "crosslock",
                    "{}: waiters use {} pub/sub; the watchdog renews with one script per {}",
                    endpoint.address,
                    if sharded { "sharded" } else { "plain" },
                    if cross_slot_scripts { "master" } else { "slot" }
                );
                Ok(Arc::new(Route {
                    endpoint: endpoint.clone(),
                    current: tokio::sync::watch::Sender::new(node),
                    sentinels: None,
                    cluster: Some(ClusterRoute {
                        spec: spec.clone(),
                        sharded,
                        cross_slot_scripts,
                    }),
                    name,
                }))
            }
            Target::Sentinel(spec) => {
                let sentinels =
                    Sentinels::new((**spec).clone(), endpoint.tls_ca.clone(), name.clone());
                let found = sentinels.locate(timeouts.connect).await?;
                let node = Node {
                    info: spec.node_info(&found.host, found.port)?,
                    address: format!("{}:{}", found.host, found.port),
                };
                tracing::debug!(
                    target: "crosslock",
                    "the sentinels say master '{}' is {}",
                    spec.master,
                    node.address
                );
                let listener =
                    Sentinels::new((**spec).clone(), endpoint.tls_ca.clone(), name.clone());
                let kick = Arc::new(tokio::sync::Notify::new());
                let route = Arc::new(Route {
                    endpoint: endpoint.clone(),
                    current: tokio::sync::watch::Sender::new(node),
                    sentinels: Some((sentinels, kick.clone())),
                    cluster: None,
                    name,
                });
                crate::runtime::spawn(follow_sentinels(
                    Arc::downgrade(&route),
                    timeouts,
                    stop.clone(),
                ));
                crate::runtime::spawn(async move {
                    listener
                        .listen(timeouts.connect, &stop, &|| kick.notify_one())
                        .await;
                });
                Ok(route)
            }
        }
    }

    /// The node commands go to now.
    pub(crate) fn current(&self) -> Node {
        self.current.borrow().clone()
    }

    /// Asks the sentinels again at once (no-op for a single server): a command's reply suggests
    /// the master moved.
    fn suspect(&self) {
        if let Some((_, kick)) = &self.sentinels {
            kick.notify_one();
        }
    }
}

/// Asks the sentinels where the master is every [`sentinel::POLL`](crate::sentinel::POLL), and
/// at once when a command suspects a move, publishing every change to the route's followers.
async fn follow_sentinels(
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
                _ = tokio::time::sleep(crate::sentinel::POLL) => {}
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
/// (reconnecting included). Behind Sentinel, the connection moves to the new master after a
/// failover (subscriptions included), and a reply that suggests a move makes the client ask
/// the sentinels at once.
#[derive(Clone)]
pub(crate) struct Conn {
    inner: Arc<Inner>,
}

struct Inner {
    /// The manager of the node commands go to now; replaced when the master moves.
    link: ArcSwap<Link>,
    route: Arc<Route>,
    response_timeout: Duration,
    /// When a command was last sent (ms since `epoch`), for the keepalive.
    last_used: AtomicU64,
    epoch: Instant,
    /// The scripts this connection has sent since it last forgot them ([`Conn::first_send`]): a
    /// script not in it goes whole (see [`crate::scripts`]).
    loaded: crate::scripts::ScriptSet,
    /// The scripts the server answered a run of since they were last forgotten: only those go
    /// over event loops' lanes (see [`Conn::eval_on_loop`]).
    ran: crate::scripts::ScriptSet,
    health: Health,
    /// What a subscription connection is subscribed to, to subscribe again on a new master.
    subscriptions: std::sync::Mutex<Subscriptions>,
    /// Where this connection's pushes go, and its timeouts: a cluster subscription connection is
    /// rebuilt with them after a node failed (see [`Conn::recover`]).
    pushes: Pushes,
    timeouts: Timeouts,
    /// With `ClientOptions::wait_for_replicas`: the connection acquisitions go to, followed by
    /// `WAIT` there, and how many replicas it waits for.
    sync: std::sync::OnceLock<(Conn, crate::options::ReplicaSync)>,
    /// On a cluster's command connection (not over TLS): lanes to each master, by slot.
    node_lanes: Option<crate::cluster::NodeLanes>,
    /// On a cluster: when the routed way's map was last checked after a command got no answer
    /// (ms since `epoch`, plus one; 0: never). See [`Conn::check_routing`].
    routing_checked: AtomicU64,
    /// Whether a check is under way.
    routing_busy: std::sync::atomic::AtomicBool,
    /// On a cluster: the slot map as it was when the connection was last opened for a change
    /// of it (sorted). See [`Conn::check_routing`].
    routing_seen: std::sync::Mutex<Option<Vec<SlotRange>>>,
}

struct Link {
    manager: Handle,
    node: Node,
    /// Blocking connections to `node` for callers on their own thread (see [`crate::lane`]):
    /// only on a command connection to one node over TCP or a Unix socket.
    lanes: Option<crate::lane::Lanes>,
}

impl Link {
    /// Names the connection (`CLIENT SETNAME name`, sent without waiting for it: the next
    /// commands are pipelined behind it).
    fn new(
        manager: Handle,
        node: Node,
        timeouts: Timeouts,
        role: &'static str,
        name: &Arc<str>,
    ) -> Self {
        name_connection(manager.clone(), name.clone(), timeouts.response);
        let lanes = match (&manager, role) {
            (Handle::Node(_), "command") => crate::lane::Lanes::new(
                &node.info,
                timeouts.connect,
                timeouts.response,
                name.clone(),
            ),
            _ => None,
        };
        Link {
            manager,
            node,
            lanes,
        }
    }
}

/// A connection handle of either topology: a manager of one node's connection, or the cluster
/// connection that routes each command to the node owning its key.
#[derive(Clone)]
pub(crate) enum Handle {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

impl redis::aio::ConnectionLike for Handle {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Handle::Node(m) => m.req_packed_command(cmd),
            Handle::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Handle::Node(m) => m.req_packed_commands(pipeline, offset, count),
            Handle::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Handle::Node(m) => m.get_db(),
            Handle::Cluster(c) => c.get_db(),
        }
    }
}

#[derive(Default)]
struct Subscriptions {
    channels: HashSet<String>,
    patterns: HashSet<String>,
}

/// Whether a connection is up, as its last command found it: the one place that logs a
/// connection going down and coming back (once per change, not per failed command).
///
/// A connection that keeps going down and coming back is logged as a warning (and its return as
/// information) at most once per [`FLAP_QUIET`], and at debug level in between: on a cluster
/// whose master is down, the calls for its slots fail while the others succeed, and each
/// failure after a success is a change, so the log grew with the traffic.
struct Health {
    /// `command` or `subscription`.
    role: &'static str,
    down: std::sync::atomic::AtomicBool,
    /// When the last loss was logged as a warning, in ms since `born` (0: never).
    warned_at: AtomicU64,
    /// Whether the current loss was logged as a warning (its return is logged alike).
    loud: std::sync::atomic::AtomicBool,
    born: Instant,
}

/// See [`Health`].
const FLAP_QUIET: Duration = Duration::from_secs(10);

impl Health {
    fn new(role: &'static str) -> Self {
        Health {
            role,
            down: false.into(),
            warned_at: AtomicU64::new(0),
            loud: false.into(),
            born: Instant::now(),
        }
    }

    fn lost(&self, address: &str, why: &dyn std::fmt::Display) {
        if self.down.swap(true, Ordering::Relaxed) {
            return;
        }
        let now = self.born.elapsed().as_millis() as u64 + 1;
        let last = self.warned_at.load(Ordering::Relaxed);
        let loud = last == 0 || now >= last + FLAP_QUIET.as_millis() as u64;
        self.loud.store(loud, Ordering::Relaxed);
        if loud {
            self.warned_at.store(now, Ordering::Relaxed);
            tracing::warn!(
                target: "crosslock",
                "{} connection to {address} lost ({why}); reconnecting",
                self.role,
            );
        } else {
            tracing::debug!(
                target: "crosslock",
                "{} connection to {address} lost again ({why}); reconnecting",
                self.role,
            );
        }
    }

    fn answered(&self, address: &str) {
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed) {
            if self.loud.load(Ordering::Relaxed) {
                tracing::info!(
                    target: "crosslock",
                    "{} connection to {address} is back",
                    self.role,
                );
            } else {
                tracing::debug!(
                    target: "crosslock",
                    "{} connection to {address} is back",
                    self.role,
                );
            }
        }
    }
}

/// How long a connection may stay idle before the keepalive pings it. Well under the smallest
/// idle `timeout` a server can be configured with (1 s is the smallest non-zero value).
const KEEPALIVE_IDLE: Duration = Duration::from_millis(400);

/// The push a subscription connection's owner receives after it moved to a new master: messages
/// published during the move went nowhere, so every waiter retries.
pub(crate) const MOVED: &str = "crosslock-moved";

/// Where a connection's pushes go: messages, disconnection notices and [`MOVED`]. Called on the
/// connection's own task as each push is read, so it must not block: a message can wake its
/// waiter right there, without a hop through another task.
#[derive(Clone)]
pub(crate) struct Pushes(Arc<dyn Fn(redis::PushInfo) + Send + Sync>);

impl Pushes {
    pub(crate) fn new(deliver: impl Fn(redis::PushInfo) + Send + Sync + 'static) -> Self {
        Pushes(Arc::new(deliver))
    }

    pub(crate) fn push(&self, push: redis::PushInfo) {
        (self.0)(push);
    }
}

impl From<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>> for Pushes {
    fn from(sender: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>) -> Self {
        Pushes::new(move |push| {
            // A closed receiver: its owner is gone, nothing is waiting for the push.
            let _ = sender.send(push);
        })
    }
}

impl redis::aio::AsyncPushSender for Pushes {
    fn send(&self, push: redis::PushInfo) -> std::result::Result<(), redis::aio::SendError> {
        self.push(push);
        Ok(())
    }
}

impl Conn {
    /// Connects the command connection; its keepalive runs until `stop` is cancelled.
    pub(crate) async fn connect(
        route: &Arc<Route>,
        timeouts: Timeouts,
        stop: CancellationToken,
    ) -> Result<Self> {
        // The manager reconnects by itself when the server closes the connection; its
        // disconnection notice is how that gets logged.
        let (pushes, mut notices) = tokio::sync::mpsc::unbounded_channel();
        let conn = Conn::open(route, timeouts, "command", Pushes::from(pushes), false).await?;
        tracing::debug!(target: "crosslock", "connected to {}", conn.address());
        let inner = Arc::downgrade(&conn.inner);
        crate::runtime::spawn(async move {
            while let Some(notice) = notices.recv().await {
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                if notice.kind == redis::PushKind::Disconnection {
                    Conn { inner }.note_lost(&"the server closed it");
                }
            }
        });
        crate::runtime::spawn(keepalive(conn.clone(), stop));
        Ok(conn)
    }

    /// Connects a RESP3 connection whose pushes (messages, disconnections, and [`MOVED`] after
    /// following a failover) go to `pushes`, and which re-subscribes by itself after
    /// reconnecting.
    pub(crate) async fn connect_subscriber(
        route: &Arc<Route>,
        timeouts: Timeouts,
        pushes: Pushes,
    ) -> Result<Self> {
        Conn::open(route, timeouts, "subscription", pushes, true).await
    }

    async fn open(
        route: &Arc<Route>,
        timeouts: Timeouts,
        role: &'static str,
        pushes: Pushes,
        subscriber: bool,
    ) -> Result<Self> {
        // A manager reconnects by itself after a disconnection, on a connection without a
        // name: the notice names the connection again.
        let named: Arc<std::sync::OnceLock<std::sync::Weak<Inner>>> = Arc::default();
        let pushes = {
            let (named, pushes) = (named.clone(), pushes);
            Pushes::new(move |push| {
                if push.kind == redis::PushKind::Disconnection
                    && let Some(inner) = named.get().and_then(std::sync::Weak::upgrade)
                {
                    name_connection(
                        inner.link.load().manager.clone(),
                        inner.route.name.clone(),
                        inner.timeouts.response,
                    );
                }
                pushes.push(push);
            })
        };
        let node = route.current();
        let manager = match &route.cluster {
            Some(cluster) => Handle::Cluster(
                open_cluster(&route.endpoint, &cluster.spec, timeouts, pushes.clone()).await?,
            ),
            None => Handle::Node(
                open_manager(&route.endpoint, &node, timeouts, pushes.clone(), subscriber).await?,
            ),
        };
        let conn = Conn {
            inner: Arc::new(Inner {
                link: ArcSwap::from_pointee(Link::new(manager, node, timeouts, role, &route.name)),
                route: route.clone(),
                response_timeout: timeouts.response,
                last_used: AtomicU64::new(0),
                epoch: Instant::now(),
                loaded: Default::default(),
                ran: Default::default(),
                health: Health::new(role),
                subscriptions: Default::default(),
                pushes: pushes.clone(),
                timeouts,
                sync: std::sync::OnceLock::new(),
                node_lanes: match &route.cluster {
                    Some(cluster) if role == "command" => crate::cluster::NodeLanes::new(
                        &cluster.spec,
                        timeouts.connect,
                        timeouts.response,
                        route.name.clone(),
                    ),
                    _ => None,
                },
                routing_checked: AtomicU64::new(0),
                routing_busy: Default::default(),
                routing_seen: Default::default(),
            }),
        };
        let _ = named.set(Arc::downgrade(&conn.inner));
        if route.sentinels.is_some() {
            crate::runtime::spawn(follow_master(
                Arc::downgrade(&conn.inner),
                route.current.subscribe(),
                timeouts,
                pushes,
                subscriber,
            ));
        }
        Ok(conn)
    }

    /// The address of the node this connection talks to now.
    pub(crate) fn address(&self) -> String {
        self.inner.link.load().node.address.clone()
    }

    fn manager(&self) -> Handle {
        self.inner.link.load().manager.clone()
    }

    /// Whether this connection talks to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.route.cluster.is_some()
    }

    /// Logs the connection going down (once) when `e` says it was lost.
    pub(crate) fn note_lost(&self, why: &dyn std::fmt::Display) {
        self.inner.health.lost(&self.address(), why);
        self.inner.route.suspect();
    }

    /// Whether the last command on this connection found it down (refused, dropped) and none
    /// has been answered since.
    pub(crate) fn is_down(&self) -> bool {
        self.inner.health.down.load(Ordering::Relaxed)
    }

    /// Logs the connection coming back (once) after it was lost.
    pub(crate) fn note_answered(&self) {
        if self.inner.health.down.load(Ordering::Relaxed) {
            self.inner.health.answered(&self.address());
        }
    }

    fn touch(&self) {
        let now = self.inner.epoch.elapsed().as_millis() as u64;
        self.inner.last_used.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let now = self.inner.epoch.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.inner.last_used.load(Ordering::Relaxed)))
    }

    /// The response timeout every command of this connection is bounded by.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.inner.response_timeout
    }

    /// Whether waiters use sharded pub/sub (a cluster where Redisson's rule says so).
    fn sharded(&self) -> bool {
        self.inner.route.cluster.as_ref().is_some_and(|c| c.sharded)
    }

    /// Whether the cluster's nodes run a script that touches keys of many slots (found at
    /// connect, see [`ClusterRoute`]); `false` off a cluster.
    pub(crate) fn cross_slot_scripts(&self) -> bool {
        self.inner
            .route
            .cluster
            .as_ref()
            .is_some_and(|c| c.cross_slot_scripts)
    }

    /// The command a script uses to notify waiters: `spublish` where waiters use sharded
    /// pub/sub, `publish` everywhere else.
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.sharded() {
            "spublish"
        } else {
            "publish"
        }
    }

    fn knows(&self, script: &Lua) -> bool {
        self.inner.loaded.contains(script)
    }

    /// Whether the caller is to send `script` whole: the first to ask since the script cache was
    /// last forgotten. The others send `EVALSHA` from then on, before the whole script's reply:
    /// on one connection Redis runs it first, and one that overtakes it (another connection, or
    /// after a failed first send) gets `NOSCRIPT` and is sent whole then. Without this, a burst
    /// of calls on a fresh connection (a client closing with 10,000 locks held, releasing them
    /// all at once) each sent the whole script: ~8 KB each, 16 KB of buffer per call in flight.
    fn first_send(&self, script: &Lua) -> bool {
        self.inner.loaded.insert(script)
    }

    /// Whether the server has answered a run of `script` since the scripts were last forgotten.
    fn ran(&self, script: &Lua) -> bool {
        self.inner.ran.contains(script)
    }

    /// Notes an answered run of `script` (a reply, not a failure to reach the server).
    fn note_ran(&self, script: &Lua) {
        self.inner.ran.insert(script);
    }

    /// Runs `script` with `keys` and `args`; errors are attributed to `subject`. Fails with
    /// [`ErrorKind::Unavailable`] when no answer comes within the response timeout.
    ///
    /// The first run on this connection sends the script whole (`EVAL`), the others `EVALSHA`
    /// (falling back to `EVAL` on `NOSCRIPT`; see [`Conn::first_send`]): a first run whose caller
    /// stops waiting still runs once Redis gets to it.
    pub(crate) async fn eval<'w, T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let subject = subject.into();
        if let Some((acquisitions, sync)) = self.inner.sync.get().filter(|_| script.synced) {
            // Boxed: rare, and kept out of the state of every other call.
            return Box::pin(acquisitions.eval_and_wait(script, keys, args, subject, *sync)).await;
        }
        let slot = if self.is_cluster() {
            crate::cluster::script_slot(keys)?
        } else {
            None
        };
        self.touch();
        let link = self.inner.link.load_full();
        if let Some(lanes) = &link.lanes {
            if let Some(trip) = self.trip_on_lane(lanes, script, keys, args).await {
                return self.settle_trip(trip, script, subject);
            }
            // Behind a lane's overdue request when possible; sent anyway after the response
            // timeout (a command never sent could not run when the server answers again).
            lanes.settled(self.inner.response_timeout).await;
        }
        drop(link);
        if let Some(nodes) = &self.inner.node_lanes {
            if let Some(slot) = slot
                && let Some(lanes) = self.node_pool(nodes, slot)
                && let Some(trip) = self.trip_on_lane(&lanes, script, keys, args).await
            {
                match trip {
                    // Not run there: the slot moved (or is moving). The routed way follows it.
                    crate::lane::Trip::Reply(Err(e)) if crate::cluster::is_redirect(&e) => {
                        nodes.forget_map();
                        self.read_map();
                    }
                    trip => return self.settle_trip(trip, script, subject),
                }
            }
            nodes.settled(slot, self.inner.response_timeout).await;
        }
        let mut manager = self.manager();
        let timeout = self.inner.response_timeout;
        // One command buffer, built once: `redis::Script`'s invocation kept each argument in a
        // buffer of its own and then copied them all into the command (and, on `NOSCRIPT`, made
        // two more round trips: `SCRIPT LOAD`, then `EVALSHA` again).
        let whole = self.first_send(script);
        let run = async {
            let reply = script_cmd(script, keys, args, whole)
                .query_async(&mut manager)
                .await;
            match reply {
                Err(e)
                    if !whole
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    script_cmd(script, keys, args, true)
                        .query_async(&mut manager)
                        .await
                }
                other => other,
            }
        };
        let reply = tokio::time::timeout(timeout, run).await;
        if let Ok(Ok(_)) = &reply {
            self.note_ran(script);
        }
        self.settle(reply.ok(), subject)
    }

    /// Runs `script` over the lane of the event loop polling this call ([`crate::loop_lane`]),
    /// bounded by the response timeout; `None` when there is no such lane.
    async fn eval_on_loop(
        &self,
        lanes: &crate::lane::Lanes,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
    ) -> Option<crate::lane::Trip> {
        // A script's first runs go the usual way: on the multiplexed connection a burst sends it
        // whole once and the others by SHA1 behind it, in order. Sent whole on a lane while
        // other calls of the burst went the usual way, it was sent whole on both.
        if !self.ran(script) {
            return None;
        }
        let command = |whole: bool| script_cmd(script, keys, args, whole);
        let request = crate::loop_lane::send(lanes, || command(false))?;
        let timeout = self.inner.response_timeout;
        let trip = tokio::time::timeout(timeout, request)
            .await
            .unwrap_or(crate::lane::Trip::NoAnswer);
        match trip {
            crate::lane::Trip::Reply(Err(e))
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                // Sent whole on the same lane (in order behind the first), or, with no room on
                // it (many calls at once) or the lane gone (the client closing), the usual way,
                // which loads the script itself. The first request was answered: nothing of it
                // is left to overtake.
                let request = crate::loop_lane::send(lanes, || command(true))?;
                Some(
                    tokio::time::timeout(timeout, request)
                        .await
                        .unwrap_or(crate::lane::Trip::NoAnswer),
                )
            }
            trip => Some(trip),
        }
    }

    /// Runs `script` over a lane of `lanes`: the caller's own (a sync caller on its thread), or
    /// its event loop's; `None` when neither is to be had.
    async fn trip_on_lane(
        &self,
        lanes: &crate::lane::Lanes,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
    ) -> Option<crate::lane::Trip> {
        if crate::lane::on_lane()
            && !lanes.has_overdue()
            && let Some(trip) = lanes.eval(script, keys, args, self.knows(script))
        {
            return Some(trip);
        }
        self.eval_on_loop(lanes, script, keys, args).await
    }

    /// On a cluster: the lanes of the master serving `slot`, when the slot map is at hand (it
    /// is read in the background when missing or old).
    fn node_pool(
        &self,
        nodes: &crate::cluster::NodeLanes,
        slot: u16,
    ) -> Option<Arc<crate::lane::Lanes>> {
        // Most calls are on no lane: no map is read for them.
        if !crate::lane::on_lane() && !crate::loop_lane::polled_by_a_loop() {
            return None;
        }
        let (pool, read) = nodes.for_slot(slot);
        if read {
            self.read_map();
        }
        pool
    }

    /// On a cluster, which master serves the slot of `key`, as far as the lanes' slot map knows
    /// (an id that tells the masters apart); `None` on one server, over TLS (no lanes), or while
    /// the map is not read.
    pub(crate) fn master_of_key(&self, key: &str) -> Option<u64> {
        let nodes = self.inner.node_lanes.as_ref()?;
        nodes.master_id(crate::cluster::slot(key.as_bytes()))
    }

    /// On a cluster, which master serves each of `keys` (ids that tell the masters apart), from
    /// the lanes' slot map or, where that is not read (over TLS, before any call took a lane),
    /// from `CLUSTER SLOTS` asked now; `None` for every key on one server, or when no node
    /// answers.
    pub(crate) async fn masters_of(&self, keys: &[&str]) -> Vec<Option<u64>> {
        if !self.is_cluster() {
            return vec![None; keys.len()];
        }
        let known: Vec<Option<u64>> = keys.iter().map(|key| self.master_of_key(key)).collect();
        if known.iter().all(Option::is_some) {
            return known;
        }
        let Ok(ranges) = self.cluster_slot_ranges().await else {
            return vec![None; keys.len()];
        };
        let mut masters: Vec<&(String, u16)> = Vec::new();
        keys.iter()
            .map(|key| {
                let slot = crate::cluster::slot(key.as_bytes());
                let (_, _, master) = ranges
                    .iter()
                    .find(|(first, last, _)| (*first..=*last).contains(&slot))?;
                let id = match masters.iter().position(|m| *m == master) {
                    Some(at) => at,
                    None => {
                        masters.push(master);
                        masters.len() - 1
                    }
                };
                Some(id as u64)
            })
            .collect()
    }

    /// Reads the cluster's slot map for its lanes, in the background (one read at a time).
    fn read_map(&self) {
        let Some(nodes) = &self.inner.node_lanes else {
            return;
        };
        if !nodes.begin_read() {
            return;
        }
        let conn = self.clone();
        crate::runtime::spawn(async move {
            // Asked of one node first: the lanes' map is read every few seconds by every busy
            // client, and asking every node each time cost the cluster as many `CLUSTER SLOTS`
            // as it has nodes. Every node is asked when that one does not answer.
            let ranges = match conn.slot_ranges_of_one_node().await {
                Some(ranges) => Some(ranges),
                None => conn.cluster_slot_ranges().await.ok(),
            };
            if let Some(nodes) = &conn.inner.node_lanes {
                nodes.set_map(ranges);
            }
        });
    }

    /// Waits, at most the response timeout, until no lane that a command on `key` could be
    /// queued behind has a reply overdue (see [`crate::lane`]).
    async fn lanes_settled(&self, key: &str) {
        if let Some(lanes) = &self.inner.link.load().lanes {
            lanes.settled(self.inner.response_timeout).await;
        }
        if let Some(nodes) = &self.inner.node_lanes {
            let slot = crate::cluster::slot(key.as_bytes());
            nodes.settled(Some(slot), self.inner.response_timeout).await;
        }
    }

    /// The result of a script run over a lane, as [`Conn::settle`] gives it.
    fn settle_trip<T: redis::FromRedisValue>(
        &self,
        trip: crate::lane::Trip,
        script: &Lua,
        subject: What<'_>,
    ) -> Result<T> {
        let reply = match trip {
            crate::lane::Trip::Reply(reply) => {
                if reply.is_ok() {
                    self.inner.loaded.insert(script);
                    self.note_ran(script);
                }
                Some(reply.and_then(|v| T::from_redis_value(v).map_err(Into::into)))
            }
            crate::lane::Trip::NoAnswer => None,
        };
        self.settle(reply, subject)
    }

    /// Sends acquisitions (scripts marked `synced`) to `acquisitions`, each followed by `WAIT`
    /// for `sync.replicas` replicas.
    pub(crate) fn wait_for_replicas(&self, acquisitions: Conn, sync: crate::options::ReplicaSync) {
        let _ = self.inner.sync.set((acquisitions, sync));
    }

    /// Runs `script` and `WAIT <replicas> <timeout>` right behind it, in one pipeline on this
    /// connection (so that the `WAIT` counts this script's write, even if the connection is
    /// replaced meanwhile), and notes how many replicas acknowledged for the acquire loop
    /// ([`counting_replica_acks`]). Bounded by the response timeout plus the `WAIT`.
    async fn eval_and_wait<T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: What<'_>,
        sync: crate::options::ReplicaSync,
    ) -> Result<T> {
        if self.is_cluster() {
            crate::cluster::script_slot(keys)?;
        }
        let mut manager = self.manager();
        self.touch();
        let pipeline = |whole: bool| {
            let mut pipe = redis::pipe();
            pipe.add_command(script_cmd(script, keys, args, whole))
                .cmd("WAIT")
                .arg(sync.replicas)
                .arg(sync.timeout.as_millis() as u64);
            pipe
        };
        let whole = self.first_send(script);
        let run = async {
            let first = pipeline(whole).query_async::<(T, i64)>(&mut manager).await;
            match first {
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    pipeline(true).query_async::<(T, i64)>(&mut manager).await
                }
                other => other,
            }
        };
        let bound = self.inner.response_timeout + sync.timeout;
        let reply = tokio::time::timeout(bound, run).await;
        let (value, acks) = self.settle(reply.ok(), subject)?;
        note_replica_acks(acks);
        Ok(value)
    }

    /// On a cluster: runs a per-node `script` (see `scripts::node_script!`, no declared keys) on
    /// `master` itself, over its link in `links` (see [`MasterLinks`]; opened when there is
    /// none). `slot` is one the script's keys hash to: the script waits, as every command sent to
    /// that master, for an overdue lane reply of it. `EVALSHA` first, the whole script on
    /// `NOSCRIPT`. A link that fails is dropped (the next call opens another); one that had been
    /// used before is tried again once on a new link first (the server may have closed it
    /// idle). Errors as [`Conn::eval`], but the command connection's health is not touched: it
    /// was not used.
    pub(crate) async fn eval_on_master<'w, T: redis::FromRedisValue>(
        &self,
        links: &MasterLinks,
        master: &(String, u16),
        slot: u16,
        script: &Lua,
        args: &[&dyn ToArg],
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let subject = subject.into();
        if let Some(nodes) = &self.inner.node_lanes {
            nodes.settled(Some(slot), self.inner.response_timeout).await;
        }
        // No declared keys: the script's own header takes them from its arguments.
        let run = |mut link: redis::aio::MultiplexedConnection| async move {
            let first = script_cmd(script, &[], args, false)
                .query_async::<redis::Value>(&mut link)
                .await;
            match first {
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    script_cmd(script, &[], args, true)
                        .query_async::<redis::Value>(&mut link)
                        .await
                }
                other => other,
            }
        };
        let timeout = self.inner.response_timeout;
        let (mut link, mut reused) = links.get(self, master).await?;
        loop {
            let reply = tokio::time::timeout(timeout, run(link)).await;
            let failed = match &reply {
                Err(_) => true,
                Ok(Err(e)) => e.is_io_error() || e.is_connection_dropped() || e.is_timeout(),
                Ok(Ok(_)) => false,
            };
            if failed {
                links.drop_link(master);
                // Closed under it (not slow to answer: that one is not waited for twice).
                if reused && matches!(&reply, Ok(Err(e)) if !e.is_timeout()) {
                    (link, reused) = (links.open(self, master).await?, false);
                    continue;
                }
            }
            return match reply {
                Ok(reply) => reply
                    .and_then(|v| T::from_redis_value(v).map_err(Into::into))
                    .map_err(|e| Error::from_redis(e, subject)),
                Err(_) => Err(Error::no_answer(subject, timeout)),
            };
        }
    }

    /// On a cluster: a new link to `master` (see [`MasterLinks`]), bounded by the connect
    /// timeout.
    async fn open_master_link(
        &self,
        (host, port): &(String, u16),
    ) -> Result<redis::aio::MultiplexedConnection> {
        let Some(ClusterRoute { spec, .. }) = &self.inner.route.cluster else {
            return Err(Error::new(
                ErrorKind::Redis,
                "a link to a cluster master was asked of a connection that is not to a cluster",
            ));
        };
        let address = crate::transport::endpoint::host_port(host, *port);
        let info = spec.node_info(host, *port).map_err(|e| {
            Error::invalid(format!("bad cluster node address '{address}': {e}")).with_source(e)
        })?;
        let node = Node { info, address };
        let client = self
            .inner
            .route
            .endpoint
            .client(&node, ProtocolVersion::RESP2)?;
        let timeouts = self.inner.timeouts;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeouts.connect))
            .set_response_timeout(Some(timeouts.response));
        let link = connect_within(
            &node,
            timeouts,
            client.get_multiplexed_async_connection_with_config(&config),
            None,
        )
        .await?;
        let (mut named, name) = (link.clone(), self.inner.route.name.clone());
        crate::runtime::spawn(async move {
            let mut cmd = redis::cmd("CLIENT");
            cmd.arg("SETNAME").arg(&*name);
            let _ = tokio::time::timeout(
                timeouts.response,
                cmd.query_async::<redis::Value>(&mut named),
            )
            .await;
        });
        Ok(link)
    }

    /// On a cluster: which master serves each slot, from `CLUSTER SLOTS` asked of every node
    /// the routed way knows, the first answer taken (a node that does not answer, or one whose
    /// slots were failed over, holds nothing up).
    pub(crate) async fn cluster_slot_ranges(&self) -> Result<Vec<SlotRange>> {
        use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
        let Handle::Cluster(mut cluster) = self.manager() else {
            return Err(Error::new(
                ErrorKind::Redis,
                "the cluster's slots were asked of a connection that is not to a cluster",
            ));
        };
        let routing = RoutingInfo::MultiNode((
            MultipleNodeRoutingInfo::AllNodes,
            Some(ResponsePolicy::OneSucceeded),
        ));
        let reply = self.ask_cluster_slots(&mut cluster, routing).await;
        let slots = self.settle(reply, What::Connection)?;
        Ok(slot_ranges(&slots))
    }

    /// `CLUSTER SLOTS`, routed as `routing`; `None` when no answer came within the response
    /// timeout.
    async fn ask_cluster_slots(
        &self,
        cluster: &mut ClusterConnection,
        routing: redis::cluster_routing::RoutingInfo,
    ) -> Option<redis::RedisResult<redis::Value>> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let ask = async {
            let reply = cluster.route_command(cmd, routing).await;
            reply.and_then(redis::Value::extract_error)
        };
        tokio::time::timeout(self.inner.response_timeout, ask)
            .await
            .ok()
    }

    /// On a cluster: which master serves each slot, from `CLUSTER SLOTS` asked of one node the
    /// routed way is connected to, picked at random; `None` when it gave no usable answer within
    /// the response timeout. Unlike [`Conn::cluster_slot_ranges`], a node that does not answer is
    /// not taken for a lost connection (another node may answer at once).
    async fn slot_ranges_of_one_node(&self) -> Option<Vec<SlotRange>> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let Handle::Cluster(mut cluster) = self.manager() else {
            return None;
        };
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let slots = self.ask_cluster_slots(&mut cluster, routing).await?.ok()?;
        Some(slot_ranges(&slots)).filter(|ranges| !ranges.is_empty())
    }

    /// The result of one command bounded by the response timeout: its reply, or the error that
    /// says what happened, noting on the way whether the connection was lost or answered.
    fn settle<T>(&self, reply: Option<redis::RedisResult<T>>, subject: What<'_>) -> Result<T> {
        match reply {
            Some(Ok(value)) => {
                self.note_answered();
                Ok(value)
            }
            Some(Err(e)) => {
                self.check_lost(&e);
                let error = Error::from_redis(e, subject);
                // A cluster connection retries a request on its own: a refusal there may come
                // after the command went out once, so it is not known to be unsent.
                Err(if self.is_cluster() {
                    error.maybe_sent()
                } else {
                    error
                })
            }
            None => {
                self.no_answer();
                Err(Error::no_answer(subject, self.inner.response_timeout))
            }
        }
    }

    /// After the connection may have been lost, the next connection may reach a server that
    /// restarted (an empty script cache): each script's next run is sent whole again.
    fn forget_scripts(&self) {
        self.inner.loaded.clear();
        self.inner.ran.clear();
    }

    fn check_lost(&self, e: &redis::RedisError) {
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
        {
            self.forget_scripts();
            self.note_lost(e);
            if e.is_timeout() {
                self.check_routing();
            }
        } else {
            if matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING")) {
                // A replica, or a master cut off from its group: the master may have moved.
                self.inner.route.suspect();
            }
            self.note_answered();
        }
    }

    fn no_answer(&self) {
        self.forget_scripts();
        self.note_lost(&format_args!(
            "no answer within {:?}",
            self.inner.response_timeout
        ));
        self.check_routing();
    }

    /// On a cluster, after a command got no answer: the master it went to may have stopped
    /// answering and been failed over (a hung process, a host cut off without a reset). The
    /// routed way (redis-rs's cluster connection) would not learn it: it reads the cluster's map
    /// again only on a redirect or a broken connection, and a stopped master gives neither, so
    /// it kept sending that master's slots there, each command failing after the response
    /// timeout, for as long as the master stayed stopped.
    ///
    /// Reads the map (at most once per response timeout) and hands it to the lanes; when it
    /// changed since the last such check (or on the first), opens a fresh cluster connection
    /// in the background and swaps it in ([`Conn::follow_failover`]).
    fn check_routing(&self) {
        // A subscription connection is rebuilt its own way (see [`Conn::recover`]).
        if !self.is_cluster() || self.inner.health.role != "command" {
            return;
        }
        let now = self.inner.epoch.elapsed().as_millis() as u64 + 1;
        let last = self.inner.routing_checked.load(Ordering::Acquire);
        let spacing = self.inner.response_timeout.as_millis() as u64;
        if (last != 0 && now < last + spacing)
            || self
                .inner
                .routing_checked
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        if self.inner.routing_busy.swap(true, Ordering::AcqRel) {
            return; // a check is under way
        }
        let conn = self.clone();
        crate::runtime::spawn(async move {
            conn.follow_failover().await;
            conn.inner.routing_busy.store(false, Ordering::Release);
        });
    }

    /// See [`Conn::check_routing`]. Not a redirect that makes the routed way read the map
    /// again: redis-rs asks its nodes in turn, the stopped one among them, and every routed
    /// call waits meanwhile (up to the response timeout). A fresh connection is opened while
    /// calls go on with the old one; the stopped master never completes its handshake, so the
    /// new connection's map comes from one that answers.
    async fn follow_failover(&self) {
        let Some(ClusterRoute { spec, .. }) = &self.inner.route.cluster else {
            return;
        };
        let Ok(mut ranges) = self.cluster_slot_ranges().await else {
            return; // no node answered: the next check asks again
        };
        if ranges.is_empty() {
            return;
        }
        ranges.sort_unstable();
        if let Some(nodes) = &self.inner.node_lanes
            && nodes.begin_read()
        {
            nodes.set_map(Some(ranges.clone()));
        }
        // Unchanged since the connection was last opened for it: the master that did not
        // answer still serves its slots (a pause, not a failover).
        if lock(&self.inner.routing_seen).as_ref() == Some(&ranges) {
            return;
        }
        // Seeded with the masters as the map has them now (not the URL's seeds: the stopped
        // master may be one of them, and the connection waits for every seed).
        let mut seeded = crate::cluster::ClusterSpec::clone(spec);
        seeded.seeds.clear();
        for (_, _, master) in &ranges {
            if !seeded.seeds.contains(master) {
                seeded.seeds.push(master.clone());
            }
        }
        let fresh = open_cluster(
            &self.inner.route.endpoint,
            &seeded,
            self.inner.timeouts,
            self.inner.pushes.clone(),
        )
        .await;
        let Ok(fresh) = fresh else {
            return; // the next check tries again
        };
        // Calls in flight finish (or fail) on the old connection.
        let node = self.inner.link.load().node.clone();
        self.inner.link.store(Arc::new(Link::new(
            Handle::Cluster(fresh),
            node,
            self.inner.timeouts,
            self.inner.health.role,
            &self.inner.route.name,
        )));
        *lock(&self.inner.routing_seen) = Some(ranges);
        tracing::info!(
            target: "crosslock",
            "command connection to the {} opened again after a node stopped answering and the \
             cluster's slot map changed",
            self.inner.route.endpoint.address,
        );
    }

    /// Runs one plain command, bounded by the response timeout. A command on `key` is queued
    /// behind a lane's overdue request that could touch it, as [`Conn::eval`]; one on no key
    /// (`PING`, `SCAN`, `CLUSTER SLOTS`) needs no such order and is sent at once.
    pub(crate) async fn query<'w, T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        key: Option<&str>,
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let subject = subject.into();
        if let Some(key) = key {
            self.lanes_settled(key).await;
        }
        let mut manager = self.manager();
        self.touch();
        let reply =
            tokio::time::timeout(self.inner.response_timeout, cmd.query_async(&mut manager)).await;
        self.settle(reply.ok(), subject)
    }

    /// `CLIENT LIST` of the node that holds `key` (on a cluster, the master of its slot; behind
    /// Sentinel, the master): for the inspector to name the processes behind holders.
    pub(crate) async fn client_list(&self, key: &str) -> Result<String> {
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("LIST");
        self.touch();
        let reply = match self.manager() {
            Handle::Cluster(mut cluster) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let slot = crate::cluster::slot(key.as_bytes());
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::new(slot, SlotAddr::Master),
                ));
                let ask = async {
                    cluster
                        .route_command(cmd, routing)
                        .await
                        .and_then(redis::Value::extract_error)
                        .and_then(|v| redis::from_redis_value::<String>(v).map_err(Into::into))
                };
                tokio::time::timeout(self.inner.response_timeout, ask).await
            }
            mut manager => {
                tokio::time::timeout(self.inner.response_timeout, cmd.query_async(&mut manager))
                    .await
            }
        };
        self.settle(reply.ok(), What::Connection)
    }

    /// Subscribes to `channel`: SUBSCRIBE on the current master and on every later one; on a
    /// cluster, SSUBSCRIBE on the node owning the channel's slot where waiters use sharded
    /// pub/sub (followed when the slot moves).
    pub(crate) async fn subscribe(&self, channel: &str) -> Result<()> {
        lock(&self.inner.subscriptions)
            .channels
            .insert(channel.to_owned());
        let sharded = self.sharded();
        self.pubsub_command(|m| async move {
            match m {
                Handle::Node(mut m) => m.subscribe(channel).await,
                Handle::Cluster(mut c) if sharded => c.ssubscribe(channel).await,
                Handle::Cluster(mut c) => c.subscribe(channel).await,
            }
        })
        .await
    }

    /// Whether `channel` is in this connection's subscription set (subscribed, and not since
    /// unsubscribed).
    pub(crate) fn is_subscribed(&self, channel: &str) -> bool {
        lock(&self.inner.subscriptions).channels.contains(channel)
    }

    /// Subscribes to every channel matching `pattern` (PSUBSCRIBE). Patterns see only plain
    /// messages: on a cluster whose waiters use sharded pub/sub, nothing.
    pub(crate) async fn psubscribe(&self, pattern: &str) -> Result<()> {
        lock(&self.inner.subscriptions)
            .patterns
            .insert(pattern.to_owned());
        self.pubsub_command(|m| async move {
            match m {
                Handle::Node(mut m) => m.psubscribe(pattern).await,
                Handle::Cluster(mut c) => c.psubscribe(pattern).await,
            }
        })
        .await
    }

    pub(crate) async fn unsubscribe(&self, channel: &str) -> Result<()> {
        lock(&self.inner.subscriptions).channels.remove(channel);
        let sharded = self.sharded();
        self.pubsub_command(|m| async move {
            match m {
                Handle::Node(mut m) => m.unsubscribe(channel).await,
                Handle::Cluster(mut c) if sharded => c.sunsubscribe(channel).await,
                Handle::Cluster(mut c) => c.unsubscribe(channel).await,
            }
        })
        .await
    }

    /// Runs a (un)subscription on the current master. Changes to the subscription set are made
    /// before the manager is read: a move that happens meanwhile subscribes the new master from
    /// that set after switching, so either the command or the move reaches the new master.
    async fn pubsub_command<F, Fut>(&self, command: F) -> Result<()>
    where
        F: FnOnce(Handle) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<()>>,
    {
        let manager = self.manager();
        self.touch();
        match tokio::time::timeout(self.inner.response_timeout, command(manager)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(e, What::Connection)),
            Err(_) => Err(Error::no_answer(
                What::Connection,
                self.inner.response_timeout,
            )),
        }
    }

    /// After the connection was lost: whether it serves again. For a single server or Sentinel,
    /// one `PING`. For a cluster subscription connection, once every master in the slot map
    /// answers (the failed one was replaced by its replica, or came back), the connection is
    /// rebuilt from a fresh slot map and subscribes again: redis-rs keeps a subscription on the
    /// node that failed until a command on that connection reveals the move, and a subscription
    /// connection sends none.
    pub(crate) async fn recover(&self) -> bool {
        let Some(ClusterRoute { spec, .. }) = &self.inner.route.cluster else {
            return self.ping().await.is_ok();
        };
        let mut handle = self.manager();
        let slots = tokio::time::timeout(
            self.inner.response_timeout,
            redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async::<redis::Value>(&mut handle),
        )
        .await;
        let Ok(Ok(slots)) = slots else {
            return false;
        };
        let masters = slot_masters(&slots);
        if masters.is_empty() {
            return false;
        }
        for (host, port) in &masters {
            let probe = tokio::net::TcpStream::connect((host.as_str(), *port));
            if !matches!(
                tokio::time::timeout(Duration::from_millis(300), probe).await,
                Ok(Ok(_))
            ) {
                return false;
            }
        }
        let fresh = match open_cluster(
            &self.inner.route.endpoint,
            spec,
            self.inner.timeouts,
            self.inner.pushes.clone(),
        )
        .await
        {
            Ok(fresh) => fresh,
            Err(_) => return false,
        };
        let old = self.inner.link.swap(Arc::new(Link::new(
            Handle::Cluster(fresh.clone()),
            self.inner.link.load().node.clone(),
            self.inner.timeouts,
            self.inner.health.role,
            &self.inner.route.name,
        )));
        // Subscribe the fresh connection to everything (a (un)subscription made meanwhile went
        // to the fresh one already, or is repeated here from the set).
        let channels: Vec<String> = lock(&self.inner.subscriptions)
            .channels
            .iter()
            .cloned()
            .collect();
        let patterns: Vec<String> = lock(&self.inner.subscriptions)
            .patterns
            .iter()
            .cloned()
            .collect();
        let sharded = self.sharded();
        let timeout = self.inner.response_timeout;
        let mut fresh = fresh;
        for channel in &channels {
            let subscribing = async {
                if sharded {
                    fresh.ssubscribe(channel).await
                } else {
                    fresh.subscribe(channel).await
                }
            };
            if !matches!(tokio::time::timeout(timeout, subscribing).await, Ok(Ok(()))) {
                return false;
            }
        }
        for pattern in &patterns {
            let _ = tokio::time::timeout(timeout, fresh.psubscribe(pattern)).await;
        }
        // A channel left while that ran may have been unsubscribed on the fresh connection
        // before it was subscribed again here: leave it again.
        let gone: Vec<&String> = {
            let subs = lock(&self.inner.subscriptions);
            channels
                .iter()
                .filter(|c| !subs.channels.contains(*c))
                .collect()
        };
        for channel in gone {
            let leaving = async {
                if sharded {
                    fresh.sunsubscribe(channel).await
                } else {
                    fresh.unsubscribe(channel).await
                }
            };
            let _ = tokio::time::timeout(timeout, leaving).await;
        }
        drop(old);
        tracing::info!(
            target: "crosslock",
            "subscription connection to the {} rebuilt after a node failed; {} channel(s) \
             subscribed again",
            self.inner.route.endpoint.address,
            channels.len()
        );
        true
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.query::<()>(&redis::cmd("PING"), None, What::Connection)
            .await
    }
}

/// A range of slots and the master serving them: first slot, last slot, (host, port).
pub(crate) type SlotRange = (u16, u16, (String, u16));

/// The ranges of a `CLUSTER SLOTS` reply.
fn slot_ranges(reply: &redis::Value) -> Vec<SlotRange> {
    let redis::Value::Array(ranges) = reply else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for range in ranges {
        let redis::Value::Array(fields) = range else {
            continue;
        };
        let (Some(redis::Value::Int(first)), Some(redis::Value::Int(last))) =
            (fields.first(), fields.get(1))
        else {
            continue;
        };
        let Some(master) = fields.get(2).and_then(node_address) else {
            continue;
        };
        if let (Ok(first), Ok(last)) = (u16::try_from(*first), u16::try_from(*last)) {
            out.push((first, last, master));
        }
    }
    out
}

/// A node's `[host, port, ...]` entry of a `CLUSTER SLOTS` reply.
fn node_address(node: &redis::Value) -> Option<(String, u16)> {
    let redis::Value::Array(node) = node else {
        return None;
    };
    let host = match node.first() {
        Some(redis::Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
        Some(redis::Value::SimpleString(h)) => h.clone(),
        _ => return None,
    };
    let Some(redis::Value::Int(port)) = node.get(1) else {
        return None;
    };
    Some((host, u16::try_from(*port).ok()?))
}

/// The `(host, port)` of every master in a `CLUSTER SLOTS` reply.
fn slot_masters(reply: &redis::Value) -> Vec<(String, u16)> {
    let mut out: Vec<(String, u16)> = Vec::new();
    for (_, _, node) in slot_ranges(reply) {
        if !out.contains(&node) {
            out.push(node);
        }
    }
    out
}

/// A link of its own to each master of a cluster, for scripts that must run on that master and
/// nowhere else: the per-node renewal scripts ([`Conn::eval_on_master`]).
///
/// The routed way (redis-rs's cluster connection) sends a command whose node it cannot reach to
/// another node of the slot's shard, or to any node: while a master was down (and not yet
/// failed over) a per-node renewal script ran on some other node, found none of its keys there
/// and handed them on to be renewed by slot, and each of those scripts failed on the refused
/// node, made the cluster connection read the slot map again and report itself lost and back,
/// at every renewal retry. Over its own link a master that cannot be reached fails at once
/// (`Unavailable`), and nothing is sent anywhere else.
#[derive(Default)]
pub(crate) struct MasterLinks {
    links: std::sync::Mutex<
        std::collections::HashMap<(String, u16), redis::aio::MultiplexedConnection>,
    >,
}

impl MasterLinks {
    /// The link to `master`, and whether it was opened before this call (used before).
    async fn get(
        &self,
        conn: &Conn,
        master: &(String, u16),
    ) -> Result<(redis::aio::MultiplexedConnection, bool)> {
        if let Some(link) = lock(&self.links).get(master) {
            return Ok((link.clone(), true));
        }
        Ok((self.open(conn, master).await?, false))
    }

    /// Opens a link to `master` (replacing any), bounded by the connect timeout.
    async fn open(
        &self,
        conn: &Conn,
        master: &(String, u16),
    ) -> Result<redis::aio::MultiplexedConnection> {
        let link = conn.open_master_link(master).await?;
        lock(&self.links).insert(master.clone(), link.clone());
        Ok(link)
    }

    /// Makes sure there is a link to `master`: opens one if there is none.
    pub(crate) async fn ready(&self, conn: &Conn, master: &(String, u16)) -> Result<()> {
        self.get(conn, master).await.map(drop)
    }

    fn drop_link(&self, master: &(String, u16)) {
        lock(&self.links).remove(master);
    }

    /// Closes the links to nodes that are not masters any more (`keep` says which are).
    pub(crate) fn retain(&self, keep: impl Fn(&(String, u16)) -> bool) {
        lock(&self.links).retain(|master, _| keep(master));
    }
}

async fn open_manager(
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
fn name_connection(manager: Handle, name: Arc<str>, response: Duration) {
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

/// Sends `cmd` to one master of the cluster: `None` if it answered, the error reply if it refused
/// (a command or a script it does not know, say), an error if it did not answer. A master: a
/// replica refuses a script that may write, whatever its server knows.
async fn ask_one_master(
    probe: &mut ClusterConnection,
    cmd: redis::Cmd,
    response: Duration,
) -> Result<Option<redis::RedisError>> {
    use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
    let one = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
    let asked = async {
        probe
            .route_command(cmd, one)
            .await
            .and_then(redis::Value::extract_error)
    };
    match tokio::time::timeout(response, asked).await {
        Ok(Ok(_)) => Ok(None),
        Ok(Err(e)) if e.code().is_some() => Ok(Some(e)),
        Ok(Err(e)) => Err(Error::from_redis(e, What::Connection)),
        Err(_) => Err(Error::no_answer(What::Connection, response)),
    }
}

/// Connects to a Redis Cluster through its seed nodes (RESP3; pushes, disconnections included,
/// go to `pushes`).
async fn open_cluster(
    endpoint: &Endpoint,
    spec: &ClusterSpec,
    timeouts: Timeouts,
    pushes: Pushes,
) -> Result<ClusterConnection> {
    let seeds = spec.seed_infos()?;
    let mut builder = redis::cluster::ClusterClientBuilder::new(seeds.clone())
        .use_protocol(ProtocolVersion::RESP3)
        .connection_timeout(timeouts.connect)
        .response_timeout(timeouts.response)
        .retries(3)
        .min_retry_wait(50)
        .max_retry_wait(500)
        .push_sender(pushes);
    if let Some(pem) = &endpoint.tls_ca {
        builder = builder.certs(redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        });
    }
    let client = builder.build().map_err(|e| {
        Error::invalid(format!(
            "cannot set up the connection to the {}: {e}",
            endpoint.address
        ))
        .with_source(e)
    })?;
    let node = Node {
        info: seeds[0].clone(),
        address: endpoint.address.clone(),
    };
    connect_within(&node, timeouts, client.get_async_connection(), None).await
}

/// Moves a connection to each new master the route announces: connects to it (retrying while it
/// is still the master and not yet reachable), subscribes there to what the old one was
/// subscribed to, then switches; commands in flight finish (or fail) on the old one.
async fn follow_master(
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
                        &inner.route.name,
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

/// Subscribes `manager` (the new master's) to everything `conn` is subscribed to, and leaves
/// again what was unsubscribed while that ran.
async fn resubscribe(conn: &Conn, mut manager: ConnectionManager) {
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
async fn keepalive(conn: Conn, stop: CancellationToken) {
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
async fn connect_within<F, C>(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The level of every `crosslock` event `f` logs.
    fn levels_logged(f: impl FnOnce()) -> Vec<tracing::Level> {
        use tracing_subscriber::layer::SubscriberExt;
        struct Levels(Arc<std::sync::Mutex<Vec<tracing::Level>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Levels {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                lock(&self.0).push(*event.metadata().level());
            }
        }
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Levels(seen.clone()));
        tracing::subscriber::with_default(subscriber, f);
        lock(&seen).clone()
    }

    #[test]
    fn a_flapping_connection_is_told_once_per_quiet_spell() {
        use tracing::Level;
        // Made a minute ago, so that "a quiet spell ago" is a time after it.
        let health = Health {
            born: Instant::now() - Duration::from_secs(60),
            ..Health::new("command")
        };
        let why = "connection refused";
        let first = levels_logged(|| {
            for _ in 0..5 {
                health.lost("127.0.0.1:7000", &why);
                health.lost("127.0.0.1:7000", &why); // the same loss: nothing
                health.answered("127.0.0.1:7000");
                health.answered("127.0.0.1:7000"); // back already: nothing
            }
        });
        // The first loss and return as a warning and information, the flaps after them within
        // FLAP_QUIET at debug level only.
        let mut expected = vec![Level::WARN, Level::INFO];
        expected.extend([Level::DEBUG; 8]);
        assert_eq!(first, expected);
        // FLAP_QUIET later (as if): told again.
        let quiet = FLAP_QUIET.as_millis() as u64;
        let now = health.born.elapsed().as_millis() as u64;
        health.warned_at.store(now - quiet, Ordering::Relaxed);
        let later = levels_logged(|| {
            health.lost("127.0.0.1:7000", &why);
            health.answered("127.0.0.1:7000");
        });
        assert_eq!(later, vec![Level::WARN, Level::INFO]);
    }

    #[test]
    fn rejects_foreign_scheme() {
        let err = Endpoint::parse("http://localhost:6379", None)
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("redis://"));
        // Short: the expected forms, not their every option.
        assert!(err.to_string().len() < 200, "{err}");
    }
}

tokio::task_local! {
    /// The fewest replicas that acknowledged a synced script of the current attempt.
    static REPLICA_ACKS: std::cell::Cell<Option<i64>>;
}

/// Notes that `acks` replicas acknowledged a synced script (a no-op outside
/// [`counting_replica_acks`]).
fn note_replica_acks(acks: i64) {
    let _ = REPLICA_ACKS.try_with(|seen| {
        seen.set(Some(seen.get().map_or(acks, |before| before.min(acks))));
    });
}

/// Runs `attempt` and says, beside its result, the fewest replicas that acknowledged a synced
/// script it ran (`None`: it ran none). The acks ride a task-local scoped to `attempt` rather than
/// `eval`'s return value because every object's attempt calls `eval` with its own reply type.
pub(crate) async fn counting_replica_acks<T>(
    attempt: impl std::future::Future<Output = T>,
) -> (T, Option<i64>) {
    REPLICA_ACKS
        .scope(std::cell::Cell::new(None), async {
            let result = attempt.await;
            (result, REPLICA_ACKS.with(std::cell::Cell::get))
        })
        .await
}
