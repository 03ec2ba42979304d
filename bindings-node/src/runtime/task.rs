//! [`JsTask`]: a core future polled on its environment's JavaScript thread, woken from any thread
//! through the completion queue.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use napi::{Env, sys};

use super::queue::{Completion, POLLING_IN, Queue};

/// A core future polled on its environment's JavaScript thread: started in the call that made
/// its promise, its round trips on the thread's own lane (watched by libuv, [`UvWatcher`](super::uv::UvWatcher)), and
/// polled again there whenever it is woken, from any thread, through the completion queue.
pub(super) struct JsTask {
    pub(super) future: Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    pub(super) queue: Arc<Queue>,
    pub(super) event_loop: Arc<crosslock::host::EventLoop>,
    pub(super) scheduled: AtomicBool,
}

impl Wake for JsTask {
    fn wake(self: Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            let task = self.clone();
            self.queue.send(Completion::Poll(task));
        }
    }
}

impl JsTask {
    /// Polls the future once (on the JavaScript thread of `env`); drops it once finished. A
    /// panic drops it too, and its [`Settle`](super::Settle) rejects the promise.
    pub(super) fn run(self: &Arc<Self>, env: &Env) {
        struct Reset((sys::napi_env, *const Queue));
        impl Drop for Reset {
            fn drop(&mut self) {
                POLLING_IN.with(|p| p.set(self.0));
            }
        }
        let _reset = Reset(POLLING_IN.with(|p| p.replace((env.raw(), Arc::as_ptr(&self.queue)))));
        self.scheduled.store(false, Ordering::Release);
        let mut slot = self.future.lock().unwrap_or_else(|e| e.into_inner());
        let Some(future) = slot.as_mut() else { return };
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.event_loop.poll(future.as_mut(), &mut cx)
        }));
        if !matches!(polled, Ok(Poll::Pending)) {
            *slot = None;
        }
    }
}
