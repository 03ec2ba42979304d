//! The object types, one file per Redisson object: key and channel names, the protocol hooks the
//! engine needs, and the type's own methods. Everything generic is in [`crate::engine`].

pub(crate) mod count_down_latch;
pub(crate) mod fair_lock;
pub(crate) mod fenced_lock;
pub(crate) mod group_lock;
pub(crate) mod hash;
pub(crate) mod keyed;
pub(crate) mod lock;
pub(crate) mod multi_lock;
pub(crate) mod non_reentrant_lock;
pub(crate) mod permit_expirable_semaphore;
pub(crate) mod read_write_lock;
pub(crate) mod semaphore;
pub(crate) mod spin_lock;

use std::sync::Arc;
use std::time::Duration;

use crate::engine::family::{Info, Release};
use crate::engine::{Attempt, MAX_DURATION, Waiting, WakePolicy};
use crate::error::{Error, Result};
use crate::layout;

/// Checks an object name, naming the kind of object in the message. On a Redis Cluster the name
/// must also keep the object's keys and channels in one hash slot (Redisson's `{name}` tag does
/// that for every name without braces).
pub(crate) fn check_name(client: &crate::Client, name: &str, what: &str) -> Result<Arc<str>> {
    check_name_with(client, name, what, [])
}

/// [`check_name`] for an object with a name of its own beyond the usual siblings
/// ([`layout::slot_siblings`]) that must share the object's slot (a latch's channel).
pub(crate) fn check_name_with<const N: usize>(
    client: &crate::Client,
    name: &str,
    what: &str,
    more: [String; N],
) -> Result<Arc<str>> {
    if name.is_empty() {
        return Err(Error::invalid(format!(
            "a {what} name must be a non-empty string, such as \"orders:42\""
        )));
    }
    if client.is_cluster() {
        let siblings: Vec<String> = layout::slot_siblings(name)
            .into_iter()
            .chain(more)
            .collect();
        crate::transport::cluster::check_one_slot(name, what, &siblings)?;
    }
    Ok(Arc::from(name))
}

/// The client's connected state, for the object named `name` (an error names it).
pub(crate) async fn state_for(
    client: &crate::Client,
    name: &str,
) -> Result<Arc<crate::session::Ctx>> {
    client.state().await.map_err(|e| e.with_lock(name))
}

/// Milliseconds as a script argument (leases are validated to fit long before).
pub(crate) fn ms(d: Duration) -> u64 {
    d.min(MAX_DURATION).as_millis() as u64
}

/// A busy reply's TTL (ms; negative: none) as a retry hint.
pub(crate) fn busy<W>(ttl: i64) -> Attempt<W> {
    Attempt::Busy {
        retry_in: u64::try_from(ttl).ok().map(Duration::from_millis),
    }
}

/// An acquire script's reply, nil (acquired) or the PTTL, as an attempt.
pub(crate) fn won_or_busy(reply: Option<i64>) -> Attempt<()> {
    match reply {
        None => Attempt::Won(()),
        Some(ttl) => busy(ttl),
    }
}

/// After a lost reply: `Some(())` when Redis counts more holds of the holder (`info`'s count)
/// than the `recorded` ones, i.e. the unanswered attempt won.
pub(crate) fn settled(info: &Info, recorded: usize) -> Option<()> {
    (u64::from(info.count) > recorded as u64).then_some(())
}

/// Waiting on `channel`, woken one waiter at a time by the releases published there.
pub(crate) fn woken_on(channel: &str) -> Waiting {
    Waiting::on(channel, WakePolicy::Lock)
}

/// The script side of a [`Release`].
impl Release {
    /// A release's script arguments, in the order every release script takes them:
    /// `lease_after` (ms), the `retry_of` count (empty: a first try), and `"1"` or `"all"`.
    pub(crate) fn args(self) -> (u64, String, &'static str) {
        match self {
            Release::One {
                lease_after,
                retry_of,
            } => (
                ms(lease_after),
                retry_of.map(|n| n.to_string()).unwrap_or_default(),
                "1",
            ),
            Release::All => (0, String::new(), "all"),
        }
    }
}

