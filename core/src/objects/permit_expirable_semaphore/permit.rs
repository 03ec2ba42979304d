//! [`Permit`]: a permit taken from a [`PermitExpirableSemaphore`], released when dropped.

use std::fmt;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::Result;

use super::PermitExpirableSemaphore;

/// A permit taken from a [`PermitExpirableSemaphore`]; released when dropped.
///
/// Prefer [`release`](Self::release), which reports errors.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// let permit = client.permit_expirable_semaphore("slots")?.acquire().await?;
/// tokio::select! {
///     _ = permit.lost().cancelled() => eprintln!("permit {} lost", permit.id()),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the permit releases it at once"]
pub struct Permit {
    pub(super) sem: Option<PermitExpirableSemaphore>,
    pub(super) id: Arc<str>,
    pub(super) lost: CancellationToken,
}

impl Permit {
    /// The permit's id: 32 hex characters, the same Redisson shows. Any process may release it
    /// by this id.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let permit = client.permit_expirable_semaphore("slots")?.acquire().await?;
    /// assert_eq!(permit.id().len(), 32); // hex, as Redisson shows it
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Cancelled as soon as the permit may be lost: a renewal found it gone (released by someone
    /// else, expired and counted back), or its lease ran out unrenewed (a lease, or Redis out of
    /// reach). Watch it next to the work the permit allows. Reading it checks the permit's
    /// deadline against the clock first, as [`LockGuard::lost`](crate::LockGuard::lost) does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let permit = client.permit_expirable_semaphore("slots")?.acquire().await?;
    /// assert!(!permit.lost().is_cancelled());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> &CancellationToken {
        if !self.lost.is_cancelled()
            && let Some(sem) = &self.sem
        {
            let _ = sem.is_lost(&self.id);
        }
        &self.lost
    }

    /// Releases the permit.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::release`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not stop the release (the command may already be sent).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let permit = client.permit_expirable_semaphore("slots")?.acquire().await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        let sem = self.sem.take().expect("released once");
        sem.release(&self.id).await
    }

    /// Keeps the permit taken and kept (renewed by the watchdog, its loss reported) but no longer
    /// released when this value is dropped: for code that tracks permits by id (release it with
    /// [`PermitExpirableSemaphore::release`]). Returns its id.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let id: String = slots.acquire().await?.detach(); // still renewed; release it by id
    /// slots.release(&id).await?;
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) -> String {
        self.sem = None;
        self.id.to_string()
    }

    /// Keeps the permit taken but stops tracking it here: it is no longer renewed nor released
    /// with this value (it expires after its lease, or is released by id, by anyone). Returns
    /// its id.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let id = slots.acquire().await?.into_id(); // no longer renewed: expires after its lease
    /// slots.release(&id).await?;
    /// # Ok(()) }
    /// ```
    pub fn into_id(mut self) -> String {
        if let Some(sem) = self.sem.take()
            && let Some(cx) = sem.client.state_now()
        {
            cx.holds.released(&sem.keys.hold_key(&self.id), true);
        }
        self.id.to_string()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(sem) = self.sem.take() {
            let id = self.id.clone();
            // Counted until Redis has the permit back, so this client's next acquire of the
            // semaphore waits for it rather than finding the permit still taken.
            let running = sem
                .client
                .state_now()
                .map(|cx| cx.settling.begin(sem.name()));
            crate::runtime::spawn(async move {
                let _ = sem.release(&id).await;
                drop(running);
            });
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("id", &self.id)
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}
