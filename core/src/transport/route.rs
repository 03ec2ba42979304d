//! [`Route`]: which node the connections of one client talk to, found when the client connects
//! (asking the sentinels, or probing a cluster for what its nodes support).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::transport::cluster::links::{ask_one_master, open_cluster};
use crate::transport::cluster::{ClusterSpec, Sharding};
use crate::transport::endpoint::{Endpoint, Node, Target};
use crate::transport::sentinel::{Sentinels, follow_sentinels};
use crate::transport::{Pushes, Timeouts};

/// Which node the connections of one client talk to: fixed for a single server; for Sentinel,
/// the current master, followed through failovers.
pub(crate) struct Route {
    pub(super) endpoint: Endpoint,
    pub(super) current: tokio::sync::watch::Sender<Node>,
    /// Set for Sentinel: the sentinels, and the signal that a command suspects the master moved.
    pub(super) sentinels: Option<(Sentinels, Arc<tokio::sync::Notify>)>,
    /// Set for Cluster: the cluster, and what its nodes were found to support at connect.
    pub(super) cluster: Option<ClusterRoute>,
    /// What every connection of the client is named (`CLIENT SETNAME`, see [`crate::naming`]).
    pub(crate) name: Arc<str>,
    /// Which callers may take a lane (`ClientOptions::lanes`): read where the command
    /// connection's lanes are made (`Link::new`, `Conn::open`) and chosen
    /// (`Conn::trip_on_lane`, `Conn::node_pool`).
    pub(crate) lanes: crate::options::Lanes,
    /// What the client tells what it measures (`ClientOptions::telemetry`): the connections'
    /// changes and the subscriptions.
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
}

/// A cluster, and what its nodes were found to support when the client connected: asked of a
/// node, not read from a version string (Valkey's, or a vendor's build, say other things).
pub(crate) struct ClusterRoute {
    pub(super) spec: Arc<ClusterSpec>,
    /// Whether waiters use sharded pub/sub (`sharded_pubsub=on`, or `auto` where the nodes know
    /// `PUBSUB SHARDNUMSUB`: Redis 7 and later).
    pub(super) sharded: bool,
    /// Whether the nodes run a script marked `#!lua flags=allow-cross-slot-keys` (Redis 7 and
    /// later; Redis 6.2 cannot compile the mark): the watchdog renews with one script per
    /// master there, and with one script per slot where they do not.
    pub(super) cross_slot_scripts: bool,
}

impl Route {
    /// Finds the node to talk to (asking the sentinels, for Sentinel) and, for Sentinel, starts
    /// following it until `stop` is cancelled.
    pub(crate) async fn open(
        endpoint: &Endpoint,
        timeouts: Timeouts,
        stop: CancellationToken,
        name: String,
        lanes: crate::options::Lanes,
        telemetry: Option<crate::telemetry::Telemetry>,
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
                    lanes,
                    telemetry,
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
                    lanes,
                    telemetry,
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
                    lanes,
                    telemetry,
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
    pub(super) fn suspect(&self) {
        if let Some((_, kick)) = &self.sentinels {
            kick.notify_one();
        }
    }
}
