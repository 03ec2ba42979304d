//! The subscription connection's commands and its recovery after a reconnect.

use crate::transport::*;

impl Conn {
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
    pub(in crate::transport) async fn pubsub_command<F, Fut>(&self, command: F) -> Result<()>
    where
        F: FnOnce(Handle) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<()>>,
    {
        let manager = self.manager();
        self.touch();
        // In crosslock's runtime, whoever calls: see `runtime::in_context`.
        let command = crate::runtime::in_context(Box::pin(command(manager)));
        match tokio::time::timeout(self.inner.response_timeout, command).await {
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
            &self.inner.route,
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
