//! Everything that talks to Redis. Being gathered here from the crate root's `connection`,
//! `cluster`, `sentinel`, `pubsub`, `lane` and `loop_lane`.

pub(crate) mod endpoint;
