//! [`FencedLock`]: Redisson's `RFencedLock`.

use std::sync::Arc;

use crate::client::Client;
use crate::engine::family::{Family, LockCore};
use crate::engine::{Attempt, Request};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::layout;
use crate::scripts;
use crate::session::Ctx;

use super::hash::{Flavour, HashLock, LazySynced};
use super::{busy, check_name, lock_type, ms};

/// The fenced lock: the RLock's hash and channel, plus a token counter taken on every
/// acquisition, which its own acquire and settle scripts return.
#[derive(Debug)]
pub(crate) struct Fenced {
    token_key: String,
}

impl Flavour for Fenced {
    type Won = u64;
    const KIND: LockKind = LockKind::FencedLock;
    const ACQUIRE: &'static LazySynced = &scripts::FENCED_ACQUIRE;

    fn for_name(name: &Arc<str>) -> Self {
        Fenced {
            token_key: layout::fenced_token(name),
        }
    }

    async fn attempt(
        lock: Arc<HashLock<Self>>,
        cx: Arc<Ctx>,
        request: Request,
    ) -> Result<Attempt<u64>> {
        let name = &lock.hash.name;
        let reply: Vec<i64> = cx
            .conn
            .eval_synced(
                &request.acks,
                Self::ACQUIRE,
                &[name, &lock.flavour.token_key],
                &[&ms(request.lease), &&*request.holder],
                Some(name),
            )
            .await?;
        Ok(match reply.as_slice() {
            [-1, token] => Attempt::Won(*token as u64),
            [ttl, ..] => busy(*ttl),
            [] => Attempt::Busy { retry_in: None },
        })
    }

    async fn settle(
        lock: &HashLock<Self>,
        cx: &Ctx,
        holder: &str,
        recorded: usize,
    ) -> Result<Option<u64>> {
        let name = &lock.hash.name;
        let reply: Vec<i64> = cx
            .conn
            .eval(
                &scripts::FENCED_SETTLE,
                &[name, &lock.flavour.token_key],
                &[&holder],
                Some(name),
            )
            .await?;
        Ok(match reply.as_slice() {
            [count, token] if *count > recorded as i64 => Some(*token as u64),
            _ => None,
        })
    }

    fn token(won: &u64) -> Option<u64> {
        Some(*won)
    }
}

lock_type! {
    /// A reentrant lock whose every acquisition returns a **fencing token**: a number strictly
    /// greater than every token handed out before on this lock, by any client in any language.
    /// Stored exactly as Redisson's `RFencedLock`: the `RLock` hash and channel, and a counter at
    /// `redisson_lock_token:{name}` taken (`INCR`) on every acquisition, re-entries included.
    ///
    /// A lock alone cannot stop a holder that lost it without knowing (a long pause, a partition)
    /// from writing after someone else took over. Fencing can: pass the token with every write to
    /// the protected resource, and have the resource refuse a token older than the newest it has
    /// seen. Like Redisson's, the counter key has no TTL and outlives the lock (one small string
    /// per lock name).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.fenced_lock("ledger")?;
    /// let guard = lock.acquire().await?;
    /// let token = guard.token();            // send it along with every write
    /// assert!(token >= 1);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct FencedLock(HashLock<Fenced>) -> u64;
    what = "fenced lock";
}

impl FencedLock {
    /// Acquires for an explicit `owner` without a guard: `Ok(Some(token))` once acquired,
    /// `Ok(None)` when the wait limit passed.
    ///
    /// # Errors
    ///
    /// As [`acquire_as`](FencedLock::acquire_as).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](FencedLock::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use crosslock::{AcquireOptions, Owner};
    /// let lock = client.fenced_lock("ledger")?;
    /// if let Some(token) = lock.acquire_token_as(Owner::new(1), &AcquireOptions::new()).await? {
    ///     println!("write with token {token}");
    ///     lock.release_as(Owner::new(1)).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_token_as(
        &self,
        owner: crate::Owner,
        options: &crate::AcquireOptions,
    ) -> Result<Option<u64>> {
        Box::pin(self.core.acquire_as(owner, options)).await
    }

    /// The last token handed out on this lock (0 when none was): Redisson's `getToken`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable),
    /// [`ErrorKind::Redis`](crate::ErrorKind::Redis).
    ///
    /// # Cancel safety
    ///
    /// A query: dropping the future changes nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("last token: {}", client.fenced_lock("ledger")?.token().await?);
    /// # Ok(()) }
    /// ```
    pub async fn token(&self) -> Result<u64> {
        let cx = self.core.client.state().await?;
        let token: i64 = cx
            .conn
            .eval(
                &scripts::FENCED_TOKEN,
                &[&self.core.proto.flavour.token_key],
                &[],
                Some(self.name()),
            )
            .await?;
        Ok(token.max(0) as u64)
    }
}

impl Client {
    /// A [`FencedLock`] (Redisson `RFencedLock`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.fenced_lock("ledger")?.acquire().await?;
    /// println!("token {}", guard.token());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_lock(&self, name: &str) -> Result<FencedLock> {
        let name = check_name(self, name, "lock")?;
        Ok(FencedLock {
            core: LockCore::new(self.clone(), HashLock::<Fenced>::for_name(name)),
        })
    }
}
