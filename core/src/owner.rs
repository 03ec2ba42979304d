//! Who holds a lock: the `<n>` in Redisson's holder string `<client-uuid>:<n>`.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

/// The identity of a holder within one client: Redisson's thread id.
///
/// Within a [`Client`](crate::Client) a lock is held by one `Owner`, and the same `Owner` may
/// re-enter it. By default an operation runs as [`Owner::current`]: the enclosing
/// [`Owner::scope`] if there is one, else the current tokio task, else the current thread. The
/// bindings pass their own: a Python thread or asyncio task, a Node async call chain.
///
/// # Examples
///
/// ```
/// use crosslock::Owner;
/// let job = Owner::new(42);
/// assert_eq!(job.holder("6f1c…"), "6f1c…:42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(u64);

tokio::task_local! {
    static SCOPED: Owner;
}

thread_local! {
    static THREAD_OWNER: u64 = next_id();
}

// Ids handed out to threads and scopes. Tokio task ids live in their own range (high bit set) so
// the two never collide.
static NEXT: AtomicU64 = AtomicU64::new(1);
const TASK_BIT: u64 = 1 << 62;

fn next_id() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Owner {
    /// An owner with an explicit number, for example one agreed with another process or handed
    /// over from another task.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::Owner::new(7).get(), 7);
    /// ```
    pub const fn new(n: u64) -> Self {
        Owner(n)
    }

    /// A fresh owner, distinct from every other owner this process made.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::Owner;
    /// assert_ne!(Owner::unique(), Owner::unique());
    /// ```
    pub fn unique() -> Self {
        Owner(next_id())
    }

    /// The number `<n>` that goes into the holder string.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::Owner::new(3).get(), 3);
    /// ```
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The owner of the calling code: the innermost [`Owner::scope`], else the current tokio
    /// task, else the current thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::Owner;
    /// // Outside any scope or task: the current thread, the same at every call.
    /// assert_eq!(Owner::current(), Owner::current());
    /// ```
    pub fn current() -> Self {
        if let Ok(owner) = SCOPED.try_with(|o| *o) {
            return owner;
        }
        if let Some(id) = tokio::task::try_id() {
            // Task ids are unique non-zero integers; `Id` only exposes them through Display.
            if let Ok(n) = id.to_string().parse::<u64>() {
                return Owner(TASK_BIT | (n & (TASK_BIT - 1)));
            }
        }
        Owner(THREAD_OWNER.with(|n| *n))
    }

    /// Runs `future` with `self` as the [`Owner::current`] of everything it awaits, so locks
    /// taken inside can be released by another task that uses the same owner.
    ///
    /// # Cancel safety
    ///
    /// As cancel-safe as `future`: dropping the scope drops `future` where it stands.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use crosslock::Owner;
    /// let job = Owner::unique();
    /// let lock = client.lock("orders:42")?;
    /// let guard = job.scope(lock.acquire()).await?; // acquired as `job`
    /// assert_eq!(guard.owner(), job);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        SCOPED.scope(self, future).await
    }

    /// The holder string Redisson uses for this owner of `client_id`: `<client-uuid>:<n>`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(crosslock::Owner::new(1).holder("abc"), "abc:1");
    /// ```
    pub fn holder(self, client_id: &str) -> String {
        format!("{client_id}:{}", self.0)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<u64> for Owner {
    fn from(n: u64) -> Self {
        Owner(n)
    }
}
