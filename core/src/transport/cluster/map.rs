//! A cluster's slot map as the command connection sees it: which master owns a key, reading
//! the map (`CLUSTER SLOTS`), and noticing when it changed.

use crate::transport::*;

impl Conn {
    /// On a cluster: the lanes of the master serving `slot`, when the slot map is at hand (it
    /// is read in the background when missing or old).
    pub(in crate::transport) fn node_pool(
        &self,
        nodes: &crate::transport::cluster::NodeLanes,
        slot: u16,
    ) -> Option<Arc<crate::transport::lane::LanePool>> {
        // Most calls are on no lane: no map is read for them.
        let may_take_one = crate::transport::lane::ambient::on_lane()
            || (self.inner.route.lanes.event_loops()
                && crate::transport::lane::ambient::polled_by_a_loop());
        if !may_take_one {
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
        nodes.master_id(crate::transport::cluster::slot(key.as_bytes()))
    }

    /// On a cluster, which master serves each of `keys` (ids that tell the masters apart), from
    /// the lanes' slot map or, where that is not read (over TLS, before any call took a lane),
    /// from `CLUSTER SLOTS` asked now; `None` for every key on one server, or when no node
    /// answers.
    pub(in crate::transport) async fn masters_of(&self, keys: &[&str]) -> Vec<Option<u64>> {
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
                let slot = crate::transport::cluster::slot(key.as_bytes());
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
    pub(in crate::transport) fn read_map(&self) {
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
    /// queued behind has a reply overdue (see [`crate::transport::lane`]).
    pub(in crate::transport) async fn lanes_settled(&self, key: &str) {
        if let Some(lanes) = &self.inner.link.load().lanes {
            lanes.settled(self.inner.response_timeout).await;
        }
        if let Some(nodes) = &self.inner.node_lanes {
            let slot = crate::transport::cluster::slot(key.as_bytes());
            nodes.settled(Some(slot), self.inner.response_timeout).await;
        }
    }

    /// On a cluster: which master serves each slot, from `CLUSTER SLOTS` asked of every node
    /// the routed way knows, the first answer taken (a node that does not answer, or one whose
    /// slots were failed over, holds nothing up).
    pub(in crate::transport) async fn cluster_slot_ranges(&self) -> Result<Vec<SlotRange>> {
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
    pub(in crate::transport) async fn ask_cluster_slots(
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
        let ask = crate::runtime::in_context(Box::pin(ask));
        tokio::time::timeout(self.inner.response_timeout, ask)
            .await
            .ok()
    }

    /// On a cluster: which master serves each slot, from `CLUSTER SLOTS` asked of one node the
    /// routed way is connected to, picked at random; `None` when it gave no usable answer within
    /// the response timeout. Unlike [`Conn::cluster_slot_ranges`], a node that does not answer is
    /// not taken for a lost connection (another node may answer at once).
    pub(in crate::transport) async fn slot_ranges_of_one_node(&self) -> Option<Vec<SlotRange>> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let Handle::Cluster(mut cluster) = self.manager() else {
            return None;
        };
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let slots = self.ask_cluster_slots(&mut cluster, routing).await?.ok()?;
        Some(slot_ranges(&slots)).filter(|ranges| !ranges.is_empty())
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
    /// in the background and swaps it in ([`Conn::recheck_slot_map`]).
    pub(in crate::transport) fn check_routing(&self) {
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
            conn.recheck_slot_map().await;
            conn.inner.routing_busy.store(false, Ordering::Release);
        });
    }

    /// See [`Conn::check_routing`]. Not a redirect that makes the routed way read the map
    /// again: redis-rs asks its nodes in turn, the stopped one among them, and every routed
    /// call waits meanwhile (up to the response timeout). A fresh connection is opened while
    /// calls go on with the old one; the stopped master never completes its handshake, so the
    /// new connection's map comes from one that answers.
    pub(in crate::transport) async fn recheck_slot_map(&self) {
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
        let mut seeded = crate::transport::cluster::ClusterSpec::clone(spec);
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
            &self.inner.route,
        )));
        *lock(&self.inner.routing_seen) = Some(ranges);
        self.tell(crate::telemetry::ConnectionChange::Failover);
        tracing::info!(
            target: "crosslock",
            "command connection to the {} opened again after a node stopped answering and the \
             cluster's slot map changed",
            self.inner.route.endpoint.address,
        );
    }
}

/// A range of slots and the master serving them: first slot, last slot, (host, port).
pub(crate) type SlotRange = (u16, u16, (String, u16));

/// The ranges of a `CLUSTER SLOTS` reply.
pub(in crate::transport) fn slot_ranges(reply: &redis::Value) -> Vec<SlotRange> {
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
pub(in crate::transport) fn node_address(node: &redis::Value) -> Option<(String, u16)> {
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
pub(in crate::transport) fn slot_masters(reply: &redis::Value) -> Vec<(String, u16)> {
    let mut out: Vec<(String, u16)> = Vec::new();
    for (_, _, node) in slot_ranges(reply) {
        if !out.contains(&node) {
            out.push(node);
        }
    }
    out
}
