//! [`ReadWriteLock`]: Redisson's `RReadWriteLock`, with its [`ReadLock`] and [`WriteLock`].

use std::sync::Arc;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::holds::{HoldKey, RenewKind, Suffix};
use crate::engine::{Attempt, Protocol, Request, Waiting};
use crate::error::{Error, ErrorKind, Result};
use crate::kinds::LockKind;
use crate::owner::Owner;
use crate::scripts;
use crate::session::Ctx;

use super::{
    Release, check_name, give_back_by_release, lock_type, ms, parse_info, settled, woken_on,
    won_or_busy,
};
use crate::layout;

/// What the read and the write lock of one name share.
#[derive(Debug)]
pub(crate) struct Rw {
    name: Arc<str>,
    /// `redisson_rwlock:{name}`: `0` after a read release, `1` after a write release.
    channel: String,
    /// The part of a reader's timeout keys before `:<holder>`: `{name}` (or the name itself when
    /// it contains `{`).
    key_prefix: Arc<str>,
}

/// The part of a reader's timeout keys before `:<holder>` for the lock named `name`: `{name}`, or
/// the name itself when it contains `{`.
fn read_key_prefix(name: &Arc<str>) -> Arc<str> {
    if name.contains('{') {
        name.clone()
    } else {
        Arc::from(layout::tagged(name))
    }
}

impl Rw {
    fn new(name: Arc<str>) -> Self {
        Rw {
            channel: layout::rw_channel(&name),
            key_prefix: read_key_prefix(&name),
            name,
        }
    }

    fn waiting(&self) -> Waiting {
        woken_on(&self.channel)
    }

    async fn info(&self, cx: &Ctx, holder: &str, which: &str) -> Result<Info> {
        let reply: Vec<redis::Value> = cx
            .conn
            .eval(
                &scripts::RW_INFO,
                &[&self.name],
                &[&holder, &which],
                Some(&self.name),
            )
            .await?;
        Ok(parse_info(&reply))
    }

    async fn force_unlock(&self, cx: &Ctx, which: &str) -> Result<bool> {
        let deleted: i64 = cx
            .conn
            .eval(
                &scripts::RW_FORCE_UNLOCK,
                &[&self.name, &self.channel],
                &[&which, &cx.conn.publish_command()],
                Some(&self.name),
            )
            .await?;
        Ok(deleted == 1)
    }
}

/// One half of a read-write lock: the read lock ([`Read`]) or the write lock ([`Write`], whose
/// holder strings end in `:write`). The halves share the name, the channel and the info and
/// force-unlock scripts; they differ in their acquire and release scripts, the write lock's
/// suffix and upgrade check, and how a read hold is renewed (its timeout key too).
#[derive(Debug)]
pub(crate) struct Half<const WRITE: bool> {
    rw: Rw,
}

/// The read lock's protocol.
pub(crate) type Read = Half<false>;

/// The write lock's protocol.
pub(crate) type Write = Half<true>;

impl<const WRITE: bool> Half<WRITE> {
    /// The half's word in the shared scripts' arguments.
    const WHICH: &'static str = if WRITE { "write" } else { "read" };

    /// A reader's timeout-key prefix: `<{name}>:<holder>:rwlock_timeout`.
    fn timeout_prefix(&self, holder: &str) -> String {
        layout::rw_timeout_prefix(&self.rw.name, holder)
    }

    async fn acquire_read(&self, cx: &Ctx, request: &Request) -> Result<Option<i64>> {
        let prefix = self.timeout_prefix(&request.holder);
        let write = format!("{}:write", request.holder);
        cx.conn
            .eval_synced(
                &request.acks,
                &scripts::READ_ACQUIRE,
                &[&self.rw.name, &prefix],
                &[&ms(request.lease), &&*request.holder, &write],
                Some(&self.rw.name),
            )
            .await
    }

