//! Running a script on a lane and settling its reply (the NOSCRIPT fallback is in
//! `script_call`).

use crate::transport::*;

impl Conn {
    /// Runs `script` over the lane of the event loop polling this call
    /// ([`crate::transport::lane::event_loop`]), bounded by the response timeout; `None` when
    /// there is no such lane.
    pub(in crate::transport) async fn eval_on_loop(
        &self,
        lanes: &crate::transport::lane::LanePool,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
    ) -> Option<crate::transport::lane::Trip> {
        // A script's first runs go the usual way: on the multiplexed connection a burst sends it
        // whole once and the others by SHA1 behind it, in order. Sent whole on a lane while
        // other calls of the burst went the usual way, it was sent whole on both.
        if !self.ran(script) {
            return None;
        }
        let timeout = self.inner.response_timeout;
        // On NOSCRIPT, sent whole on the same lane (in order behind the first), or, with no room
        // on it (many calls at once) or the lane gone (the client closing: `None`), the usual
        // way, which loads the script itself.
        with_noscript_fallback((), false, |(), whole| {
            let request = crate::transport::lane::event_loop::send(lanes, || {
                script_cmd(script, keys, args, whole)
            });
            async move {
                let Some(request) = request else {
                    return ((), None);
                };
                let trip = tokio::time::timeout(timeout, request)
                    .await
                    .unwrap_or(crate::transport::lane::Trip::NoAnswer);
                ((), Some(trip))
            }
        })
        .await
    }

    /// Runs `script` over a lane of `lanes`: the caller's own (a sync caller on its thread), or
    /// its event loop's where the client's `ClientOptions::lanes` lets event loops take one;
    /// `None` when neither is to be had.
    pub(in crate::transport) async fn trip_on_lane(
        &self,
        lanes: &crate::transport::lane::LanePool,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
    ) -> Option<crate::transport::lane::Trip> {
        if crate::transport::lane::ambient::on_lane()
            && !lanes.has_overdue()
            && let Some(trip) = lanes.eval(script, keys, args, self.knows(script))
        {
            return Some(trip);
        }
        if !self.inner.route.lanes.event_loops() {
            return None;
        }
        self.eval_on_loop(lanes, script, keys, args).await
    }

    /// The result of a script run over a lane, as [`Conn::settle`] gives it.
    pub(in crate::transport) fn settle_trip<T: redis::FromRedisValue>(
        &self,
        trip: crate::transport::lane::Trip,
        script: &Lua,
        subject: What<'_>,
    ) -> Result<T> {
        let reply = match trip {
            crate::transport::lane::Trip::Reply(reply) => {
                if reply.is_ok() {
                    self.inner.loaded.insert(script);
                    self.note_ran(script);
                }
                Some(reply.and_then(|v| T::from_redis_value(v).map_err(Into::into)))
            }
            crate::transport::lane::Trip::NoAnswer => None,
        };
        self.settle(reply, subject)
    }

    /// The result of one command bounded by the response timeout: its reply, or the error that
    /// says what happened, noting on the way whether the connection was lost or answered.
    pub(in crate::transport) fn settle<T>(
        &self,
        reply: Option<redis::RedisResult<T>>,
        subject: What<'_>,
    ) -> Result<T> {
        match reply {
            Some(Ok(value)) => {
                self.note_answered();
                Ok(value)
            }
            Some(Err(e)) => {
                self.check_lost(&e);
                let error = Error::from_redis(e, subject);
                // A cluster connection retries a request on its own: a refusal there may come
                // after the command went out once, so it is not known to be unsent.
                Err(if self.is_cluster() {
                    error.maybe_sent()
                } else {
                    error
                })
            }
            None => {
                self.no_answer();
                Err(Error::no_answer(subject, self.inner.response_timeout))
            }
        }
    }

    /// After the connection may have been lost, the next connection may reach a server that
    /// restarted (an empty script cache): each script's next run is sent whole again.
    pub(in crate::transport) fn forget_scripts(&self) {
        self.inner.loaded.clear();
        self.inner.ran.clear();
    }

    pub(in crate::transport) fn check_lost(&self, e: &redis::RedisError) {
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
        {
            self.forget_scripts();
            self.note_lost(e);
            if e.is_timeout() {
                self.check_routing();
            }
        } else {
            if matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING")) {
                // A replica, or a master cut off from its group: the master may have moved.
                self.inner.route.suspect();
            }
            self.note_answered();
        }
    }

    pub(in crate::transport) fn no_answer(&self) {
        self.forget_scripts();
        self.note_lost(&format_args!(
            "no answer within {:?}",
            self.inner.response_timeout
        ));
        self.check_routing();
    }
}
