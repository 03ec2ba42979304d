//! [`FencedLock`]: Redisson's `RFencedLock`.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::scripts;
use crate::session::Ctx;

use super::{Hash, check_name, lock_type, ms};
use crate::layout;

/// The fenced-lock protocol: the RLock's hash and channel, plus a token counter taken on every
/// acquisition.
#[derive(Debug)]
pub(crate) struct Fenced {
    hash: Hash,
    token_key: String,
}

impl Protocol for Fenced {
    type Won = u64;

    fn name(&self) -> &Arc<str> {
        &self.hash.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::PubSub {
            channel: self.hash.channel().to_owned(),
            wake: WakePolicy::Lock,
            linger: None,
        }
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<u64>> {
        let reply: Vec<i64> = cx
            .conn
            .eval(
                &scripts::FENCED_ACQUIRE,
                &[&self.hash.name, &self.token_key],
                &[&ms(request.lease), &&*request.holder],
                Some(&self.hash.name),
            )
            .await?;
        Ok(match reply.as_slice() {
            [-1, token] => Attempt::Won(*token as u64),
            [ttl, ..] => Attempt::Busy {
                retry_in: u64::try_from(*ttl).ok().map(Duration::from_millis),
            },
            [] => Attempt::Busy { retry_in: None },
        })
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<u64>> {
        let reply: Vec<i64> = cx
            .conn
            .eval(
                &scripts::FENCED_SETTLE,
                &[&self.hash.name, &self.token_key],
                &[&holder],
                Some(&self.hash.name),
            )
            .await?;
        Ok(match reply.as_slice() {
            [count, token] if *count > recorded as i64 => Some(*token as u64),
            _ => None,
        })
    }

    async fn give_back(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        holder: Arc<str>,
        lease_after: Duration,
    ) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, lease_after, None, false, false)
            .await
            .map(|_| ())
    }
}

impl Family for Fenced {
    const KIND: LockKind = LockKind::FencedLock;

    fn for_name(name: Arc<str>) -> Self {
        Fenced {
            token_key: layout::fenced_token(&name),
            hash: Hash::new(name),
        }
    }

    async fn unlock(
        &self,
        cx: &Ctx,
        holder: &str,
        lease_after: Duration,
        retry_of: Option<usize>,
    ) -> Result<Option<bool>> {
        self.hash
            .unlock(cx, holder, lease_after, retry_of, false, false)
            .await
    }

    async fn release_all(self: Arc<Self>, cx: Arc<Ctx>, holder: Arc<str>) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, Duration::ZERO, None, true, false)
            .await
            .map(|_| ())
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        self.hash.force_unlock(cx, false).await
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.hash.info(cx, holder).await
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
    pub struct FencedLock(Fenced) -> u64;
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
                &[&self.core.proto.token_key],
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
            core: LockCore::new(self.clone(), Fenced::for_name(name)),
        })
    }
}
