//! [`Client`]: one per process and deployment; it owns the connections, the client id and the
//! watchdog, and hands out the named objects.

use std::fmt;
use std::sync::Arc;

use crate::engine::lost::LostLock;
use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::owner::Owner;
pub(crate) use crate::session::Client;
use crate::session::Session;
use crate::transport::Endpoint;

impl Client {
    /// Connects with default [`ClientOptions`].
    ///
    /// `url` is `redis://[user:password@]host:port/db`, or `rediss://…` for TLS. For Sentinel it
    /// is `redis+sentinel://[user:password@]host:port[,host:port…]/<master name>[/db]` (the hosts
    /// are the sentinels, port 26379 by default; the user info is the data nodes';
    /// `?sentinel_username=…&sentinel_password=…` are the sentinels' own), or
    /// `rediss+sentinel://…` for TLS: the client finds the master and follows it through
    /// failovers. For Cluster it is `redis+cluster://[user:password@]host:port[,host:port…]`
    /// (seed nodes; `?sharded_pubsub=auto|on|off` picks the pub/sub flavour, `auto` as
    /// Redisson's default), or `rediss+cluster://…` for TLS: each object goes to the master
    /// owning its slot.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a malformed URL or
    /// refused credentials; [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) when the
    /// server cannot be reached within the connect timeout (the message names the address). A
    /// connect that fails closes whatever connection it had opened (a server at `maxclients` may
    /// take the first and refuse the second).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future drops the connection being made; nothing is left in Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example() -> crosslock::Result<()> {
    /// let client = crosslock::Client::connect("redis://127.0.0.1:6379/0").await?;
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// guard.release().await?;
    /// client.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Client> {
        Self::connect_with(url, ClientOptions::default()).await
    }

    /// Connects with `options`.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect), and `InvalidArgument` for out-of-range options.
    ///
    /// # Cancel safety
    ///
    /// As [`connect`](Self::connect).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example() -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let options = crosslock::ClientOptions::new().response_timeout(Duration::from_secs(1));
    /// let client = crosslock::Client::connect_with("redis://127.0.0.1:6379/0", options).await?;
    /// # client.close().await; Ok(()) }
    /// ```
    pub async fn connect_with(url: &str, options: ClientOptions) -> Result<Client> {
        options.validate()?;
        let endpoint = Endpoint::parse(url, options.tls_ca_cert.clone())?;
        let client = Client {
            inner: Arc::new(Session::new(endpoint, options)),
        };
        let connecting = client.clone();
        // The runtime must not shut down (another process-wide last client closing) before the
        // connected state keeps it running.
        let _keep = crate::runtime::KeepAlive::new();
        // Connect on the runtime, so the connections' driver tasks live there whoever calls.
        crate::runtime::spawn(async move { connecting.state().await.map(|_| ()) })
            .await
            .map_err(|e| Error::new(crate::ErrorKind::Redis, format!("connect failed: {e}")))??;
        Ok(client)
    }

    /// This client's id in the current process: the `<client-uuid>` of its holder strings.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("this process is {}", client.id()); // the <client-uuid> of its holder strings
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> String {
        self.generation().id.clone()
    }

    /// The holder string of `owner`: `<client-uuid>:<n>`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let holder = client.holder(crosslock::Owner::new(7));
    /// assert_eq!(holder, format!("{}:7", client.id()));
    /// # Ok(()) }
    /// ```
    pub fn holder(&self, owner: Owner) -> String {
        owner.holder(&self.id())
    }

    /// The address this client connects to (`host:port`, `master '<name>' via sentinels
    /// <host:port,…>`, or `cluster via <host:port,…>`), for messages.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("connected to {}", client.address()); // host:port, never the password
    /// # Ok(()) }
    /// ```
    pub fn address(&self) -> &str {
        &self.inner.endpoint.address
    }

    /// The options it was made with.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("watchdog lease {:?}", client.options().watchdog_timeout);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// Calls `listener` (on a runtime thread) for every hold of this client found lost: a renewal
    /// found it gone, or its last confirmed lease ran out unrenewed. Replaces any previous
    /// listener. Per hold, [`LockGuard::lost`](crate::LockGuard::lost) is the simpler tool.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.on_lock_lost(|lost| {
    ///     eprintln!("lock {} lost by {}: {}", lost.name, lost.holder, lost.reason);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn on_lock_lost(&self, listener: impl Fn(LostLock) + Send + Sync + 'static) {
        self.inner
            .listener
            .store(Some(Arc::new(Arc::new(listener))));
    }

    /// Whether [`close`](Self::close) was called.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.close().await;
    /// assert!(client.is_closed());
    /// # Ok(()) }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Closes the client: pending acquires fail, held locks are released (best effort, within the
    /// response timeout; on a cluster each master's releases go out on their own, so a master
    /// that does not answer holds back none of the others'), renewal stops and the connections
    /// close. Idempotent.
    ///
    /// # Cancel safety
    ///
    /// Once called, the client is closed, and the releases, the end of renewal and the closing of
    /// the connections run to their end in the background: dropping the future only stops waiting
    /// for them.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let _guard = client.lock("orders:42")?.acquire().await?;
    /// client.close().await; // releases it, stops renewal, closes the connections
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        if self.inner.closed.is_cancelled() {
            return;
        }
        self.inner.closed.cancel();
        // Running to its end even if this is the last client (its state lets go of the runtime
        // inside the task below).
        let _keep = crate::runtime::KeepAlive::new();
        // A task of its own, so that a caller who stops waiting (a dropped future, a cancelled
        // asyncio task) does not stop the releases half-way, leaving the holds not yet released
        // to their leases, with renewal stopped and the connections open.
        let closing = self.clone();
        let _ = crate::runtime::spawn(async move { closing.release_and_disconnect().await }).await;
    }

    /// The number of locks the watchdog currently renews (for tests and diagnostics).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?;
    /// assert_eq!(client.watched_locks(), 1); // renewed by the watchdog
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn watched_locks(&self) -> usize {
        self.state_now().map_or(0, |s| s.holds.watched_count())
    }

    /// The number of channels the subscription connection is subscribed to right now.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("{} channels subscribed", client.subscribed_channels());
    /// # Ok(()) }
    /// ```
    pub fn subscribed_channels(&self) -> usize {
        self.state_now().map_or(0, |s| s.pubsub.channel_count())
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("address", &self.inner.endpoint.address)
            .field("id", &self.generation().id)
            .field("closed", &self.is_closed())
            .finish()
    }
}