    async fn acquire_write(&self, cx: &Ctx, request: &Request) -> Result<Option<i64>> {
        let reader = request
            .holder
            .strip_suffix(":write")
            .unwrap_or(&request.holder)
            .to_owned();
        cx.conn
            .eval_synced(
                &request.acks,
                &scripts::WRITE_ACQUIRE,
                &[&self.rw.name],
                &[&ms(request.lease), &&*request.holder, &reader],
                Some(&self.rw.name),
            )
            .await
    }

    /// The read release script (a read hold's lease is its timeout key's: `lease_after` is not
    /// used).
    async fn release_read(&self, cx: &Ctx, holder: &str, release: Release) -> Result<Option<i64>> {
        let (_, retry, count) = release.args();
        let prefix = self.timeout_prefix(holder);
        cx.conn
            .eval(
                &scripts::READ_RELEASE,
                &[
                    &self.rw.name,
                    &self.rw.channel,
                    &prefix,
                    &self.rw.key_prefix,
                ],
                &[&"0", &holder, &cx.conn.publish_command(), &retry, &count],
                Some(&self.rw.name),
            )
            .await
    }

    async fn release_write(&self, cx: &Ctx, holder: &str, release: Release) -> Result<Option<i64>> {
        let (lease_after, retry, count) = release.args();
        cx.conn
            .eval(
                &scripts::WRITE_RELEASE,
                &[&self.rw.name, &self.rw.channel],
                &[
                    &"1",
                    &lease_after,
                    &holder,
                    &cx.conn.publish_command(),
                    &retry,
                    &count,
                ],
                Some(&self.rw.name),
            )
            .await
    }

    /// The write lock refuses an upgrade: its owner holding the read lock but not the write lock.
    fn refuse_upgrade(&self, cx: &Ctx, owner: Owner) -> Result<()> {
        let read = HoldKey::of_owner(self.rw.name.clone(), owner, Suffix::None);
        let write = HoldKey::of_owner(self.rw.name.clone(), owner, Suffix::Write);
        if cx.holds.count(&read) > 0 && cx.holds.count(&write) == 0 && !cx.holds.is_lost(&read) {
            return Err(Error::new(
                ErrorKind::UpgradeRefused,
                format!(
                    "the write lock of '{}' was refused: {} holds its read lock, and an upgrade would \
                     wait for itself forever; release the read lock first, then acquire the write lock \
                     (Redis is unchanged)",
                    self.rw.name,
                    cx.holder(owner, Suffix::None)
                ),
            ));
        }
        Ok(())
    }
}

impl<const WRITE: bool> Protocol for Half<WRITE> {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.rw.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        self.rw.waiting()
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<()>> {
        let reply = match WRITE {
            true => self.acquire_write(&cx, &request).await?,
            false => self.acquire_read(&cx, &request).await?,
        };
        Ok(won_or_busy(reply))
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<()>> {
        Ok(settled(
            &self.rw.info(cx, holder, Self::WHICH).await?,
            recorded,
        ))
    }

    give_back_by_release!();
}

impl<const WRITE: bool> Family for Half<WRITE> {
    const KIND: LockKind = if WRITE {
        LockKind::WriteLock
    } else {
        LockKind::ReadLock
    };

    fn for_name(name: Arc<str>) -> Self {
        Half { rw: Rw::new(name) }
    }

    fn suffix(&self) -> Suffix {
        if WRITE { Suffix::Write } else { Suffix::None }
    }

    fn renew_kind(name: &Arc<str>) -> RenewKind {
        match WRITE {
            true => RenewKind::Hash,
            false => RenewKind::Read {
                prefix: read_key_prefix(name),
            },
        }
    }

    fn precheck(&self, cx: &Ctx, owner: Owner) -> Result<()> {
        match WRITE {
            true => self.refuse_upgrade(cx, owner),
            false => Ok(()),
        }
    }

    async fn release(&self, cx: &Ctx, holder: &str, release: Release) -> Result<Option<bool>> {
        let reply = match WRITE {
            true => self.release_write(cx, holder, release).await?,
            false => self.release_read(cx, holder, release).await?,
        };
        Ok(reply.map(|r| r == 1))
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        self.rw.force_unlock(cx, Self::WHICH).await
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.rw.info(cx, holder, Self::WHICH).await
    }

