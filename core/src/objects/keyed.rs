//! [`Keyed`]: the Redis side of an owner-less synchronizer, the key at its name and the channel
//! its changes are published on, with the two shapes its scripts are called in.

use std::sync::Arc;

use crate::error::Result;
use crate::scripts::Lua;
use crate::session::Ctx;
use crate::transport::ToArg;

use redis::FromRedisValue as Reply;

/// A script's arguments.
type Args<'a> = &'a [&'a dyn ToArg];

/// A semaphore's counter or a latch's count: the key at the (checked) name and its channel.
#[derive(Debug)]
pub(crate) struct Keyed {
    pub(crate) name: Arc<str>,
    /// Where the type's scripts publish (`redisson_sc:{name}`,
    /// `redisson_countdownlatch__channel__{name}`).
    pub(crate) channel: String,
    /// The type's word in errors (`"semaphore"`, `"latch"`).
    what: &'static str,
}

impl Keyed {
    pub(crate) fn new(name: Arc<str>, channel: String, what: &'static str) -> Self {
        Keyed {
            name,
            channel,
            what,
        }
    }

    /// Runs a script whose one key is the name.
    pub(crate) async fn eval<T: Reply>(&self, cx: &Ctx, script: &Lua, args: Args<'_>) -> Result<T> {
        cx.conn
            .eval(script, &[&self.name], args, (self.what, &*self.name))
            .await
    }

    /// Runs a script that may publish on the channel: keys `[name, channel]`, then `args` and
    /// the publish command.
    pub(crate) async fn eval_publishing<T: Reply>(
        &self,
        cx: &Ctx,
        script: &Lua,
        args: Args<'_>,
    ) -> Result<T> {
        let publish = cx.conn.publish_command();
        let mut args = args.to_vec();
        args.push(&publish);
        cx.conn
            .eval(
                script,
                &[&self.name, &self.channel],
                &args,
                (self.what, &*self.name),
            )
            .await
    }
}
