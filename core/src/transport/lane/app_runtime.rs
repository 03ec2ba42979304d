//! The event loop of an application's own tokio runtime (a Rust program's `#[tokio::main]`):
//! lanes whose sockets that runtime's reactor watches, a task per socket (see
//! [`super::event_loop`]'s module docs).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::transport::lane::ambient;
use crate::transport::lane::event_loop::{LoopInner, Readable, Watcher};
use crate::util::lock;

/// The loop whose lanes serve a call polled by an application's own tokio runtime (a task of a
/// Rust program's `#[tokio::main]`): one per thread of that runtime, its sockets watched by that
/// runtime's reactor, their replies read and their callers woken on that runtime. Without it
/// every round trip crosses runtimes twice (the request to the multiplexed connection's driver on
/// a crosslock worker, the reply back to the caller's worker): about twelve context switches a
/// pair instead of two. `None` outside any runtime, and on crosslock's own, whose calls use the
/// multiplexed connection.
pub(super) fn application_loop() -> Option<Arc<LoopInner>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    if crate::runtime::is_process_runtime(&runtime) {
        return None;
    }
    ambient::application_loop(runtime.id(), || {
        LoopInner::new(Box::new(RuntimeWatcher {
            runtime,
            watching: Arc::new(Mutex::new(Vec::new())),
            no_io: AtomicBool::new(false),
        }))
    })
}

/// Watches an application loop's sockets with its tokio runtime's reactor: a task per socket.
struct RuntimeWatcher {
    runtime: tokio::runtime::Handle,
    /// The sockets watched, each with its task's [`Stop`]; a task that ends takes its own out.
    watching: Arc<WatchList>,
    /// The runtime has no reactor (built without `enable_io`).
    no_io: AtomicBool,
}

/// The sockets a [`RuntimeWatcher`] watches, each with its task's [`Stop`].
type WatchList = Mutex<Vec<(RawFd, Arc<Stop>)>>;

/// How [`RuntimeWatcher::unwatch`] stops a socket's task and runs what closes the socket after it.
#[derive(Default)]
struct Stop {
    notify: tokio::sync::Notify,
    state: Mutex<StopState>,
}

#[derive(Default)]
struct StopState {
    /// What closes the socket, once the task has let go of it.
    done: Option<Box<dyn FnOnce() + Send>>,
    /// The task has let go of the socket (it ended, or its runtime dropped it).
    finished: bool,
}

impl Watcher for RuntimeWatcher {
    fn watch(&self, fd: RawFd, ready: Readable) -> bool {
        let Some(event_loop) = ready.lane.event_loop() else {
            return false;
        };
        if self.no_io.load(Ordering::Relaxed) {
            return false;
        }
        // The reactor watches a descriptor of its own (a duplicate of the lane's), so that its
        // registration can never outlive the descriptor it names, whatever closes first.
        // SAFETY: `fd` is the lane's socket, open for the length of this call.
        let Ok(own) = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
        else {
            return false;
        };
        let _entered = self.runtime.enter();
        // A runtime built without `enable_io` has no reactor: tokio panics instead of saying so,
        // and has no other way to tell. Asked once per loop, without the panic's message;
        // such a runtime's calls take the multiplexed connection.
        let registered = catch_quietly(move || {
            // Deprecated for descriptors the `AsyncFd` does not own; this one owns it.
            #[allow(deprecated)]
            AsyncFd::with_interest(own, Interest::READABLE)
        });
        let socket = match registered {
            Ok(Ok(socket)) => socket,
            Ok(Err(_)) => return false,
            Err(_) => {
                self.no_io.store(true, Ordering::Relaxed);
                return false;
            }
        };
        let stop = Arc::new(Stop::default());
        lock(&self.watching).push((fd, stop.clone()));
        let watching = Watching {
            socket: Some(socket),
            ready,
            stop,
            listed: self.watching.clone(),
            _event_loop: event_loop,
        };
        drop(self.runtime.spawn(watching.run()));
        true
    }

    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
        let stop = {
            let mut watching = lock(&self.watching);
            let at = watching.iter().position(|(watched, _)| *watched == fd);
            at.map(|at| watching.swap_remove(at).1)
        };
        let Some(stop) = stop else {
            return done();
        };
        let mut state = lock(&stop.state);
        if state.finished {
            drop(state);
            return done();
        }
        state.done = Some(done);
        drop(state);
        stop.notify.notify_one();
    }

    fn can_watch(&self) -> bool {
        !self.no_io.load(Ordering::Relaxed)
    }
}

/// Runs `f`, catching a panic without the panic hook's message: the one way to learn that a
/// runtime has no reactor is to try registering a socket with it, and the default hook would
/// print `thread '…' panicked at …: IO is disabled` on the application's stderr for a question
/// it asked nobody. The first call installs, once per process, a hook that stays silent while
/// its own thread is in here and otherwise hands every panic to the hook it replaced (the
/// application's, or the default). Panics elsewhere are reported as before; a hook the
/// application sets later replaces this one, and then such a probe is reported as any panic.
///
/// In a build with `panic = "abort"` nothing can be caught: a call made from a runtime without
/// an I/O driver ends the process with tokio's message (`Call enable_io on the runtime
/// builder`), at once and every time, which a runtime built with `enable_all()` (as
/// `#[tokio::main]` does) never meets.
fn catch_quietly<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> std::thread::Result<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !ambient::is_quiet() {
                previous(info);
            }
        }));
    });
    ambient::quietly(|| std::panic::catch_unwind(f))
}

/// The task that watches one lane's socket on an application's runtime. It keeps its loop alive
/// (a lane may serve tasks that moved to other threads of the runtime) until the lane is retired
/// or the runtime shuts down.
struct Watching {
    socket: Option<AsyncFd<std::os::fd::OwnedFd>>,
    ready: Readable,
    stop: Arc<Stop>,
    /// The watcher's list, which names this task's `stop` until it ends.
    listed: Arc<WatchList>,
    _event_loop: Arc<LoopInner>,
}

impl Watching {
    async fn run(self) {
        loop {
            let Some(socket) = self.socket.as_ref() else {
                return;
            };
            tokio::select! {
                biased;
                () = self.stop.notify.notified() => return,
                readable = socket.readable() => match readable {
                    // The reactor is edge-triggered where `Readable::ready` expects level-
                    // triggered readiness (it stops at a short read, without hearing `EAGAIN`).
                    // Clearing after it is still exact: the guard clears only the readiness it
                    // reported, and data arriving after that (read or not) is a new event.
                    Ok(mut guard) => {
                        // A retired lane has nothing left to read. Its task must end here: the
                        // readiness of a socket the server closed is never cleared, and
                        // `readable()` does not yield, so it would spin on this thread for good
                        // and hold up the runtime's shutdown.
                        if !self.ready.lane.ready() {
                            return;
                        }
                        guard.clear_ready();
                    }
                    Err(_) => return,
                }
            }
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        lock(&self.listed).retain(|(_, stop)| !Arc::ptr_eq(stop, &self.stop));
        drop(self.socket.take());
        let done = {
            let mut state = lock(&self.stop.state);
            state.finished = true;
            state.done.take()
        };
        match done {
            Some(done) => done(),
            // Not unwatched: the runtime is shutting down (or lost its reactor). The lane leaves
            // the loop; its unwatch finds the task finished and closes at once.
            None => self.ready.lane.retire(None),
        }
    }
}
