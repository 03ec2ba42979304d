//! Faults, at the core: wait limits are deadlines whatever Redis does; a renewal survives a closed
//! connection; the lost signal fires during a partition, before anyone else can take the lock;
//! bad durations never reach Redis; error kinds say what happened. (The end-to-end fault suite,
//! with Python and Node holder processes, is `tests-faults/`.)

use crate::support;

use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, MultiLock, Owner};
use support::{Proxy, RedisServer};

/// What a deadline may overshoot by here: the give-up grace (100 ms) and scheduling.
const SLACK: Duration = Duration::from_millis(400);

fn fast() -> ClientOptions {
    ClientOptions::new()
        .response_timeout(Duration::from_millis(800))
        .connect_timeout(Duration::from_millis(1500))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_limit_is_a_deadline_while_redis_is_paused_asleep_or_stopped() {
    let server = RedisServer::start_with(support::debug_command_args());
    let client = Client::connect_with(&server.url(), fast()).await.unwrap();
    let lock = client.lock("deadline").unwrap();
    let wait = Duration::from_millis(500);
    for (what, start, stop) in [
        // Under CLIENT PAUSE ALL every client's commands wait, CLIENT UNPAUSE's too: each fault
        // but SIGSTOP is waited out (by a PING, answered once it is over).
        ("CLIENT PAUSE", "pause", ""),
        ("DEBUG SLEEP", "sleep", ""),
        ("SIGSTOP", "stop", "cont"),
    ] {
        match start {
            "pause" => {
                server.command(&["CLIENT", "PAUSE", "1500", "ALL"]);
            }
            "sleep" => {
                let url = server.url();
                std::thread::spawn(move || {
                    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                    let _: redis::RedisResult<()> =
                        redis::cmd("DEBUG").arg("SLEEP").arg("1.5").query(&mut c);
                });
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => server.signal(libc::SIGSTOP),
        }
        let started = Instant::now();
        let got = lock
            .acquire_as(Owner::new(1), &AcquireOptions::new().wait(wait))
            .await;
        let took = started.elapsed();
        // No attempt got an answer: an outage, not a busy lock.
        assert!(
            matches!(&got, Err(e) if e.kind() == ErrorKind::Unavailable),
            "{what}: {got:?}"
        );
        assert!(
            took <= wait + SLACK,
            "{what}: a {wait:?} wait took {took:?}"
        );
        if stop == "cont" {
            // Release and queries are bounded by the response timeout.
            let started = Instant::now();
            let err = lock.is_locked().await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
            assert!(
                started.elapsed() <= Duration::from_millis(800) + SLACK,
                "a query took {:?}",
                started.elapsed()
            );
            server.signal(libc::SIGCONT);
        } else {
            // Returns once Redis runs commands again (the pause or the sleep is over).
            server.command(&["PING"]);
        }
        // Whatever the attempt did once Redis answered, nothing is left.
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock.is_locked().await.unwrap_or(true) {
            assert!(
                Instant::now() < deadline,
                "{what}: the abandoned attempt's lock was not given back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(client.subscribed_channels(), 0, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_attempt_is_given_back_when_asking_redis_about_it_goes_unanswered_too() {
    // A pause longer than two response timeouts: the attempt's answer is lost (800 ms), and so
    // is the answer to the question the clean-up then asks about it (sent at 800, lost at
    // 1600); the attempt runs and wins when the pause ends (2000). The clean-up asks again.
    let server = RedisServer::start();
    let client = Client::connect_with(&server.url(), fast()).await.unwrap();
    let lock = client.lock("asked-twice").unwrap();
    server.command(&["CLIENT", "PAUSE", "2000", "ALL"]);
    let got = lock
        .acquire_as(
            Owner::new(1),
            &AcquireOptions::new().wait(Duration::from_millis(300)),
        )
        .await;
    assert!(
        matches!(&got, Err(e) if e.kind() == ErrorKind::Unavailable),
        "{got:?}"
    );
    // Under CLIENT PAUSE ALL every client's commands wait, CLIENT UNPAUSE's too: a PING is
    // answered once the pause is over.
    server.command(&["PING"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock.is_locked().await.unwrap_or(true) {
        assert!(
            Instant::now() < deadline,
            "the abandoned attempt's lock was not given back: {:?}",
            server.command(&["HGETALL", "asked-twice"])
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_against_a_stopped_server_fails_within_the_response_timeout() {
    let server = RedisServer::start();
    let client = Client::connect_with(&server.url(), fast()).await.unwrap();
    let lock = client.lock("stuck").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    server.signal(libc::SIGSTOP);
    let started = Instant::now();
    let err = lock.release_as(Owner::new(1)).await.unwrap_err();
    server.signal(libc::SIGCONT);
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        started.elapsed() <= Duration::from_millis(800) + SLACK,
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        client.watched_locks(),
        0,
        "a failed release must stop the renewal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_keeps_its_lock_when_idle_connections_are_closed_or_killed() {
    // `timeout 1`: the server closes connections idle for a second; the watchdog renews every
    // 400 ms, so a renewal meeting a dead connection must be retried at once.
    let server = RedisServer::start_with(&["--timeout", "1"]);
    let options = ClientOptions::new().watchdog_timeout(Duration::from_millis(1200));
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("kept").unwrap();
    let guard = lock.acquire().await.unwrap();
    let killer = {
        let url = server.url();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(350));
                let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .arg("SKIPME")
                    .arg("yes")
                    .query(&mut c);
            }
        })
    };
    let end = Instant::now() + Duration::from_secs(4);
    while Instant::now() < end {
        assert!(!guard.is_lost(), "a live holder was told its lock is lost");
        let theirs = other.lock("kept").unwrap();
        match theirs
            .acquire_as(Owner::new(9), &AcquireOptions::new().wait(Duration::ZERO))
            .await
        {
            Ok(got) => assert!(!got, "another client took a held lock"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"), // its own connection was killed
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    killer.join().unwrap();
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lost_signal_fires_during_a_partition_before_another_client_can_acquire() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port).await;
    let lease = Duration::from_millis(1200);
    let options = fast().watchdog_timeout(lease);
    let holder = Client::connect_with(&proxy.url(), options).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let guard = holder.lock("cut").unwrap().acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await; // at least one renewal went through
    let cut = Instant::now();
    proxy.partition();
    let waiter = {
        let lock = other.lock("cut").unwrap();
        tokio::spawn(async move {
            assert!(
                lock.acquire_as(
                    Owner::new(5),
                    &AcquireOptions::new().wait(Duration::from_secs(10))
                )
                .await
                .unwrap()
            );
            Instant::now()
        })
    };
    tokio::time::timeout(Duration::from_secs(5), guard.lost().cancelled())
        .await
        .expect("no lost signal during the partition");
    let told = Instant::now();
    let other_acquired = waiter.await.unwrap();
    assert!(
        told <= other_acquired,
        "told {:?} after the other client acquired",
        told - other_acquired
    );
    assert!(
        told - cut >= Duration::from_millis(300),
        "told too early: {:?} after the cut",
        told - cut
    );
    proxy.heal();
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_redis_cannot_take_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    for (kind, lock) in [
        ("lock", client.lock("huge").unwrap().erased()),
        ("fair_lock", client.fair_lock("huge").unwrap().erased()),
        (
            "write_lock",
            client.read_write_lock("huge").unwrap().write().erased(),
        ),
    ] {
        for options in [
            AcquireOptions::new().lease(Duration::from_secs(10_000_000_000_000_000)),
            AcquireOptions::new().lease(Duration::from_millis(u64::MAX)),
            AcquireOptions::new().wait(Duration::MAX),
            AcquireOptions::new().lease(Duration::from_micros(999)),
        ] {
            let err = lock.acquire_as(Owner::new(1), &options).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{kind}: {err}");
            assert!(err.to_string().contains("'huge'"), "{err}");
        }
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.raw())
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_say_what_they_are() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret", "--maxclients", "64"]);
    for _ in 0..10 {
        let url = format!("redis://:wrong@127.0.0.1:{}/0", server.port);
        let err = Client::connect(&url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
        assert!(
            !err.to_string().contains("wrong"),
            "the password leaked into: {err}"
        );
    }
    let err = Client::connect(&format!("redis://:s3cret@127.0.0.1:{}/99", server.port))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("99"), "{err}");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("1")
        .query(
            &mut redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/0", server.port))
                .unwrap()
                .get_connection()
                .unwrap(),
        )
        .unwrap();
    let mut keep = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/0", server.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("PING").query(&mut keep).unwrap();
    let err = Client::connect_with(
        &format!("redis://:s3cret@127.0.0.1:{}/0", server.port),
        ClientOptions::new().connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("maxclients"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_refused_on_its_second_connection_leaves_no_connection_open() {
    // The server has room for exactly one more client: a client opens two connections (commands
    // and pub/sub), so one gets in and the other is refused. The connect fails, and the one that
    // got in must be closed, not kept alive by its tasks.
    let server = RedisServer::start();
    let mut admin = server.raw();
    let clients = |admin: &mut redis::Connection| -> usize {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
        list.lines().filter(|line| !line.is_empty()).count()
    };
    // Several times: which of the two gets the free slot is a race.
    for attempt in 0..3 {
        let before = clients(&mut admin);
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(before + 1)
            .query(&mut admin)
            .unwrap();
        let err = Client::connect_with(
            &server.url(),
            ClientOptions::new().connect_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(err.to_string().contains("maxclients"), "{err}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while clients(&mut admin) != before {
            assert!(
                Instant::now() < deadline,
                "attempt {attempt}: the failed connect left a connection open: {:?}",
                redis::cmd("CLIENT")
                    .arg("LIST")
                    .query::<String>(&mut admin)
                    .unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(10_000)
            .query(&mut admin)
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_entrant_release_refused_for_lack_of_memory_keeps_the_hold() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("oom").unwrap();
    let me = Owner::new(1);
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    server.command(&["CONFIG", "SET", "maxmemory", "1"]);
    let err = lock.release_as(me).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert!(err.to_string().contains("out of memory"), "{err}");
    let err = client
        .lock("other")
        .unwrap()
        .acquire_as(me, &AcquireOptions::new().wait(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("out of memory"), "{err}");
    server.command(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(
        lock.hold_count_of(me).await.unwrap(),
        2,
        "Redis lost a hold"
    );
    assert_eq!(client.watched_locks(), 1, "the hold must still be renewed");
    assert!(!lock.release_as(me).await.unwrap());
    assert!(lock.release_as(me).await.unwrap());
}

/// Generous: a restart of about a second stays well inside it.
fn tolerant() -> ClientOptions {
    ClientOptions::new()
        .response_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(6))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_wait_rides_out_a_one_second_restart() {
    let mut server = RedisServer::start();
    let port = server.port;
    let holder = Client::connect_with(&server.url(), tolerant())
        .await
        .unwrap();
    let waiter = Client::connect_with(&server.url(), tolerant())
        .await
        .unwrap();
    for name in ["r:lock", "r:m1", "r:m2"] {
        assert!(
            holder
                .lock(name)
                .unwrap()
                .acquire_as(Owner::new(1), &AcquireOptions::new())
                .await
                .unwrap()
        );
    }
    assert!(
        holder
            .fair_lock("r:fair")
            .unwrap()
            .acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    waiter
        .semaphore("r:sem")
        .unwrap()
        .try_set_permits(0)
        .await
        .unwrap();
    waiter
        .permit_expirable_semaphore("r:pes")
        .unwrap()
        .try_set_permits(0)
        .await
        .unwrap();
    waiter
        .count_down_latch("r:latch")
        .unwrap()
        .try_set_count(1)
        .await
        .unwrap();

    let (w1, w2, w3, w4, w5, w6) = (
        waiter.clone(),
        waiter.clone(),
        waiter.clone(),
        waiter.clone(),
        waiter.clone(),
        waiter.clone(),
    );
    let waits: Vec<(&str, tokio::task::JoinHandle<crosslock::Result<()>>)> = vec![
        (
            "lock",
            tokio::spawn(async move {
                w1.lock("r:lock")?
                    .acquire_as(Owner::new(7), &AcquireOptions::new())
                    .await
                    .map(|_| ())
            }),
        ),
        (
            "fair lock",
            tokio::spawn(async move {
                w2.fair_lock("r:fair")?
                    .acquire_as(Owner::new(7), &AcquireOptions::new())
                    .await
                    .map(|_| ())
            }),
        ),
        (
            "semaphore",
            tokio::spawn(async move { w3.semaphore("r:sem")?.acquire(1).await }),
        ),
        (
            "permit-expirable semaphore",
            tokio::spawn(async move {
                w4.permit_expirable_semaphore("r:pes")?
                    .acquire()
                    .await
                    .map(|p| drop(p.detach()))
            }),
        ),
        (
            "latch",
            tokio::spawn(async move { w5.count_down_latch("r:latch")?.wait().await }),
        ),
        (
            "multi-lock",
            tokio::spawn(async move {
                let parts = vec![w6.lock("r:m1")?.erased(), w6.lock("r:m2")?.erased()];
                MultiLock::new(parts)?
                    .acquire_as(Owner::new(7), &AcquireOptions::new())
                    .await
                    .map(|_| ())
            }),
        ),
    ];
    tokio::time::sleep(Duration::from_millis(300)).await;
    // kill -9, a second down, back on the same port without its data: the locks are gone, the
    // latch is open, the semaphores have no permits until some are added.
    server.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _server = RedisServer::start_on(port);
    let helper = Client::connect_with(&_server.url(), tolerant())
        .await
        .unwrap();
    helper.semaphore("r:sem").unwrap().release(1).await.unwrap();
    helper
        .permit_expirable_semaphore("r:pes")
        .unwrap()
        .add_permits(1)
        .await
        .unwrap();
    for (what, wait) in waits {
        let got = tokio::time::timeout(Duration::from_secs(20), wait)
            .await
            .unwrap_or_else(|_| panic!("{what}: still waiting 20 s after the restart"))
            .unwrap();
        assert!(got.is_ok(), "{what}: {got:?}");
    }
}

/// A multi-lock of many parts tries them all at once first (one single try each); parts whose
/// Redis is down then are waited for like a busy part, not counted as failed, so a wait that
/// begins during a short outage rides it out, as one of few parts does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_of_many_parts_begun_in_an_outage_rides_it_out() {
    let mut server = RedisServer::start();
    let port = server.port;
    let client = Client::connect_with(&server.url(), tolerant())
        .await
        .unwrap();
    for (what, parts) in [("2 parts", 2), ("8 parts, tried all at once", 8)] {
        let locks = (0..parts)
            .map(|i| Ok(client.lock(&format!("o:many:{parts}:{i}"))?.erased()))
            .collect::<crosslock::Result<Vec<_>>>()
            .unwrap();
        server.kill();
        let wait = tokio::spawn(async move {
            MultiLock::new(locks)?
                .acquire_as(
                    Owner::new(3),
                    &AcquireOptions::new().wait(Duration::from_secs(15)),
                )
                .await
        });
        // Longer than a single try may take (the response timeout).
        tokio::time::sleep(Duration::from_millis(1800)).await;
        assert!(!wait.is_finished(), "{what}: gave up during the outage");
        server = RedisServer::start_on(port);
        let got = tokio::time::timeout(Duration::from_secs(20), wait)
            .await
            .unwrap_or_else(|_| panic!("{what}: still waiting 20 s after the restart"))
            .unwrap();
        assert!(matches!(got, Ok(Some(_))), "{what}: {got:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_unavailable_a_busy_lock_a_timeout() {
    let mut server = RedisServer::start();
    let options = ClientOptions::new()
        .response_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(2));
    let holder = Client::connect_with(&server.url(), options.clone())
        .await
        .unwrap();
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let lock = client.lock("o:lock").unwrap();
    assert!(
        holder
            .lock("o:lock")
            .unwrap()
            .acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    // Busy: Redis answered. A timeout, naming the holder.
    let busy = lock
        .acquire_with(AcquireOptions::new().wait(Duration::from_millis(200)))
        .await
        .unwrap_err();
    assert_eq!(busy.kind(), ErrorKind::Timeout, "{busy}");
    assert!(busy.message().contains("held by"), "{busy}");
    assert!(matches!(lock.try_acquire().await, Ok(None)));

    server.kill();
    for round in 0..2 {
        for wait in [Duration::from_millis(500), Duration::from_secs(5)] {
            let got = lock
                .acquire_with(AcquireOptions::new().wait(wait))
                .await
                .unwrap_err();
            assert_eq!(
                got.kind(),
                ErrorKind::Unavailable,
                "round {round}, {wait:?}: {got}"
            );
        }
        let started = Instant::now();
        let single = lock.try_acquire().await;
        let took = started.elapsed();
        assert!(
            matches!(&single, Err(e) if e.kind() == ErrorKind::Unavailable),
            "round {round}: {single:?}"
        );
        assert!(
            took <= Duration::from_secs(1) + SLACK,
            "round {round}: a single try took {took:?}"
        );
        let sem = client.semaphore("o:sem").unwrap();
        let got = sem.try_acquire(1, Duration::from_millis(300)).await;
        assert!(
            matches!(&got, Err(e) if e.kind() == ErrorKind::Unavailable),
            "round {round}: {got:?}"
        );
        let latch = client.count_down_latch("o:latch").unwrap();
        let got = latch
            .open_within(AcquireOptions::new().wait(Duration::from_millis(300)))
            .await;
        assert!(
            matches!(&got, Err(e) if e.kind() == ErrorKind::Unavailable),
            "round {round}: {got:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_of_a_hold_known_lost_raises_the_loss_at_once() {
    let mut server = RedisServer::start();
    let client = Client::connect_with(&server.url(), fast()).await.unwrap();
    let lock = client.lock("lost:lock").unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(Duration::from_millis(300)))
        .await
        .unwrap();
    server.kill();
    tokio::time::timeout(Duration::from_secs(5), guard.lost().cancelled())
        .await
        .expect("the lost signal fires without Redis");
    assert!(guard.is_lost());
    let started = Instant::now();
    let err = guard.release().await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(
        took < Duration::from_millis(300),
        "a release of a hold known lost waited {took:?} for Redis"
    );
}