/// Parses the `{pttl, locked, count, holders...}` reply of the info scripts.
pub(crate) fn parse_info(reply: &[redis::Value]) -> Info {
    let int = |v: Option<&redis::Value>| match v {
        Some(redis::Value::Int(n)) => *n,
        _ => 0,
    };
    Info {
        pttl: int(reply.first()),
        locked: int(reply.get(1)) == 1,
        count: int(reply.get(2)).clamp(0, i64::from(u32::MAX)) as u32,
        holders: reply
            .iter()
            .skip(3)
            .filter_map(|v| match v {
                redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                redis::Value::SimpleString(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
    }
}

/// The engine's `give_back` hook of a lock-family protocol, written once over the type's
/// [`Family::release`](crate::engine::family::Family::release) (a trait cannot provide a
/// `Protocol` method from `Family`, so each family protocol's `Protocol` impl invokes this).
macro_rules! give_back_by_release {
    () => {
        async fn give_back(
            self: std::sync::Arc<Self>,
            cx: std::sync::Arc<crate::session::Ctx>,
            holder: std::sync::Arc<str>,
            lease_after: std::time::Duration,
        ) -> crate::error::Result<()> {
            let release = crate::engine::family::Release::give_back(lease_after);
            crate::engine::family::Family::release(&*self, &cx, &holder, release)
                .await
                .map(|_| ())
        }
    };
}

pub(crate) use give_back_by_release;

/// Declares a public lock type of the RLock family: a newtype over
/// [`LockCore`](crate::engine::family::LockCore) with the family's methods, documented once here.
macro_rules! lock_type {
    (
        $(#[$meta:meta])*
        pub struct $ty:ident($proto:ty) -> $won:ty;
        what = $what:literal;
    ) => {
        $(#[$meta])*
        #[derive(Clone)]
        pub struct $ty {
            core: std::sync::Arc<crate::engine::family::LockCore<$proto>>,
        }

        impl $ty {
            /// The lock's name: its key in Redis.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// let lock = client.lock("orders:42")?;
            /// assert_eq!(lock.name(), "orders:42");
            /// # Ok(()) }
            /// ```
            pub fn name(&self) -> &str {
                self.core.name()
            }

            #[doc = concat!("Waits until the ", $what, " is acquired by [`Owner::current`](crate::Owner::current), with watchdog renewal.")]
            ///
            /// # Errors
            ///
            /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) (Redis unreachable for longer
            /// than the connect timeout), [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) (the
            /// name holds other data), [`ErrorKind::Redis`](crate::ErrorKind::Redis).
            ///
            /// # Cancel safety
            ///
            /// Dropping the future leaves nothing behind: if an attempt in flight acquired the lock, it
            /// is given back.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// let guard = client.lock("orders:42")?.acquire().await?; // waits as long as it takes
            /// // ... the protected work; the watchdog renews the lease meanwhile ...
            /// guard.release().await?;
            /// # Ok(()) }
            /// ```
            pub async fn acquire(&self) -> crate::Result<crate::LockGuard<$won>> {
                self.acquire_with(crate::AcquireOptions::new()).await
            }

            /// Acquires with `options`, failing with [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
            /// when the wait limit passes. The wait limit is a deadline: the call returns by then even
            /// if Redis does not answer.
            ///
            /// # Errors
            ///
            /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout),
            /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled),
            /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) (a lease under 1 ms,
            /// a lease or wait over [`MAX_DURATION`](crate::MAX_DURATION)), and those of
            #[doc = concat!("[`acquire`](", stringify!($ty), "::acquire).")]
            ///
            /// # Cancel safety
            ///
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use std::time::Duration;
            /// let options = crosslock::AcquireOptions::new().wait(Duration::from_secs(2)).lease(Duration::from_secs(10));
            /// let guard = client.lock("orders:42")?.acquire_with(options).await?;
            /// guard.release().await?;
            /// # Ok(()) }
            /// ```
            #[doc = concat!("As [`acquire`](", stringify!($ty), "::acquire).")]
            pub async fn acquire_with(&self, options: crate::AcquireOptions) -> crate::Result<crate::LockGuard<$won>> {
                let owner = options.owner.unwrap_or_else(crate::Owner::current);
                match Box::pin(self.core.acquire_as(owner, &options)).await? {
                    Some(won) => Ok(self.core.guard(owner, won)),
                    None => Err(Box::pin(self.core.timeout_error(owner, options.wait.unwrap_or_default())).await),
                }
            }

            /// One attempt by [`Owner::current`](crate::Owner::current), with watchdog renewal;
            /// `None` if someone else holds it.
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`acquire`](", stringify!($ty), "::acquire).")]
            ///
            /// # Cancel safety
            ///
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// match client.lock("orders:42")?.try_acquire().await? {
            ///     Some(guard) => guard.release().await?,
            ///     None => println!("someone else has it"),
            /// }
            /// # Ok(()) }
            /// ```
            #[doc = concat!("As [`acquire`](", stringify!($ty), "::acquire).")]
            pub async fn try_acquire(&self) -> crate::Result<Option<crate::LockGuard<$won>>> {
                let owner = crate::Owner::current();
                let options = crate::AcquireOptions::new().wait(std::time::Duration::ZERO);
                Ok(Box::pin(self.core.acquire_as(owner, &options)).await?.map(|won| self.core.guard(owner, won)))
            }

            /// Acquires with `options`, as [`acquire_with`](Self::acquire_with), but `Ok(None)` when
            /// the wait limit passes with the lock still held by someone else (where `acquire_with`
            /// fails with [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)).
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`acquire_with`](", stringify!($ty), "::acquire_with), but for the timeout.")]
            /// An outage at the deadline is still [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable):
            /// `None` means only that the lock was busy.
            ///
            /// # Cancel safety
            ///
            #[doc = concat!("As [`acquire`](", stringify!($ty), "::acquire).")]
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use std::time::Duration;
            /// let options = crosslock::AcquireOptions::new().wait(Duration::from_secs(2));
            /// match client.lock("orders:42")?.try_acquire_with(options).await? {
            ///     Some(guard) => guard.release().await?,
            ///     None => println!("still busy after 2 s"),
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn try_acquire_with(&self, options: crate::AcquireOptions) -> crate::Result<Option<crate::LockGuard<$won>>> {
                let owner = options.owner.unwrap_or_else(crate::Owner::current);
                Ok(Box::pin(self.core.acquire_as(owner, &options)).await?.map(|won| self.core.guard(owner, won)))
            }

            /// Sets the lease of the hold of `owner` to `lease` from now: the lock now expires
            /// `lease` after this call unless extended again or released, sooner or later than it
            /// would have. A hold kept by the watchdog becomes a hold with that lease: the watchdog
            /// stops renewing it (every re-entrant acquire of it included), and the lost-lock
            /// signal fires if it is still held when that lease runs out. What is set in Redis is
            /// what the watchdog's renewal touches (the lock's hash; for a read lock also this
            /// holder's `rwlock_timeout` keys), so a Redisson client sees the new lease.
            ///
            /// # Errors
            ///
            /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when `owner` of this client does not
            /// hold it (Redis is unchanged); [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when it
            /// did but the hold is lost: its deadline passed, or Redis no longer has it (expired,
            /// force-unlocked); the lost signal fires then. [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
            /// for a lease under 1 ms or over [`MAX_DURATION`](crate::MAX_DURATION);
            /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable),
            /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType), [`ErrorKind::Redis`](crate::ErrorKind::Redis)
            /// (then the hold is kept as it was).
            ///
            /// # Cancel safety
            ///
            /// Dropping the future may or may not leave the lease set in Redis. Until an answer
            /// says otherwise the hold counts as ending no later than the new lease would end it
            /// (so a shorter lease Redis may have set is never outlived here); at worst it is told
            /// lost earlier than Redis lets it go.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use std::time::Duration;
            /// use crosslock::{AcquireOptions, Owner};
            /// let lock = client.lock("orders:42")?;
            /// let me = Owner::new(1);
            /// lock.acquire_as(me, &AcquireOptions::new().lease(Duration::from_secs(5))).await?;
            /// lock.extend_as(me, Duration::from_secs(30)).await?; // 30 s from now
            /// lock.release_as(me).await?;
            /// # Ok(()) }
            /// ```
            pub async fn extend_as(&self, owner: crate::Owner, lease: std::time::Duration) -> crate::Result<()> {
                Box::pin(self.core.extend_as(owner, lease)).await
            }

            /// Acquires for an explicit `owner` without a guard; `Ok(false)` when the wait limit
            /// passed.
            ///
            /// This is the building block of hand-offs between tasks: whoever acquires this way
            #[doc = concat!("releases with [`release_as`](", stringify!($ty), "::release_as). `options.owner` is ignored in favour of `owner`.")]
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`acquire_with`](", stringify!($ty), "::acquire_with), except that a passed wait limit is `Ok(false)`.")]
            ///
            /// # Cancel safety
            ///
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use crosslock::{AcquireOptions, Owner};
            /// let lock = client.lock("orders:42")?;
            /// let job = Owner::unique(); // acquired here, released by whichever task finishes the job
            /// assert!(lock.acquire_as(job, &AcquireOptions::new()).await?);
            /// lock.release_as(job).await?;
            /// # Ok(()) }
            /// ```
            #[doc = concat!("As [`acquire`](", stringify!($ty), "::acquire).")]
            pub async fn acquire_as(&self, owner: crate::Owner, options: &crate::AcquireOptions) -> crate::Result<bool> {
                Ok(Box::pin(self.core.acquire_as(owner, options)).await?.is_some())
            }

            /// Releases one hold of `owner`; `Ok(true)` when that fully released the lock,
            /// `Ok(false)` when `owner` still holds it re-entrantly.
            ///
            /// Bounded by the client's response timeout as a whole.
            ///
            /// # Errors
            ///
            /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when `owner` does not hold the lock
            /// (Redis is unchanged); [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when it did
            /// hold it but the lock was lost meanwhile (the lost signal fired);
            /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) when Redis did not answer
            /// in time (the hold is then no longer renewed and expires after its lease);
            /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType),
            /// [`ErrorKind::Redis`](crate::ErrorKind::Redis) (then nothing changed, and the hold stays).
            ///
            /// # Cancel safety
            ///
            /// Once called, a release completes even if the future is dropped midway: it finishes in
            /// the background.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use crosslock::{AcquireOptions, Owner};
            /// let lock = client.lock("orders:42")?;
            /// let me = Owner::new(1);
            /// lock.acquire_as(me, &AcquireOptions::new()).await?;
            /// lock.acquire_as(me, &AcquireOptions::new()).await?; // re-entered
            /// assert!(!lock.release_as(me).await?); // still held once
            /// assert!(lock.release_as(me).await?);  // now free
            /// # Ok(()) }
            /// ```
            pub async fn release_as(&self, owner: crate::Owner) -> crate::Result<bool> {
                Box::pin(self.core.release_as(owner)).await
            }

            /// Deletes the lock whoever holds it and wakes a waiter; `Ok(true)` if it was locked.
            ///
            /// The former holder's watchdog finds the lock gone at its next renewal and reports it
            /// lost.
            ///
            /// # Errors
            ///
            /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) (the key is left alone),
            /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable),
            /// [`ErrorKind::Redis`](crate::ErrorKind::Redis).
            ///
            /// # Cancel safety
            ///
            /// Dropping the future may or may not stop the deletion (the command may already be sent).
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// if client.lock("orders:42")?.force_unlock().await? {
            ///     println!("deleted a lock someone held");
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn force_unlock(&self) -> crate::Result<bool> {
                self.core.force_unlock().await
            }

            #[doc = concat!("Whether anyone holds the ", $what, ".")]
            ///
            /// # Errors
            ///
            /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType),
            /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) (no answer within the
            /// response timeout), [`ErrorKind::Redis`](crate::ErrorKind::Redis).
            ///
            /// # Cancel safety
            ///
            /// A query: dropping the future changes nothing.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// let locked = client.lock("orders:42")?.is_locked().await?;
            /// println!("orders:42 is {}", if locked { "taken" } else { "free" });
            /// # Ok(()) }
            /// ```
            pub async fn is_locked(&self) -> crate::Result<bool> {
                self.core.is_locked().await
            }

            /// Whether `owner` of this client holds the lock.
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`is_locked`](", stringify!($ty), "::is_locked).")]
            ///
            /// # Cancel safety
            ///
            /// A query: dropping the future changes nothing.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// let lock = client.lock("orders:42")?;
            /// let guard = lock.acquire().await?;
            /// assert!(lock.is_held_by(guard.owner()).await?);
            /// guard.release().await?;
            /// # Ok(()) }
            /// ```
            pub async fn is_held_by(&self, owner: crate::Owner) -> crate::Result<bool> {
                Ok(self.core.hold_count_of(owner).await? > 0)
            }

            /// How many times `owner` holds the lock (0 when it does not).
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`is_locked`](", stringify!($ty), "::is_locked).")]
            ///
            /// # Cancel safety
            ///
            /// A query: dropping the future changes nothing.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// let lock = client.lock("orders:42")?;
            /// let guard = lock.acquire().await?;
            /// assert_eq!(lock.hold_count_of(guard.owner()).await?, 1);
            /// guard.release().await?;
            /// # Ok(()) }
            /// ```
            pub async fn hold_count_of(&self, owner: crate::Owner) -> crate::Result<u32> {
                self.core.hold_count_of(owner).await
            }

            /// The time left before the lock expires: `None` when it is not locked,
            /// `Some(Duration::MAX)` when its key has no expiry.
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`is_locked`](", stringify!($ty), "::is_locked).")]
            ///
            /// # Cancel safety
            ///
            /// A query: dropping the future changes nothing.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// if let Some(left) = client.lock("orders:42")?.remaining_lease().await? {
            ///     println!("expires in {left:?} unless renewed");
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn remaining_lease(&self) -> crate::Result<Option<std::time::Duration>> {
                self.core.remaining_lease().await
            }

            /// The current holders' strings (`<client-uuid>:<n>`, `…:write` for a writer); empty when
            /// it is not locked.
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`is_locked`](", stringify!($ty), "::is_locked).")]
            ///
            /// # Cancel safety
            ///
            /// A query: dropping the future changes nothing.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// for holder in client.lock("orders:42")?.holders_now().await? {
            ///     println!("held by {holder}"); // <client-uuid>:<n>
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn holders_now(&self) -> crate::Result<Vec<String>> {
                self.core.holders_now().await
            }

            /// A token cancelled when the hold of `owner` may be lost (see
            /// [`LockGuard::lost`](crate::LockGuard::lost)). `None` when this process records no hold
            /// of `owner`. Already cancelled if the hold's deadline has passed (see
            /// [`is_lost`](Self::is_lost)); a token kept is cancelled when the loss is found, by
            /// the renewal loop or by a read.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use crosslock::{AcquireOptions, Owner};
            /// let lock = client.lock("orders:42")?;
            /// let me = Owner::new(1);
            /// lock.acquire_as(me, &AcquireOptions::new()).await?;
            /// let lost = lock.lost_token(me).expect("held here");
            /// tokio::spawn(async move { lost.cancelled().await; eprintln!("orders:42 lost") });
            /// # Ok(()) }
            /// ```
            pub fn lost_token(&self, owner: crate::Owner) -> Option<crate::CancellationToken> {
                self.core.lost_token(owner)
            }

            /// Whether the hold of `owner` may be lost (and was not released since): a renewal
            /// found it gone, or its last confirmed lease's deadline has passed. Decided on the
            /// spot from the clock (no round trip), so it is true at once after a pause past the
            /// deadline, before the renewal loop has run; the token and the client's lost-lock
            /// listener are told then, once.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use crosslock::{AcquireOptions, Owner};
            /// let lock = client.lock("orders:42")?;
            /// lock.acquire_as(Owner::new(1), &AcquireOptions::new()).await?;
            /// assert!(!lock.is_lost(Owner::new(1)));
            /// # Ok(()) }
            /// ```
            pub fn is_lost(&self, owner: crate::Owner) -> bool {
                self.core.is_lost(owner)
            }

            /// The [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error that
            #[doc = concat!("[`acquire_with`](", stringify!($ty), "::acquire_with) returns when its wait limit passes, for callers of [`acquire_as`](", stringify!($ty), "::acquire_as)")]
            /// that got `Ok(false)` and want to report it the same way. It names the lock, `owner`'s
            /// holder string, how long it waited and who holds the lock now (asked with a short
            /// bound, best effort).
            ///
            /// # Cancel safety
            ///
            /// Cancel-safe: it only reads.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// // shown with a Lock; every lock type has the same method
            /// use std::time::{Duration, Instant};
            /// use crosslock::{AcquireOptions, Owner};
            /// let lock = client.lock("orders:42")?;
            /// let started = Instant::now();
            /// let wait = AcquireOptions::new().wait(Duration::from_millis(100));
            /// if !lock.acquire_as(Owner::new(1), &wait).await? {
            ///     return Err(lock.timeout_error(Owner::new(1), started.elapsed()).await);
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn timeout_error(&self, owner: crate::Owner, waited: std::time::Duration) -> crate::Error {
                self.core.timeout_error(owner, waited).await
            }

            /// This lock, type-erased: for code (and composite locks) that handle every kind alike.
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            /// use std::sync::Arc;
            /// let any: Vec<Arc<dyn crosslock::AnyLock>> =
            ///     vec![client.lock("a")?.erased(), client.fair_lock("b")?.erased()];
            /// for lock in &any {
            ///     println!("{} is a {}", lock.name(), lock.kind().as_str());
            /// }
            /// # Ok(()) }
            /// ```
            pub fn erased(&self) -> std::sync::Arc<dyn crate::AnyLock> {
                std::sync::Arc::new(crate::engine::any_lock::Erased(self.core.clone()))
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty)).field("name", &self.name()).finish()
            }
        }
    };
}

