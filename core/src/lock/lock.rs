//! [`Lock`]: Redisson's RLock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::{Client, State};
use crate::error::{Error, ErrorKind, Result};
use crate::owner::Owner;
use crate::pubsub::Wake;
use crate::scripts;
use crate::runtime;
use crate::wait::{self, Acquirable, Outcome};
use crate::watchdog::HoldKey;

/// A reentrant distributed lock, stored exactly as Redisson's `RLock`.
///
/// Redis holds a hash at the lock's name with one field, `<client-uuid>:<n>` → hold count, and
/// a TTL: the lease. The holder that owns that field may re-enter; everyone else waits, woken by
/// the `0` published on `redisson_lock__channel:{name}` when the lock is fully released. A Java
/// service on Redisson calling `getLock(name)` takes part in the same exclusion.
///
/// Without a lease the lock is kept by the watchdog: a 30 s lease (the client's
/// `watchdog_timeout`) renewed every 10 s while this process lives and holds it. With a lease it
/// simply expires after it.
///
/// A `Lock` is a cheap handle (name + client); clone it freely.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::time::Duration;
/// use crosslock::AcquireOptions;
///
/// let lock = client.lock("orders:42")?;
/// let guard = lock.acquire().await?;           // waits as long as it takes
/// // ... exclusive work ...
/// guard.release().await?;
///
/// // Give up after 2 s; expire after 10 s even if this process hangs.
/// let options = AcquireOptions::new().wait(Duration::from_secs(2)).lease(Duration::from_secs(10));
/// match lock.acquire_with(options).await {
///     Ok(guard) => guard.release().await?,
///     Err(e) if e.is_timeout() => println!("busy: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    client: Client,
    spec: Arc<Spec>,
}

struct Spec {
    name: Arc<str>,
    channel: String,
}

/// How to acquire: wait limit, lease, owner, cancellation.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// How long to wait: `None` waits until acquired, `Some(ZERO)` tries once.
    pub wait: Option<Duration>,
    /// How long the lock lives without renewal: `None` means watchdog renewal.
    pub lease: Option<Duration>,
    /// Who acquires: `None` means [`Owner::current`].
    pub owner: Option<Owner>,
    /// Cancels the wait when cancelled; the call then fails with [`ErrorKind::Cancelled`].
    pub cancel: Option<CancellationToken>,
}

impl AcquireOptions {
    /// Wait without limit, watchdog lease, current owner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives up after `wait` (zero: a single attempt).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Lets the lock expire `lease` after acquiring it, with no renewal. Must be at least 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Acquires on behalf of `owner` instead of [`Owner::current`].
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Stops waiting when `token` is cancelled.
    pub fn cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

impl Lock {
    pub(crate) fn new(client: Client, name: &str) -> Result<Self> {
        if name.is_empty() {
            return Err(Error::invalid(
                "a lock name must be a non-empty string, such as \"orders:42\"",
            ));
        }
        let name: Arc<str> = Arc::from(name);
        let channel = super::prefix_name("redisson_lock__channel", &name);
        Ok(Lock { client, spec: Arc::new(Spec { name, channel }) })
    }

    /// The lock's name: its key in Redis.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The channel its releases are published on: `redisson_lock__channel:{name}`.
    pub fn channel(&self) -> &str {
        &self.spec.channel
    }

    /// Waits until the lock is acquired by [`Owner::current`], with watchdog renewal.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`], [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: if an attempt in flight acquired the lock, it
    /// is released again.
    pub async fn acquire(&self) -> Result<LockGuard> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Acquires with `options`, failing with [`ErrorKind::Timeout`] when the wait limit passes.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Timeout`], [`ErrorKind::Cancelled`], [`ErrorKind::InvalidArgument`] (a zero
    /// lease), [`ErrorKind::Unavailable`], [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<LockGuard> {
        let owner = options.owner.unwrap_or_else(Owner::current);
        if self.acquire_as(owner, &options).await? {
            return Ok(self.guard(owner));
        }
        Err(self.timeout_error(owner, options.wait.unwrap_or_default()).await)
    }

    /// One attempt by [`Owner::current`], with watchdog renewal; `None` if someone else holds it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`], [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        let owner = Owner::current();
        let options = AcquireOptions::new().wait(Duration::ZERO).owner(owner);
        Ok(self.acquire_as(owner, &options).await?.then(|| self.guard(owner)))
    }

