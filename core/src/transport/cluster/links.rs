//! Links to each master of a cluster of their own, for per-node scripts (renewal), and opening
//! the cluster connection.

use crate::transport::*;

impl Conn {
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
        let call = self.eval_on_master_untraced(links, master, slot, script, args, subject.into());
        let address = || format!("{}:{}", master.0, master.1);
        crate::telemetry::spans::script(self.telemetry(), script.name, address, false, call).await
    }

    /// [`Conn::eval_on_master`] without its span.
    async fn eval_on_master_untraced<'w, T: redis::FromRedisValue>(
        &self,
        links: &MasterLinks,
        master: &(String, u16),
        slot: u16,
        script: &Lua,
        args: &[&dyn ToArg],
        subject: What<'w>,
    ) -> Result<T> {
        if let Some(nodes) = &self.inner.node_lanes {
            nodes.settled(Some(slot), self.inner.response_timeout).await;
        }
        // No declared keys: the script's own header takes them from its arguments.
        let run = |link: redis::aio::MultiplexedConnection| {
            with_noscript_fallback(link, false, |mut link, whole| {
                let command = script_cmd(script, &[], args, whole);
                async move {
                    let reply = command.query_async::<redis::Value>(&mut link).await;
                    (link, reply)
                }
            })
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
    pub(in crate::transport) async fn open_master_link(
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
    pub(in crate::transport) async fn get(
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
    pub(in crate::transport) async fn open(
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

    pub(in crate::transport) fn drop_link(&self, master: &(String, u16)) {
        lock(&self.links).remove(master);
    }

    /// Closes the links to nodes that are not masters any more (`keep` says which are).
    pub(crate) fn retain(&self, keep: impl Fn(&(String, u16)) -> bool) {
        lock(&self.links).retain(|master, _| keep(master));
    }
}

/// Sends `cmd` to one master of the cluster: `None` if it answered, the error reply if it refused
/// (a command or a script it does not know, say), an error if it did not answer. A master: a
/// replica refuses a script that may write, whatever its server knows.
pub(in crate::transport) async fn ask_one_master(
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
    let asked = crate::runtime::in_context(Box::pin(asked));
    match tokio::time::timeout(response, asked).await {
        Ok(Ok(_)) => Ok(None),
        Ok(Err(e)) if e.code().is_some() => Ok(Some(e)),
        Ok(Err(e)) => Err(Error::from_redis(e, What::Connection)),
        Err(_) => Err(Error::no_answer(What::Connection, response)),
    }
}

/// Connects to a Redis Cluster through its seed nodes (RESP3; pushes, disconnections included,
/// go to `pushes`).
pub(in crate::transport) async fn open_cluster(
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
