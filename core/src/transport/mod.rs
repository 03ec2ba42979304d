//! Connections to the deployment, behind one type whatever its topology.
//!
//! A single server, the master of a Sentinel group (followed through failovers by [`Route`]),
//! or a Redis Cluster (redis-rs's cluster connection, see [`cluster`]). Everything else in
//! the crate talks to [`Conn`] through a few operations (run a script on the node owning its
//! keys, the publish command to use, subscribe), whatever the topology.

pub(crate) mod cluster;
pub(crate) mod endpoint;
pub(crate) mod fanout;
mod health;
pub(crate) mod lane;
pub(crate) mod pubsub;
mod replicas;
mod route;
pub(crate) mod script_call;
mod script_run;
pub(crate) mod sentinel;
mod single;
mod subscriptions;

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

use crate::error::{Error, ErrorKind, Result, What};
use crate::telemetry::{ConnectionChange, ConnectionRole};
use crate::transport::cluster::ClusterSpec;
use crate::transport::endpoint::Node;
use crate::transport::sentinel::follow_master;
use crate::util::lock;
use cluster::links::MasterLinks;
use cluster::links::open_cluster;
use cluster::map::SlotRange;
use cluster::map::slot_masters;
pub(crate) use endpoint::Endpoint;
use health::Health;
pub(crate) use replicas::ReplicaAcks;
pub(crate) use route::{ClusterRoute, Route};
use script_call::with_noscript_fallback;
pub(crate) use script_call::{ToArg, script_cmd};
use single::{connect_within, keepalive, name_connection, open_manager, resubscribe};

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
    node_lanes: Option<crate::transport::cluster::NodeLanes>,
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
    /// Blocking connections to `node` for callers on their own thread (see [`lane`]):
    /// only on a command connection to one node over TCP or a Unix socket, unless the client's
    /// [`Route::lanes`] is `Off`.
    lanes: Option<crate::transport::lane::LanePool>,
}

impl Link {
    /// Names the connection (`CLIENT SETNAME`, with the name of `route`'s client, sent without
    /// waiting for it: the next commands are pipelined behind it).
    fn new(
        manager: Handle,
        node: Node,
        timeouts: Timeouts,
        role: &'static str,
        route: &Route,
    ) -> Self {
        let name = &route.name;
        name_connection(manager.clone(), name.clone(), timeouts.response);
        let lanes = match (&manager, role) {
            (Handle::Node(_), "command") if route.lanes.any() => {
                crate::transport::lane::LanePool::new(
                    &node.info,
                    timeouts.connect,
                    timeouts.response,
                    name.clone(),
                )
            }
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
        // In crosslock's runtime, whoever calls: see `runtime::in_context`.
        Box::pin(crate::runtime::in_context(match self {
            Handle::Node(m) => m.req_packed_command(cmd),
            Handle::Cluster(c) => c.req_packed_command(cmd),
        }))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(crate::runtime::in_context(match self {
            Handle::Node(m) => m.req_packed_commands(pipeline, offset, count),
            Handle::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }))
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
                link: ArcSwap::from_pointee(Link::new(manager, node, timeouts, role, route)),
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
                    Some(cluster) if role == "command" && route.lanes.any() => {
                        crate::transport::cluster::NodeLanes::new(
                            &cluster.spec,
                            timeouts.connect,
                            timeouts.response,
                            route.name.clone(),
                        )
                    }
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
        if self.inner.health.lost(&self.address(), why) {
            self.tell(ConnectionChange::Lost);
        }
        self.inner.route.suspect();
    }

    /// Whether the last command on this connection found it down (refused, dropped) and none
    /// has been answered since.
    pub(crate) fn is_down(&self) -> bool {
        self.inner.health.down.load(Ordering::Relaxed)
    }

    /// Logs the connection coming back (once) after it was lost.
    pub(crate) fn note_answered(&self) {
        if self.inner.health.down.load(Ordering::Relaxed)
            && self.inner.health.answered(&self.address())
        {
            self.tell(ConnectionChange::Back);
        }
    }

    /// Tells telemetry (if any) what happened to this connection.
    pub(in crate::transport) fn tell(&self, change: ConnectionChange) {
        if let Some(telemetry) = &self.inner.route.telemetry {
            let role = match self.inner.health.role {
                "subscription" => ConnectionRole::Subscription,
                _ => ConnectionRole::Command,
            };
            telemetry.record(&crate::telemetry::Event::Connection { change, role });
        }
    }

    /// What the client tells what it measures (`ClientOptions::telemetry`), if anything.
    pub(crate) fn telemetry(&self) -> Option<&crate::telemetry::Telemetry> {
        self.inner.route.telemetry.as_ref()
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
    pub(in crate::transport) fn cross_slot_scripts(&self) -> bool {
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
    /// stops waiting still runs once Redis gets to it. Acquisitions go through
    /// [`Conn::eval_synced`] instead. Inside one of crosslock's spans (see
    /// [`crate::telemetry::spans`]), in a client span of its own.
    pub(crate) async fn eval<'w, T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let call = self.eval_untraced(script, keys, args, subject.into());
        crate::telemetry::spans::script(
            self.telemetry(),
            script.name,
            || self.address(),
            false,
            call,
        )
        .await
    }

    /// [`Conn::eval`] without its span.
    pub(in crate::transport) async fn eval_untraced<'w, T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: What<'w>,
    ) -> Result<T> {
        let slot = if self.is_cluster() {
            crate::transport::cluster::script_slot(keys)?
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
                    crate::transport::lane::Trip::Reply(Err(e))
                        if crate::transport::cluster::is_redirect(&e) =>
                    {
                        nodes.forget_map();
                        self.read_map();
                    }
                    trip => return self.settle_trip(trip, script, subject),
                }
            }
            nodes.settled(slot, self.inner.response_timeout).await;
        }
        let manager = self.manager();
        let timeout = self.inner.response_timeout;
        // One command buffer, built once: `redis::Script`'s invocation kept each argument in a
        // buffer of its own and then copied them all into the command (and, on `NOSCRIPT`, made
        // two more round trips: `SCRIPT LOAD`, then `EVALSHA` again).
        let whole = self.first_send(script);
        let run = with_noscript_fallback(manager, whole, |mut manager, whole| {
            let command = script_cmd(script, keys, args, whole);
            async move {
                let reply = command.query_async::<T>(&mut manager).await;
                (manager, reply)
            }
        });
        let reply = tokio::time::timeout(timeout, run).await;
        if let Ok(Ok(_)) = &reply {
            self.note_ran(script);
        }
        self.settle(reply.ok(), subject)
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
                let slot = crate::transport::cluster::slot(key.as_bytes());
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
                let ask = crate::runtime::in_context(Box::pin(ask));
                tokio::time::timeout(self.inner.response_timeout, ask).await
            }
            mut manager => {
                tokio::time::timeout(self.inner.response_timeout, cmd.query_async(&mut manager))
                    .await
            }
        };
        self.settle(reply.ok(), What::Connection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