    /// Acquires for an explicit `owner` without a guard; `Ok(false)` when the wait limit passed.
    ///
    /// This is the building block of the bindings and of hand-offs between tasks: whoever
    /// acquires this way releases with [`release_as`](Self::release_as). `options.owner` is
    /// ignored in favour of `owner`.
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with), except that a passed wait limit is `Ok(false)`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_as(&self, owner: Owner, options: &AcquireOptions) -> Result<bool> {
        if options.lease.is_some_and(|lease| lease.as_millis() == 0) {
            return Err(Error::invalid(format!(
                "the lease of lock '{}' must be at least 1 ms; leave it out for watchdog renewal",
                self.name()
            ))
            .with_lock(self.name()));
        }
        let state = self.client.state().await.map_err(|e| e.with_lock(self.name()))?;
        let kind = Arc::new(RLock { spec: self.spec.clone() });
        let outcome =
            wait::acquire(state, kind, owner, options.wait, options.lease, options.cancel.clone())
                .await?;
        Ok(matches!(outcome, Outcome::Acquired))
    }

    /// Releases one hold of `owner`; `Ok(true)` when that fully released the lock, `Ok(false)`
    /// when `owner` still holds it re-entrantly.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotHeld`] when `owner` does not hold the lock (Redis is unchanged);
    /// [`ErrorKind::LockLost`] when it did hold it but the lock expired or was force-unlocked
    /// meanwhile; [`ErrorKind::Unavailable`], [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    pub async fn release_as(&self, owner: Owner) -> Result<bool> {
        let state = self.client.state().await.map_err(|e| e.with_lock(self.name()))?;
        let key = HoldKey { name: self.spec.name.clone(), owner };
        let before = state.holds.count(&key);
        state.holds.begin_release(&key);
        // Once asked for, a release completes even if the caller's future is dropped midway (an
        // asyncio task cancelled while leaving `async with`): the guard then settles it in the
        // background, telling the script how many holds we had so it is never applied twice.
        let mut settle = Settle { lock: self.clone(), state: state.clone(), key: key.clone(), before, armed: true };
        let result = self.release_with(&state, &key, None).await;
        settle.armed = false;
        state.holds.end_release(&key);
        result
    }

    /// Runs the release script for `key`; `retry_of` is the hold count before an earlier attempt
    /// whose reply was lost (see lock_release.lua).
    async fn release_with(&self, state: &State, key: &HoldKey, retry_of: Option<usize>) -> Result<bool> {
        let owner = key.owner;
        let holder = owner.holder(&state.id);
        let lease_ms = state.holds.lease_after_release(key).as_millis() as u64;
        let script = |retry_of: Option<usize>| {
            let holder = &holder;
            async move {
                let before = retry_of.map(|n| n.to_string()).unwrap_or_default();
                state
                    .conn
                    .eval::<Option<i64>>(
                        &scripts::LOCK_RELEASE,
                        &[self.name(), self.channel()],
                        &[&"0", &lease_ms, holder, &state.conn.publish_command(), &before],
                        Some(self.name()),
                    )
                    .await
            }
        };
        let mut reply = script(retry_of).await;
        if reply.as_ref().is_err_and(Error::is_unavailable) {
            // The reply was lost; the release may or may not have happened. Retry (with back-off,
            // within the connect timeout) telling the script how many holds we had, so a release
            // that did happen is not applied twice.
            let before = retry_of.unwrap_or_else(|| state.holds.count(key)).max(1);
            let started = std::time::Instant::now();
            let mut pause = Duration::from_millis(10);
            while reply.as_ref().is_err_and(Error::is_unavailable) && started.elapsed() < state.outage_tolerance {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
                reply = script(Some(before)).await;
            }
        }
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // Whatever happened in Redis, this hold is over for us: stop renewing it (as
                // Redisson does on any unlock outcome), so at worst it expires after its lease.
                state.holds.released(key, false);
                return Err(e.with_holder(holder));
            }
        };
        match reply {
            Some(fully) => {
                state.holds.released(key, fully == 1);
                Ok(fully == 1)
            }
            None if state.holds.forget_lost(key) => Err(Error::new(
                ErrorKind::LockLost,
                format!(
                    "lock '{}' was lost before {holder} released it: it expired or was \
                     force-unlocked, so work done since may have overlapped another holder. \
                     Use a longer lease, or the watchdog, and watch the lost-lock signal",
                    self.name()
                ),
            )
            .with_lock(self.name())
            .with_holder(holder)),
            None => {
                let current = self.holders_now().await.unwrap_or_default();
                let held_by = if current.is_empty() {
                    "it is not locked".to_owned()
                } else {
                    format!("it is held by {}", current.join(", "))
                };
                Err(Error::new(
                    ErrorKind::NotHeld,
                    format!(
                        "cannot release lock '{}': {holder} does not hold it ({held_by}); \
                         release only what this owner acquired",
                        self.name()
                    ),
                )
                .with_lock(self.name())
                .with_holder(holder))
            }
        }
    }

    /// Deletes the lock whoever holds it and wakes a waiter; `Ok(true)` if it was locked.
    ///
    /// The former holder's watchdog finds the lock gone at its next renewal and reports it lost.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WrongType`] (the key is left alone), [`ErrorKind::Unavailable`],
    /// [`ErrorKind::Redis`].
    pub async fn force_unlock(&self) -> Result<bool> {
        let state = self.client.state().await.map_err(|e| e.with_lock(self.name()))?;
        let deleted: i64 = state
            .conn
            .eval(
                &scripts::LOCK_FORCE_UNLOCK,
                &[self.name(), self.channel()],
                &[&"0", &state.conn.publish_command()],
                Some(self.name()),
            )
            .await?;
        Ok(deleted == 1)
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WrongType`], [`ErrorKind::Unavailable`], [`ErrorKind::Redis`].
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.info(Owner::new(0)).await?.pttl != -2)
    }

    /// Whether `owner` of this client holds the lock.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        Ok(self.info(owner).await?.count > 0)
    }

    /// How many times `owner` holds the lock (0 when it does not).
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub async fn hold_count_of(&self, owner: Owner) -> Result<u32> {
        Ok(self.info(owner).await?.count)
    }

    /// The time left before the lock expires: `None` when it is not locked, `Some(Duration::MAX)`
    /// when its key has no expiry.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        Ok(match self.info(Owner::new(0)).await?.pttl {
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0) as u64)),
        })
    }

    /// The current holders' strings (`<client-uuid>:<n>`); empty when it is not locked.
    ///
    /// # Errors
    ///
    /// As [`is_locked`](Self::is_locked).
    pub async fn holders_now(&self) -> Result<Vec<String>> {
        Ok(self.info(Owner::new(0)).await?.holders)
    }

    /// A token cancelled when the hold of `owner` is found lost (see [`LockGuard::lost`]).
    /// `None` when this process records no hold of `owner`.
    pub fn lost_token(&self, owner: Owner) -> Option<CancellationToken> {
        let state = self.client.state_now()?;
        state.holds.token(&HoldKey { name: self.spec.name.clone(), owner })
    }

    /// Whether the hold of `owner` was found lost and not released since.
    pub fn is_lost(&self, owner: Owner) -> bool {
        self.client.state_now().is_some_and(|state| {
            state.holds.is_lost(&HoldKey { name: self.spec.name.clone(), owner })
        })
    }

    fn guard(&self, owner: Owner) -> LockGuard {
        let lost = self.lost_token(owner).unwrap_or_default();
        LockGuard { lock: Some(self.clone()), owner, lost }
    }

    async fn info(&self, owner: Owner) -> Result<Info> {
        let state = self.client.state().await.map_err(|e| e.with_lock(self.name()))?;
        let holder = owner.holder(&state.id);
        let reply: Vec<redis::Value> = state
            .conn
            .eval(&scripts::LOCK_INFO, &[self.name()], &[&holder], Some(self.name()))
            .await?;
        let int = |v: Option<&redis::Value>| match v {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        };
        let holders = reply
            .iter()
            .skip(2)
            .filter_map(|v| match v {
                redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect();
        Ok(Info {
            pttl: int(reply.first()),
            count: int(reply.get(1)).max(0) as u32,
            holders,
        })
    }

    /// The [`ErrorKind::Timeout`] error that [`acquire_with`](Self::acquire_with) returns when its
    /// wait limit passes, for callers of [`acquire_as`](Self::acquire_as) that got `Ok(false)`
    /// and want to report it the same way. It names the lock, `owner`'s holder string, how long
    /// it waited and who holds the lock now (one more round trip, best effort).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// use crosslock::{AcquireOptions, Owner};
    ///
    /// let lock = client.lock("orders:42")?;
    /// let owner = Owner::new(7);
    /// let wait = Duration::from_millis(100);
    /// if !lock.acquire_as(owner, &AcquireOptions::new().wait(wait)).await? {
    ///     return Err(lock.timeout_error(owner, wait).await);
    /// }
    /// lock.release_as(owner).await?;
    /// # Ok(()) }
    /// ```
    pub async fn timeout_error(&self, owner: Owner, waited: Duration) -> Error {
        let holder = self.client.holder(owner);
        let held_by = match self.holders_now().await {
            Ok(h) if !h.is_empty() => format!(", held by {}", h.join(", ")),
            _ => String::new(),
        };
        Error::new(
            ErrorKind::Timeout,
            format!(
                "gave up waiting for lock '{}' after {:.3}s{held_by}; retry later or allow a \
                 longer wait",
                self.name(),
                waited.as_secs_f64()
            ),
        )
        .with_lock(self.name())
        .with_holder(holder)
        .with_waited(waited)
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").field("name", &self.spec.name).finish()
    }
}

