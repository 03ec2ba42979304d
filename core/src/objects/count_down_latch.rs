//! [`CountDownLatch`]: Redisson's `RCountDownLatch`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::AcquireOptions;
use crate::engine::unowned;
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy};
use crate::error::{Error, ErrorKind, Result};
use crate::scripts;
use crate::session::Ctx;
use crate::telemetry::{self, ObjectType};

use super::keyed::Keyed;
use super::{check_name_with, object_type};
use crate::layout;

const KIND: &str = "latch";

/// A latch's count (at its name) and channel.
type Keys = Keyed;

impl Keyed {
    /// The count now (none: 0, open).
    async fn count(&self, cx: &Ctx) -> Result<i64> {
        self.eval(cx, &scripts::LATCH_COUNT, &[]).await
    }
}

/// Waiting for the count to reach zero.
struct Open {
    keys: Arc<Keys>,
}

impl Protocol for Open {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.keys.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::on(&self.keys.channel, WakePolicy::Latch)
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, _request: Request) -> Result<Attempt<()>> {
        Ok(if self.keys.count(&cx).await? == 0 {
            Attempt::Won(())
        } else {
            Attempt::Busy { retry_in: None }
        })
    }

    async fn settle(&self, _cx: &Ctx, _holder: &str, _recorded: usize) -> Result<Option<()>> {
        Ok(None) // a look changes nothing: just look again
    }

    async fn give_back(
        self: Arc<Self>,
        _cx: Arc<Ctx>,
        _holder: Arc<str>,
        _lease: Duration,
    ) -> Result<()> {
        Ok(())
    }
}

object_type! {
    /// A count-down latch shared by every process on the same Redis, stored exactly as Redisson's
    /// `RCountDownLatch`: a string at the name holding the count, and the channel
    /// `redisson_countdownlatch__channel__{name}`, on which `0` is published when the count reaches
    /// zero (every waiter wakes) and `1` when a count is set.
    ///
    /// Waiters wait for zero; anyone may count down (a latch has no owner). An absent count means
    /// open.
    ///
    /// What it does that Redisson's does not: a waiter subscribes and then looks at the count, so a
    /// latch that opens while the subscription is being set up is never missed (Redisson's untimed
    /// `await()` can miss that `0` and wait for ever).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let ready = client.count_down_latch("workers-ready")?;
    /// ready.try_set_count(3).await?;   // the coordinator
    /// ready.count_down().await?;       // each of 3 workers, from any process or language
    /// ready.wait().await?;             // anyone: returns once all 3 counted down
    /// # Ok(()) }
    /// ```
    pub struct CountDownLatch { keys: Keys }
    what = "latch", example = "batch:7";
    /// A [`CountDownLatch`] (Redisson `RCountDownLatch`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let latch = client.count_down_latch("batch:7")?; // Redisson's getCountDownLatch
    /// latch.try_set_count(2).await?;
    /// # Ok(()) }
    /// ```
    pub fn count_down_latch = |client, name| {
        let channel = layout::latch_channel(name);
        let name = check_name_with(client, name, "latch", [channel.clone()])?;
        Ok(Keyed::new(name, channel, KIND))
    };
}

