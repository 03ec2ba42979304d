//! [`LoopTask`]: a core future polled on a host event loop's own thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use super::EventLoop;

/// How a [`LoopTask`] gets back onto its loop's thread when it is woken: the one thing a host
/// supplies (push onto its completion queue, write to its self-pipe, …).
///
/// # Examples
///
/// ```
/// # #![allow(unused)]
/// # use std::sync::{Arc, mpsc};
/// # use crosslock::host::{LoopTask, Ran, Schedule};
/// # struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
/// # impl Schedule for Queue {
/// #     fn schedule(&self, task: Arc<LoopTask<Queue>>) { let _ = self.0.send(task); }
/// # }
/// # let (sender, woken) = mpsc::channel();
/// // This host's loop is a channel its thread reads woken tasks from.
/// let task = LoopTask::new(async {}, Queue(sender));
/// assert_eq!(task.run(None), Ran::Done);
/// ```
pub trait Schedule: Send + Sync + Sized + 'static {
    /// Queues `task` for the loop's thread, which calls [`LoopTask::run`] on it there. Called
    /// from any thread, at most once between two runs.
    fn schedule(&self, task: Arc<LoopTask<Self>>);
}

/// What one [`LoopTask::run`] did.
///
/// # Examples
///
/// ```
/// # #![allow(unused)]
/// # use std::sync::{Arc, mpsc};
/// # use crosslock::host::{LoopTask, Ran, Schedule};
/// # struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
/// # impl Schedule for Queue {
/// #     fn schedule(&self, task: Arc<LoopTask<Queue>>) { let _ = self.0.send(task); }
/// # }
/// # let (sender, woken) = mpsc::channel();
/// let task = LoopTask::new(async { panic!("a bug") }, Queue(sender));
/// assert_eq!(task.run(None), Ran::Panicked); // whatever it was to complete is told here
/// assert_eq!(task.run(None), Ran::Done); // nothing left to poll
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Ran {
    /// The future waits: its waker schedules the task again.
    Pending,
    /// The future finished (or had already finished, or was cancelled): it is dropped.
    Done,
    /// The poll panicked: the future is dropped, and whatever it was to complete never hears
    /// from it (tell it here).
    Panicked,
}

/// A core future polled on a host event loop's thread: started there, its round trips on the
/// loop's lanes ([`EventLoop::poll`]), and woken from any thread by scheduling the task back onto
/// the loop ([`Schedule`]). Cancelled by dropping the future ([`cancel`](Self::cancel)), which
/// core's cancel safety cleans up after.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, mpsc};
/// use crosslock::host::{LoopTask, Ran, Schedule};
///
/// /// A "loop" that is a channel drained by this thread.
/// struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
/// impl Schedule for Queue {
///     fn schedule(&self, task: Arc<LoopTask<Queue>>) {
///         let _ = self.0.send(task);
///     }
/// }
///
/// let (sender, woken) = mpsc::channel();
/// // Waits for a task of core's runtime, as core's calls wait for its I/O.
/// let slept = crosslock::runtime::spawn(async {
///     tokio::time::sleep(std::time::Duration::from_millis(10)).await
/// });
/// let task = LoopTask::new(async { slept.await.unwrap() }, Queue(sender));
/// assert_eq!(task.run(None), Ran::Pending);
/// let again = woken.recv().unwrap(); // the sleep ended: the task is back on this thread
/// assert_eq!(again.run(None), Ran::Done);
/// ```
pub struct LoopTask<S: Schedule> {
    future: Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    /// Set while the task is queued on its loop: a second wake-up before the run queues nothing.
    scheduled: AtomicBool,
    host: S,
}