struct Info {
    pttl: i64,
    count: u32,
    holders: Vec<String>,
}

/// The RLock protocol, as the acquire loop sees it.
struct RLock {
    spec: Arc<Spec>,
}

impl Acquirable for RLock {
    fn name(&self) -> &Arc<str> {
        &self.spec.name
    }

    fn channel(&self) -> &str {
        &self.spec.channel
    }

    fn wake(&self) -> Wake {
        Wake::One
    }

    async fn attempt(&self, state: &State, holder: &str, lease: Duration) -> Result<Option<i64>> {
        let lease_ms = lease.as_millis() as u64;
        state
            .conn
            .eval(&scripts::LOCK_ACQUIRE, &[&self.spec.name], &[&lease_ms, &holder], Some(&self.spec.name))
            .await
    }

    async fn held_count(&self, state: &State, holder: &str) -> Result<u64> {
        let reply: Vec<redis::Value> = state
            .conn
            .eval(&scripts::LOCK_INFO, &[&self.spec.name], &[&holder], Some(&self.spec.name))
            .await?;
        Ok(match reply.get(1) {
            Some(redis::Value::Int(n)) => (*n).max(0) as u64,
            _ => 0,
        })
    }

    async fn give_back(&self, state: &State, holder: &str, lease: Duration) -> Result<()> {
        let lease_ms = lease.as_millis() as u64;
        let _: Option<i64> = state
            .conn
            .eval(
                &scripts::LOCK_RELEASE,
                &[&self.spec.name, &self.spec.channel],
                &[&"0", &lease_ms, &holder, &state.conn.publish_command(), &""],
                Some(&self.spec.name),
            )
            .await?;
        Ok(())
    }
}