impl CountDownLatch {
    /// Sets the count to `count` (at least 1) unless the latch is already counting; `Ok(false)`
    /// if it was.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for 0, [`ErrorKind::WrongType`] (the name holds other
    /// data), [`ErrorKind::Unavailable`], [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not stop the change (the command may already be sent).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let latch = client.count_down_latch("batch:7")?;
    /// latch.try_set_count(3).await?; // three workers must report
    /// # Ok(()) }
    /// ```
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        crate::limits::LATCH_COUNT
            .check(count, &format!("the count of latch '{}'", self.name()))
            .map_err(|e| e.with_lock(self.name()))?;
        let set: i64 = self.publishing(&scripts::LATCH_TRY_SET, &[&count]).await?;
        Ok(set == 1)
    }

    /// Counts down by one; at zero every waiter, anywhere, is woken. Returns the count left.
    ///
    /// # Errors
    ///
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let left = client.count_down_latch("batch:7")?.count_down().await?;
    /// println!("{left} to go");
    /// # Ok(()) }
    /// ```
    pub async fn count_down(&self) -> Result<u64> {
        let left: i64 = self.publishing(&scripts::LATCH_COUNT_DOWN, &[]).await?;
        Ok(left.max(0) as u64)
    }

    /// The count now (0: open).
    ///
    /// # Errors
    ///
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Cancel safety
    ///
    /// A query: dropping the future changes nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("{} to go", client.count_down_latch("batch:7")?.count().await?);
    /// # Ok(()) }
    /// ```
    pub async fn count(&self) -> Result<u64> {
        let cx = self.cx().await?;
        Ok(self.keys.count(&cx).await?.max(0) as u64)
    }

    /// Waits until the count reaches zero.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] (Redis unreachable longer than the connect timeout),
    /// [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind (no subscription).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.count_down_latch("batch:7")?.wait().await?; // until the count reaches zero
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self) -> Result<()> {
        self.wait_with(AcquireOptions::new()).await
    }

    /// Waits within `options.wait` (a deadline) or until `options.cancel` is cancelled; fails with
    /// [`ErrorKind::Timeout`] when the wait limit passes. `lease` and `owner` do not apply and
    /// are refused.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Timeout`], [`ErrorKind::Cancelled`], [`ErrorKind::InvalidArgument`], and those
    /// of [`wait`](Self::wait).
    ///
    /// # Cancel safety
    ///
    /// As [`wait`](Self::wait).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let latch = client.count_down_latch("batch:7")?;
    /// latch.wait_with(crosslock::AcquireOptions::new().wait(Duration::from_secs(5))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_with(&self, options: AcquireOptions) -> Result<()> {
        let waited = options.wait.unwrap_or_default();
        if self.open_within(options).await? {
            return Ok(());
        }
        let count = match tokio::time::timeout(Duration::from_millis(200), self.count()).await {
            Ok(Ok(n)) => format!(" (count {n})"),
            _ => String::new(),
        };
        Err(Error::new(
            ErrorKind::Timeout,
            format!(
                "gave up waiting for latch '{}' to open after {:.3}s{count}; retry later or allow a \
                 longer wait",
                self.name(),
                waited.as_secs_f64()
            ),
        )
        .with_lock(self.name())
        .with_waited(waited))
    }

    /// As [`wait_with`](Self::wait_with), answering `Ok(false)` when the wait limit passed.
    ///
    /// # Errors
    ///
    /// As [`wait_with`](Self::wait_with), except the timeout.
    ///
    /// # Cancel safety
    ///
    /// As [`wait`](Self::wait).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let latch = client.count_down_latch("batch:7")?;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_secs(5));
    /// if !latch.open_within(options).await? {
    ///     println!("still {} to go", latch.count().await?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn open_within(&self, options: AcquireOptions) -> Result<bool> {
        let start = Instant::now();
        let telemetry = self.client.options().telemetry.as_ref();
        let object = ObjectType::CountDownLatch;
        let opened = telemetry::measured(telemetry, object, self.name(), start, async {
            self.open_from(start, options).await
        })
        .await?;
        Ok(opened.is_some())
    }

    /// [`open_within`](Self::open_within), unmeasured, for a call made at `start`; `Some` when
    /// open.
    async fn open_from(&self, start: Instant, options: AcquireOptions) -> Result<Option<()>> {
        if options.lease.is_some() || options.owner.is_some() {
            return Err(Error::invalid(format!(
                "latch '{}': a wait has no lease and no owner; leave them out",
                self.name()
            ))
            .with_lock(self.name()));
        }
        options.validate(self.name())?;
        let cx = self.cx().await?;
        let proto = Arc::new(Open {
            keys: self.keys.clone(),
        });
        unowned::acquire(cx, proto, None, options.wait, options.cancel, start).await
    }

    /// Deletes the latch (publishing `1`); `Ok(true)` if it existed.
    ///
    /// # Errors
    ///
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.count_down_latch("batch:7")?.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<bool> {
        let deleted: i64 = self.publishing(&scripts::LATCH_DELETE, &[]).await?;
        Ok(deleted == 1)
    }

    /// Runs one of the latch's publishing scripts ([`Keyed::eval_publishing`]).
    async fn publishing<T: redis::FromRedisValue>(
        &self,
        script: &crate::scripts::Lua,
        args: &[&dyn crate::transport::ToArg],
    ) -> Result<T> {
        let cx = self.cx().await?;
        self.keys.eval_publishing(&cx, script, args).await
    }
}