impl<S: Schedule> LoopTask<S> {
    /// A task of `future`, scheduled on its loop by `host`. Not run yet: the host runs it first
    /// in the call that made it, on the loop's thread.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused)]
    /// # use std::sync::{Arc, mpsc};
    /// # use crosslock::host::{LoopTask, Ran, Schedule};
    /// # struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
    /// # impl Schedule for Queue {
    /// #     fn schedule(&self, task: Arc<LoopTask<Queue>>) { let _ = self.0.send(task); }
    /// # }
    /// # let (sender, woken) = mpsc::channel();
    /// let task = LoopTask::new(async { println!("polled") }, Queue(sender));
    /// assert_eq!(task.run(None), Ran::Done); // the host runs it first where it made it
    /// ```
    pub fn new(future: impl Future<Output = ()> + Send + 'static, host: S) -> Arc<Self> {
        Arc::new(LoopTask {
            future: Mutex::new(Some(Box::pin(future))),
            scheduled: AtomicBool::new(false),
            host,
        })
    }

    /// What the host keeps with the task (its queue, what the future completes).
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused)]
    /// # use std::sync::{Arc, mpsc};
    /// # use crosslock::host::{LoopTask, Ran, Schedule};
    /// # struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
    /// # impl Schedule for Queue {
    /// #     fn schedule(&self, task: Arc<LoopTask<Queue>>) { let _ = self.0.send(task); }
    /// # }
    /// # let (sender, woken) = mpsc::channel();
    /// let task = LoopTask::new(async {}, Queue(sender));
    /// let _queue: &Queue = task.host();
    /// ```
    pub fn host(&self) -> &S {
        &self.host
    }

    /// Polls the future once, through `event_loop` when the loop has lanes of its own (else
    /// plainly); drops it once it finished or panicked. Call it on the loop's thread.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused)]
    /// # use std::sync::{Arc, mpsc};
    /// # use crosslock::host::{LoopTask, Ran, Schedule};
    /// # struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
    /// # impl Schedule for Queue {
    /// #     fn schedule(&self, task: Arc<LoopTask<Queue>>) { let _ = self.0.send(task); }
    /// # }
    /// # let (sender, woken) = mpsc::channel();
    /// let task = LoopTask::new(std::future::pending::<()>(), Queue(sender));
    /// assert_eq!(task.run(None), Ran::Pending); // (an event loop's task passes its EventLoop)
    /// ```
    pub fn run(self: &Arc<Self>, event_loop: Option<&EventLoop>) -> Ran {
        self.scheduled.store(false, Ordering::Release);
        let mut slot = crate::util::lock(&self.future);
        let Some(future) = slot.as_mut() else {
            return Ran::Done;
        };
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match event_loop {
            Some(event_loop) => event_loop.poll(future.as_mut(), &mut cx),
            None => future.as_mut().poll(&mut cx),
        }));
        let ran = match polled {
            Ok(Poll::Pending) => return Ran::Pending,
            Ok(Poll::Ready(())) => Ran::Done,
            Err(_) => Ran::Panicked,
        };
        // Dropped outside the lock: what the future owns may wake this task as it goes.
        let finished = slot.take();
        drop(slot);
        drop(finished);
        ran
    }

    /// Drops the future now (whoever waited for it went away); a run after this is `Done`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused)]
    /// # use std::sync::{Arc, mpsc};
    /// # use crosslock::host::{LoopTask, Ran, Schedule};
    /// # struct Queue(mpsc::Sender<Arc<LoopTask<Queue>>>);
    /// # impl Schedule for Queue {
    /// #     fn schedule(&self, task: Arc<LoopTask<Queue>>) { let _ = self.0.send(task); }
    /// # }
    /// # let (sender, woken) = mpsc::channel();
    /// let task = LoopTask::new(std::future::pending::<()>(), Queue(sender));
    /// assert_eq!(task.run(None), Ran::Pending);
    /// task.cancel(); // the awaiting side went away: the future is dropped
    /// assert_eq!(task.run(None), Ran::Done);
    /// ```
    pub fn cancel(&self) {
        let future = crate::util::lock(&self.future).take();
        drop(future);
    }
}

impl<S: Schedule> Wake for LoopTask<S> {
    fn wake(self: Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.host.schedule(self.clone());
        }
    }
}

impl<S: Schedule> std::fmt::Debug for LoopTask<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopTask")
            .field("scheduled", &self.scheduled.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