/// Drops every hold of `holder` on the lock `name`.
pub(crate) async fn release_all(state: &State, name: &str, channel: &str, holder: &str) -> Result<bool> {
    let released: i64 = state
        .conn
        .eval(
            &scripts::LOCK_RELEASE_ALL,
            &[name, channel],
            &[&"0", &holder, &state.conn.publish_command()],
            Some(name),
        )
        .await?;
    Ok(released == 1)
}

/// Proof that an owner holds a [`Lock`]; releases it when dropped.
///
/// Prefer [`release`](Self::release), which reports errors; a dropped guard releases in the
/// background and can only log nothing.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    lock: Option<Lock>,
    owner: Owner,
    lost: CancellationToken,
}

impl LockGuard {
    /// The owner holding the lock.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// Cancelled as soon as a renewal finds the lock gone (expired or force-unlocked). Watch it
    /// next to the protected work and stop when it fires.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Whether the lock was found lost.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Releases this hold.
    ///
    /// # Errors
    ///
    /// As [`Lock::release_as`]; [`ErrorKind::LockLost`] tells that exclusion was broken.
    pub async fn release(mut self) -> Result<()> {
        let lock = self.lock.take().expect("released once");
        lock.release_as(self.owner).await.map(|_| ())
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let owner = self.owner;
            crate::runtime::spawn(async move {
                let _ = lock.release_as(owner).await;
            });
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.as_ref().map(|l| l.name().to_owned()))
            .field("owner", &self.owner)
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// Finishes a release whose caller left before it completed (see [`Lock::release_as`]).
struct Settle {
    lock: Lock,
    state: Arc<State>,
    key: HoldKey,
    before: usize,
    armed: bool,
}

impl Drop for Settle {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (lock, state, key, before) = (self.lock.clone(), self.state.clone(), self.key.clone(), self.before);
        runtime::spawn(async move {
            let _ = lock.release_with(&state, &key, Some(before.max(1))).await;
            state.holds.end_release(&key);
        });
    }
}
