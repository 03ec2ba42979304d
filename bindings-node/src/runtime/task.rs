//! [`JsHost`]: how a core future polled on its environment's JavaScript thread (a
//! [`LoopTask`]) gets back there when woken, from any thread: through the completion queue.

use std::sync::Arc;

use crosslock::host::{LoopTask, Schedule};
use napi::{Env, sys};

use super::queue::{Completion, POLLING_IN, Queue};

/// A core future polled on its environment's JavaScript thread: started in the call that made
/// its promise, its round trips on the thread's own lane (watched by libuv,
/// [`UvWatcher`](super::uv::UvWatcher)), and polled again there whenever it is woken.
pub(super) type JsTask = LoopTask<JsHost>;

/// A [`JsTask`]'s environment: its completion queue and its lanes.
pub(super) struct JsHost {
    pub(super) queue: Arc<Queue>,
    pub(super) event_loop: Arc<crosslock::host::EventLoop>,
}

impl Schedule for JsHost {
    fn schedule(&self, task: Arc<JsTask>) {
        self.queue.send(Completion::Poll(task));
    }
}

/// Polls `task` once (on the JavaScript thread of `env`); a panic drops its future, and its
/// [`Settle`](super::Settle) rejects the promise.
pub(super) fn run(task: &Arc<JsTask>, env: &Env) {
    struct Reset((sys::napi_env, *const Queue));
    impl Drop for Reset {
        fn drop(&mut self) {
            POLLING_IN.with(|p| p.set(self.0));
        }
    }
    let host = task.host();
    let _reset = Reset(POLLING_IN.with(|p| p.replace((env.raw(), Arc::as_ptr(&host.queue)))));
    let _ = task.run(Some(&host.event_loop));
}
