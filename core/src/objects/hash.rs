//! The RLock hash ([`struct@Hash`]) and the one lock protocol over it ([`HashLock`]): `Lock`,
//! `SpinLock`, `NonReentrantLock` and `FencedLock` store the same hash and release it with the
//! same script, so they differ only in what a [`Flavour`] says: the acquire script, whether
//! releases publish, how waiters wait, a check before sending, and (the fenced lock) what a win
//! carries.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, LazyLock, OnceLock};

use crate::engine::family::{Family, Info};
use crate::engine::{Attempt, Protocol, Request, Waiting};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::layout;
use crate::owner::Owner;
use crate::scripts::{self, Synced};
use crate::session::Ctx;
use crate::transport::{ReplicaAcks, ToArg};

use super::{Release, give_back_by_release, ms, parse_info, settled, woken_on, won_or_busy};

/// An acquire script as `scripts` declares it (built at first use).
pub(crate) type LazySynced = LazyLock<Synced>;

/// An RLock-family hash at `name` with its release channel: the Redis side shared by the lock,
/// spin, fenced and non-reentrant locks (and the fair lock's queries).
#[derive(Debug)]
pub(crate) struct Hash {
    pub(crate) name: Arc<str>,
    /// Made when first needed (the first wait or release): a lock object that is only
    /// acquired, or held, does without it.
    channel: OnceLock<String>,
}

impl Hash {
    pub(crate) fn new(name: Arc<str>) -> Self {
        Hash {
            name,
            channel: OnceLock::new(),
        }
    }

    /// `redisson_lock__channel:{name}`, where releases are published.
    pub(crate) fn channel(&self) -> &str {
        self.channel
            .get_or_init(|| layout::lock_channel(&self.name))
    }

    /// Runs the RLock release script, publishing `0` when `publish`: `Some(true)` fully
    /// released, `Some(false)` holds remain, `None` the holder holds nothing.
    pub(crate) async fn unlock(
        &self,
        cx: &Ctx,
        holder: &str,
        release: Release,
        publish: bool,
    ) -> Result<Option<bool>> {
        let (lease_after, retry, count) = release.args();
        let publish = if publish {
            cx.conn.publish_command()
        } else {
            ""
        };
        let reply: Option<i64> = cx
            .conn
            .eval(
                &scripts::LOCK_RELEASE,
                &[&self.name, self.channel()],
                &[&"0", &lease_after, &holder, &publish, &retry, &count],
                Some(&self.name),
            )
            .await?;
        Ok(reply.map(|r| r == 1))
    }

    pub(crate) async fn force_unlock(&self, cx: &Ctx, publish: bool) -> Result<bool> {
        let publish = if publish {
            cx.conn.publish_command()
        } else {
            ""
        };
        let deleted: i64 = cx
            .conn
            .eval(
                &scripts::LOCK_FORCE_UNLOCK,
                &[&self.name, self.channel()],
                &[&"0", &publish],
                Some(&self.name),
            )
            .await?;
        Ok(deleted == 1)
    }

    pub(crate) async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        let reply: Vec<redis::Value> = cx
            .conn
            .eval(
                &scripts::LOCK_INFO,
                &[&self.name],
                &[&holder],
                Some(&self.name),
            )
            .await?;
        Ok(parse_info(&reply))
    }

    /// `Some(())` when Redis counts more holds of `holder` than `recorded`.
    pub(crate) async fn settle(
        &self,
        cx: &Ctx,
        holder: &str,
        recorded: usize,
    ) -> Result<Option<()>> {
        Ok(settled(&self.info(cx, holder).await?, recorded))
    }

    /// Runs an acquire script whose reply is nil (acquired) or the PTTL, noting its replica acks
    /// in `acks` (the attempt's).
    pub(crate) async fn attempt(
        &self,
        cx: &Ctx,
        acks: &ReplicaAcks,
        script: &Synced,
        args: &[&dyn ToArg],
    ) -> Result<Attempt<()>> {
        let reply: Option<i64> = cx
            .conn
            .eval_synced(acks, script, &[&self.name], args, Some(&self.name))
            .await?;
        Ok(won_or_busy(reply))
    }
}

