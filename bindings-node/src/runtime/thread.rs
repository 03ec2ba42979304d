//! The lanes watched by tasks on crosslock's runtime, where the JavaScript runtime's libuv is a
//! stand-in (Bun, Deno; see `uv.rs`): [`ThreadWatcher`].

use std::collections::HashMap;
use std::ffi::c_void;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::sys;

use super::queue::{Completion, Queue, Scope, drain};

/// How core watches its lane sockets where the runtime's libuv cannot (Bun, Deno; see
/// `uv.rs`): a task on crosslock's runtime per socket waits for it to be readable, then wakes
/// JavaScript once through the completion queue, where the lane's replies are read and what they
/// wake runs in one drain, as [`poll_ready`](super::uv::poll_ready) does under libuv. The task waits for that drain
/// before it looks at the socket again, so a batch of replies costs JavaScript one wake-up.
struct ThreadWatcher {
    scope: Scope,
    /// The sockets watched, each with its task's [`Stop`], until the task ends.
    watching: Watching,
}

type Watching = Arc<Mutex<HashMap<RawFd, Arc<Stop>>>>;

/// How [`ThreadWatcher::unwatch`] (or the environment's exit) stops a socket's task, and what
/// runs once the task has let go of the socket.
#[derive(Default)]
struct Stop {
    notify: tokio::sync::Notify,
    state: Mutex<StopState>,
}

#[derive(Default)]
struct StopState {
    /// What closes the socket, once the task has let go of it.
    done: Option<Box<dyn FnOnce() + Send>>,
    /// The task has let go of the socket.
    finished: bool,
}

impl Stop {
    /// The task let go of the socket: runs what closes it, if that is already asked for.
    fn finished(&self) {
        let done = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.finished = true;
            state.done.take()
        };
        if let Some(done) = done {
            done();
        }
    }

    /// Asks the task to stop and runs `done` once it has let go of the socket.
    fn stop(&self, done: Box<dyn FnOnce() + Send>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.finished {
            drop(state);
            return done();
        }
        state.done = Some(done);
        drop(state);
        self.notify.notify_one();
    }
}

/// Watches one lane socket (a duplicate of its descriptor, so the registration never outlives
/// what it names) until stopped, or until the environment is gone (its drain is dropped unrun).
async fn watch_on_runtime(
    socket: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    ready: Arc<crosslock::host::Readable>,
    scope: Scope,
    stop: Arc<Stop>,
) {
    loop {
        let guard = tokio::select! {
            biased;
            () = stop.notify.notified() => break,
            readable = socket.readable() => match readable {
                Ok(guard) => guard,
                Err(_) => break,
            },
        };
        let (drained, read) = tokio::sync::oneshot::channel::<()>();
        let (ready, scope_js) = (ready.clone(), scope.clone());
        scope.queue.send(Completion::Run(Box::new(move |_| {
            drain(&scope_js, || ready.ready());
            let _ = drained.send(());
        })));
        tokio::select! {
            biased;
            () = stop.notify.notified() => break,
            read = read => if read.is_err() { break },
        }
        // The reactor is edge-triggered; the guard clears only the readiness it reported, so
        // data that arrived while JavaScript read is seen again (as `uv_poll` would).
        let mut guard = guard;
        guard.clear_ready();
    }
    drop(socket);
    stop.finished();
}

impl crosslock::host::Watcher for ThreadWatcher {
    fn watch(&self, fd: RawFd, ready: crosslock::host::Readable) -> bool {
        // SAFETY: `fd` is the lane's socket, open for the length of this call.
        let Ok(own) = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()
        else {
            return false;
        };
        let handle = crosslock::runtime::handle();
        let registered = {
            let _entered = handle.enter();
            // Deprecated for descriptors the `AsyncFd` does not own; this one owns it.
            #[allow(deprecated)]
            tokio::io::unix::AsyncFd::with_interest(own, tokio::io::Interest::READABLE)
        };
        let Ok(socket) = registered else { return false };
        let stop = Arc::new(Stop::default());
        self.watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fd, stop.clone());
        drop(handle.spawn(watch_on_runtime(
            socket,
            Arc::new(ready),
            self.scope.clone(),
            stop,
        )));
        true
    }

    fn unwatch(&self, fd: RawFd, done: Box<dyn FnOnce() + Send>) {
        let stop = self
            .watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fd);
        match stop {
            Some(stop) => stop.stop(done),
            None => done(),
        }
    }
}

/// The environment's clean-up hook for the lanes' tasks: each is stopped (its socket, a
/// duplicate, closed with it), so a terminated worker leaves no connection open.
unsafe extern "C" fn stop_watching(arg: *mut c_void) {
    // SAFETY: the strong count `thread_event_loop` leaked for this hook, taken back once.
    let watching = unsafe { Arc::from_raw(arg.cast::<Mutex<HashMap<RawFd, Arc<Stop>>>>()) };
    let all: Vec<Arc<Stop>> = watching
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, stop)| stop)
        .collect();
    for stop in all {
        stop.stop(Box::new(|| {}));
    }
}

/// Core's view of an environment whose runtime has no real libuv: its lanes watched by tasks
/// on crosslock's runtime ([`ThreadWatcher`]).
pub(super) fn thread_event_loop(
    raw_env: sys::napi_env,
    queue: &Arc<Queue>,
) -> napi::Result<crosslock::host::EventLoop> {
    let watching: Watching = Arc::default();
    let hook_arg = Arc::into_raw(watching.clone()).cast_mut().cast::<c_void>();
    // SAFETY: `stop_watching` takes back the count leaked into `hook_arg`.
    let status = unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(stop_watching), hook_arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the hook was not added: take the count back now.
        drop(unsafe { Arc::from_raw(hook_arg.cast::<Mutex<HashMap<RawFd, Arc<Stop>>>>()) });
        return Err(napi::Error::new(
            napi::Status::from(status),
            "crosslock: cannot register its clean-up hook",
        ));
    }
    Ok(crosslock::host::EventLoop::new(ThreadWatcher {
        scope: Scope {
            env: raw_env,
            context: ptr::null_mut(),
            queue: queue.clone(),
        },
        watching,
    }))
}
