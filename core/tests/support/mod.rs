//! A disposable redis-server for tests: a free loopback port, started on creation, killed on drop.

#![allow(dead_code)]
// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl RedisServer {
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port)
    }

    /// A server with extra `redis-server` arguments (`["--timeout", "1"]`, …).
    pub fn start_with(args: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_inner(port, args)
    }

    pub fn start_on(port: u16) -> Self {
        Self::start_inner(port, &[])
    }

    fn start_inner(port: u16, extra: &[&str]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("crosslock-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (the test command installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        RedisServer { port, child, dir }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// A plain redis-rs connection, to look at what the locks left in Redis.
    pub fn raw(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Sends `signal` (`libc::SIGSTOP`, `libc::SIGCONT`) to the server process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }

    /// Runs one command on a fresh plain connection.
    pub fn command(&self, args: &[&str]) -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        cmd.query(&mut self.raw()).unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback TCP proxy in front of a server, which can hold every byte in both directions (a
/// partition: connections stay open, nothing gets through) and let them through again.
pub struct Proxy {
    pub port: u16,
    held: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl Proxy {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::sync::Arc::new(tokio::sync::watch::channel(false).0);
        let h = held.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let Ok(up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                tokio::spawn(pump(dr, uw, h.subscribe()));
                tokio::spawn(pump(ur, dw, h.subscribe()));
            }
        });
        Proxy { port, held }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Holds every byte from now on (a network partition).
    pub fn partition(&self) {
        self.held.send_replace(true);
    }

    /// Lets the held bytes and everything after through again.
    pub fn heal(&self) {
        self.held.send_replace(false);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut held: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while *held.borrow_and_update() {
            if held.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
