//! Closing a client while its calls open lanes on an application's own tokio runtime. Each test
//! runs in a process of its own (`alone!`): the tests of `app_runtime.rs` count the context
//! switches of crosslock's threads, which the many clients here would add to.

use crate::support;

use std::time::Duration;

use crosslock::{Client, ClientOptions};
use support::RedisServer;

async fn connect(server: &RedisServer) -> Client {
    Client::connect_with(&server.url(), ClientOptions::new())
        .await
        .unwrap()
}

/// A client closed while its calls open lanes on an application's runtime, and the server then
/// closing every connection, leave no task behind: each lane's task ends, and the runtime shuts
/// down at once. A lane retired between being published and being watched used to stay watched
/// by a task that, once the server closed the socket, spun on a worker for good (the readiness of
/// a closed socket is never cleared) and held up the runtime's shutdown.
#[test]
fn a_client_closed_while_its_calls_open_lanes_leaves_no_task_behind() {
    alone!();
    let server = RedisServer::start();
    for round in 0..60u64 {
        let runtime = support::app_runtime();
        runtime.block_on(async {
            let mut clients = Vec::new();
            let mut tasks = Vec::new();
            for c in 0..4 {
                let client = connect(&server).await;
                for task in 0..4 {
                    let lock = client.lock(&format!("app:race:{c}:{task}")).unwrap();
                    tasks.push(tokio::spawn(async move {
                        for _ in 0..200 {
                            if lock.is_locked().await.is_err() {
                                break; // closed
                            }
                        }
                    }));
                }
                clients.push(client);
            }
            tokio::time::sleep(Duration::from_micros(300 * (round % 10))).await;
            futures_util::future::join_all(clients.iter().map(Client::close)).await;
            for task in tasks {
                task.await.unwrap();
            }
        });
        server.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        std::thread::sleep(Duration::from_millis(20));
        let (dropped, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(runtime);
            let _ = dropped.send(());
        });
        done.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("round {round}: the runtime did not shut down"));
    }
}

/// A lane connection opened in the background for a loop (calls came in quick succession) waits
/// in that loop until its next call there. A client closed before that call must close it too:
/// it stayed open, counted by the server, for as long as the loop lived (an application
/// runtime's thread: the process's life), one more for every client closed so.
#[test]
fn a_lane_opened_for_a_loop_but_never_used_closes_with_the_client() {
    alone!();
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for round in 0..3 {
        runtime.block_on(async {
            let without_client = server.normal_connections();
            let client = connect(&server).await;
            let lock = client.lock("app:parked").unwrap();
            // The first pair connects the client and runs the scripts the usual way (a script's
            // first runs always do); the second pair's calls ask this loop for a lane in quick
            // succession, and one opens in the background while they take the multiplexed
            // connection.
            lock.acquire().await.unwrap().release().await.unwrap();
            let connected = server.normal_connections();
            lock.acquire().await.unwrap().release().await.unwrap();
            support::until(
                &format!("round {round}: a lane opened for the loop"),
                async || server.normal_connections() > connected,
            )
            .await;
            // No call on this loop since: the lane is opened, not taken into use.
            client.close().await;
            support::until(
                &format!(
                    "round {round}: the connections back to the {without_client} there were \
                     before the client connected"
                ),
                async || server.normal_connections() == without_client,
            )
            .await;
        });
    }
    drop(runtime);
}