pub(crate) use lock_type;

/// Declares a public synchronizer type whose holds belong to nobody (a semaphore, a latch): the
/// struct (its client and its keys, shared by its clones), `name()`, `cx()` (the client's state
/// for the name), `Debug`, and its factory on [`Client`](crate::Client), which makes the keys
/// from the checked name with `$make` (`|client, name| -> Result<keys>`).
macro_rules! object_type {
    (
        $(#[$meta:meta])*
        pub struct $ty:ident { $keys:ident: $keys_ty:ty }
        what = $what:literal, example = $example:literal;
        $(#[$factory_meta:meta])*
        pub fn $factory:ident = $make:expr;
    ) => {
        $(#[$meta])*
        #[derive(Clone)]
        pub struct $ty {
            client: crate::client::Client,
            $keys: std::sync::Arc<$keys_ty>,
        }

        impl $ty {
            #[doc = concat!("The ", $what, "'s name: its key in Redis.")]
            ///
            /// # Examples
            ///
            /// ```no_run
            /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
            #[doc = concat!(
                "assert_eq!(client.", stringify!($factory), "(\"", $example, "\")?.name(), \"",
                $example, "\");"
            )]
            /// # Ok(()) }
            /// ```
            pub fn name(&self) -> &str {
                &self.$keys.name
            }

            async fn cx(&self) -> crate::error::Result<std::sync::Arc<crate::session::Ctx>> {
                crate::objects::state_for(&self.client, self.name()).await
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("name", &self.name())
                    .finish()
            }
        }

        impl crate::client::Client {
            $(#[$factory_meta])*
            pub fn $factory(&self, name: &str) -> crate::error::Result<$ty> {
                let make: fn(&crate::client::Client, &str) -> crate::error::Result<$keys_ty> =
                    $make;
                Ok($ty {
                    client: self.clone(),
                    $keys: std::sync::Arc::new(make(self, name)?),
                })
            }
        }
    };
}

pub(crate) use object_type;