/// What one kind of RLock-hash lock brings to [`HashLock`]. The provided hooks are the RLock's;
/// a kind overrides only where it differs.
pub(crate) trait Flavour: fmt::Debug + Send + Sync + Sized + 'static {
    /// What a win carries: nothing, or the fenced lock's token.
    type Won: Default + Send + 'static;

    /// Which kind of lock this is.
    const KIND: LockKind;

    /// The acquire script, given the lease (ms) and the holder; its reply is nil (acquired) or
    /// the PTTL.
    const ACQUIRE: &'static LazySynced;

    /// Whether releases publish `0` on the channel (a spin lock's wake nobody).
    const PUBLISHES: bool = true;

    /// The flavour's state for the lock named `name`, with the factory's defaults.
    fn for_name(name: &Arc<str>) -> Self;

    /// How a waiter waits: on the channel, woken one at a time by releases.
    fn waiting(lock: &HashLock<Self>) -> Waiting {
        woken_on(lock.hash.channel())
    }

    /// A check made before anything is sent.
    fn precheck(lock: &HashLock<Self>, cx: &Ctx, owner: Owner) -> Result<()> {
        let _ = (lock, cx, owner);
        Ok(())
    }

    /// One attempt: runs [`ACQUIRE`](Self::ACQUIRE).
    fn attempt(
        lock: Arc<HashLock<Self>>,
        cx: Arc<Ctx>,
        request: Request,
    ) -> impl Future<Output = Result<Attempt<Self::Won>>> + Send + 'static {
        async move {
            let args: [&dyn ToArg; 2] = [&ms(request.lease), &&*request.holder];
            let attempt = lock.hash.attempt(&cx, &request.acks, Self::ACQUIRE, &args);
            Ok(match attempt.await? {
                Attempt::Won(()) => Attempt::Won(Self::Won::default()),
                Attempt::Busy { retry_in } => Attempt::Busy { retry_in },
            })
        }
    }

    /// After a lost reply: a win Redis counts for `holder` beyond the `recorded` ones.
    fn settle(
        lock: &HashLock<Self>,
        cx: &Ctx,
        holder: &str,
        recorded: usize,
    ) -> impl Future<Output = Result<Option<Self::Won>>> + Send {
        async move {
            let won = lock.hash.settle(cx, holder, recorded).await?;
            Ok(won.map(|()| Self::Won::default()))
        }
    }

    /// The fencing token a win carries, if this kind has one.
    fn token(won: &Self::Won) -> Option<u64> {
        let _ = won;
        None
    }
}

/// The protocol of a lock stored as the RLock hash: the hash plus what its [`Flavour`] adds.
#[derive(Debug)]
pub(crate) struct HashLock<F> {
    pub(crate) hash: Hash,
    pub(crate) flavour: F,
}

impl<F: Flavour> HashLock<F> {
    /// The lock named `name` with a flavour other than the factory's default one.
    pub(crate) fn with(name: Arc<str>, flavour: F) -> Self {
        HashLock {
            hash: Hash::new(name),
            flavour,
        }
    }
}

impl<F: Flavour> Protocol for HashLock<F> {
    type Won = F::Won;

    fn name(&self) -> &Arc<str> {
        &self.hash.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        F::waiting(self)
    }

    fn attempt(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        request: Request,
    ) -> impl Future<Output = Result<Attempt<F::Won>>> + Send + 'static {
        F::attempt(self, cx, request)
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<F::Won>> {
        F::settle(self, cx, holder, recorded).await
    }

    give_back_by_release!();
}

impl<F: Flavour> Family for HashLock<F> {
    const KIND: LockKind = F::KIND;

    fn for_name(name: Arc<str>) -> Self {
        HashLock {
            flavour: F::for_name(&name),
            hash: Hash::new(name),
        }
    }

    fn precheck(&self, cx: &Ctx, owner: Owner) -> Result<()> {
        F::precheck(self, cx, owner)
    }

    /// Runs the RLock release script, publishing as the flavour says.
    async fn release(&self, cx: &Ctx, holder: &str, release: Release) -> Result<Option<bool>> {
        self.hash.unlock(cx, holder, release, F::PUBLISHES).await
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        self.hash.force_unlock(cx, F::PUBLISHES).await
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.hash.info(cx, holder).await
    }

    fn token(won: &F::Won) -> Option<u64> {
        F::token(won)
    }
}