    fn token(_won: &()) -> Option<u64> {
        None
    }
}

lock_type! {
    /// The read half of a [`ReadWriteLock`]: many holders at once, none while a writer holds the
    /// write lock (except that writer itself: a downgrade).
    ///
    /// Each read hold keeps a timeout key of its own,
    /// `{name}:<client-uuid>:<n>:rwlock_timeout:<k>`, renewed by this client's watchdog: as
    /// Redisson's readers do, so that a Java reader's release never mistakes a live crosslock
    /// reader for a dead one. A read release wakes one waiter.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let rw = client.read_write_lock("catalog")?;
    /// let a = rw.read().acquire().await?;
    /// let b = rw.read().try_acquire().await?; // another reader gets in too
    /// assert!(b.is_some());
    /// a.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct ReadLock(Read) -> ();
    what = "read lock";
}

lock_type! {
    /// The write half of a [`ReadWriteLock`]: one holder (re-entrant), and no readers but the
    /// writer itself.
    ///
    /// Its holder string is `<client-uuid>:<n>:write`. A holder of the *read* lock that asks for
    /// the write lock gets [`ErrorKind::UpgradeRefused`] at once
    /// (an upgrade would wait for itself forever); the writer may take the read lock (a downgrade)
    /// and release the write lock, keeping the read hold. A write release wakes every waiter,
    /// a downgrade's too (readers may come in then).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let rw = client.read_write_lock("catalog")?;
    /// let writing = rw.write().acquire().await?;
    /// let reading = rw.read().acquire().await?; // the writer may also read (a downgrade)
    /// writing.release().await?;                  // still reading
    /// reading.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct WriteLock(Write) -> ();
    what = "write lock";
}

/// Many readers or one writer, stored exactly as Redisson's `RReadWriteLock`.
///
/// Redis holds one hash at the name: `mode` → `read` or `write`, each reader `<client-uuid>:<n>`
/// → its hold count, the writer `<client-uuid>:<n>:write` → its hold count; plus a timeout key per
/// read hold. Waiters of either kind share the channel `redisson_rwlock:{name}`: a write release
/// publishes `1` (every waiter retries: readers can all enter), a read release `0` (one retries).
/// Never give a `ReadWriteLock` the name of a [`Lock`](crate::Lock) or another lock type: the
/// layouts differ, and crosslock refuses the mix with
/// [`ErrorKind::WrongType`].
///
/// What it does that Redisson's does not: a read→write upgrade is refused at once with a clear
/// error instead of waiting forever (Redisson waits, by design), and the renewal of a read hold
/// re-creates its timeout key if it has expired while the hold is still in the hash.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// let rw = client.read_write_lock("catalog")?;
/// let reading = rw.read().acquire().await?;      // many readers at once
/// reading.release().await?;
/// let writing = rw.write().acquire().await?;     // one writer, no readers
/// let downgrade = rw.read().acquire().await?;    // the writer may also read
/// writing.release().await?;                      // ...and keeps reading
/// downgrade.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl ReadWriteLock {
    /// The lock's name: its key in Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// assert_eq!(client.read_write_lock("catalog")?.name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read lock.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let rw = client.read_write_lock("catalog")?;
    /// let reading = rw.read().acquire().await?; // shared with other readers
    /// reading.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> &ReadLock {
        &self.read
    }

    /// The write lock.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let rw = client.read_write_lock("catalog")?;
    /// let writing = rw.write().acquire().await?; // excludes readers and writers
    /// writing.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> &WriteLock {
        &self.write
    }
}

impl Client {
    /// A [`ReadWriteLock`] (Redisson `RReadWriteLock`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let rw = client.read_write_lock("catalog")?; // Redisson's getReadWriteLock
    /// let guard = rw.read().acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        let name = check_name(self, name, "lock")?;
        Ok(ReadWriteLock {
            read: ReadLock {
                core: LockCore::new(self.clone(), Read::for_name(name.clone())),
            },
            write: WriteLock {
                core: LockCore::new(self.clone(), Write::for_name(name)),
            },
        })
    }
}
