//! For bindings and embedders: running core futures from a host's own threads and event loops.
//!
//! A sync binding method starts its call on the caller's thread ([`begin_here`]) and waits for it
//! there ([`Here::wait`]); a binding's event loop polls core futures on its own thread
//! ([`EventLoop::poll`], as a [`LoopTask`] woken back onto that thread) and watches the sockets
//! core hands it ([`Watcher`], [`Readable`]). An application that only `.await`s core's futures
//! needs none of this.

mod loop_task;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::runtime::Handle;

pub use crate::transport::lane::event_loop::{EventLoop, Readable, Watcher};
pub use loop_task::{LoopTask, Ran, Schedule};

/// A call [`begin_here`] started on its caller's thread that has to wait.
///
/// The caller goes on waiting for it on its own thread ([`Here::wait`]): the future is polled
/// there, parked between polls while the runtime's threads do the I/O, and its result needs no
/// hand-off from a runtime task (a task finishing, waking the caller's thread, costs a wake-up of
/// its own). Or the caller lets it finish in the background ([`Here::detach`]).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::host::{begin_here, Waited};
/// let Err(mut call) = begin_here(async {
///     tokio::time::sleep(Duration::from_millis(20)).await;
///     "slept"
/// }) else {
///     unreachable!("a sleep has to wait")
/// };
/// let Waited::Done(said) = call.wait(Duration::from_secs(5)) else { panic!("no answer") };
/// assert_eq!(said, "slept");
/// ```
pub struct Here<T> {
    inner: HereInner<T>,
}

impl<T> std::fmt::Debug for Here<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            HereInner::Local(_) => "Here(on this thread)",
            HereInner::Task(_) => "Here(a runtime task)",
        })
    }
}

enum HereInner<T> {
    /// Polled by whoever waits for it.
    Local(Pin<Box<dyn Future<Output = T> + Send>>),
    /// Begun from inside the runtime, where no thread may block on a future: a runtime task,
    /// whose result comes through a channel.
    Task(std::sync::mpsc::Receiver<T>),
}

/// What [`Here::wait`] saw.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::host::{begin_here, Waited};
/// let Err(mut call) = begin_here(std::future::pending::<()>()) else { unreachable!() };
/// assert!(matches!(call.wait(Duration::from_millis(10)), Waited::Pending));
/// ```
#[derive(Debug)]
pub enum Waited<T> {
    /// The call is done.
    Done(T),
    /// Not yet, within the limit.
    Pending,
    /// It can never be done: its runtime task was dropped (the runtime is shutting down).
    Lost,
}

impl<T: Send + 'static> Here<T> {
    /// Waits for the call at most `limit`, polling it on this thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use crosslock::host::{begin_here, Waited};
    /// let Err(mut call) = begin_here(async {
    ///     tokio::time::sleep(Duration::from_millis(200)).await;
    /// }) else {
    ///     unreachable!()
    /// };
    /// // Not within 10 ms; it goes on, and is done within the next 5 s.
    /// assert!(matches!(call.wait(Duration::from_millis(10)), Waited::Pending));
    /// assert!(matches!(call.wait(Duration::from_secs(5)), Waited::Done(())));
    /// ```
    ///
    /// # Panics
    ///
    /// From inside an asynchronous context, as [`block_on`](crate::runtime::block_on) does.
    pub fn wait(&mut self, limit: Duration) -> Waited<T> {
        match &mut self.inner {
            HereInner::Local(future) => {
                // The timer is made inside `block_on`, in the runtime's context.
                let waited = crate::runtime::with_handle(|handle| {
                    handle.block_on(async { tokio::time::timeout(limit, future.as_mut()).await })
                });
                match waited {
                    Ok(value) => Waited::Done(value),
                    Err(_) => Waited::Pending,
                }
            }
            HereInner::Task(result) => match result.recv_timeout(limit) {
                Ok(value) => Waited::Done(value),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Waited::Pending,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Waited::Lost,
            },
        }
    }

    /// Lets the call finish as a runtime task; its result is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let Err(call) = crosslock::host::begin_here(async move {
    ///     tokio::time::sleep(Duration::from_millis(20)).await;
    ///     tx.send("finished in the background").unwrap();
    /// }) else {
    ///     unreachable!()
    /// };
    /// call.detach();
    /// assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "finished in the background");
    /// ```
    pub fn detach(self) {
        if let HereInner::Local(future) = self.inner {
            drop(crate::runtime::spawn(future));
        }
    }
}

/// Starts `future` on the calling thread, for a caller that is going to block until it is done
/// anyway (a sync binding method): polls it once there and, if it has to wait, hands it back to
/// be waited for on this thread ([`Here::wait`]) or let go to finish on the runtime
/// ([`Here::detach`]).
///
/// During that first poll the future's Redis scripts go over *lanes*, blocking connections used
/// from this thread, so an uncontended acquire or release makes its round trip without waking any
/// runtime thread (a hand-off costs several context switches per call). Results, errors and
/// cancel safety are those of the same future spawned. The first poll blocks for at most one
/// round trip per script it runs (each bounded by the client's response timeout) and does not
/// return early for signals.
///
/// From inside the runtime (a runtime worker or a thread in `block_on`) it only spawns, and the
/// [`Here`] waits for that task: a runtime thread must never block on a future.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use crosslock::host::{begin_here, Waited};
/// let answer = match begin_here(async { 6 * 7 }) {
///     Ok(answer) => answer,
///     Err(mut call) => loop {
///         if let Waited::Done(answer) = call.wait(Duration::from_millis(50)) {
///             break answer;
///         }
///     },
/// };
/// assert_eq!(answer, 42);
/// ```
pub fn begin_here<F>(future: F) -> std::result::Result<F::Output, Here<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if Handle::try_current().is_ok() {
        let (sender, result) = std::sync::mpsc::sync_channel(1);
        drop(crate::runtime::spawn(async move {
            let _ = sender.send(future.await);
        }));
        return Err(Here {
            inner: HereInner::Task(result),
        });
    }
    let mut future: Pin<Box<dyn Future<Output = F::Output> + Send>> = Box::pin(future);
    let polled = crate::runtime::entered(|| {
        let mut cx = Context::from_waker(Waker::noop());
        crate::transport::lane::ambient::with_lanes(|| future.as_mut().poll(&mut cx))
    });
    match polled {
        Poll::Ready(value) => Ok(value),
        // The next poll registers the waiting thread's waker wherever the future waits.
        Poll::Pending => Err(Here {
            inner: HereInner::Local(future),
        }),
    }
}
