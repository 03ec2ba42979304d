//! A loopback TCP proxy in front of a server: partitions and dropped connections.

// Test helpers fail loudly: an unwrap here is a failed test, not a library panic.
#![allow(clippy::unwrap_used)]

/// A loopback TCP proxy in front of a server, which can hold every byte in both directions (a
/// partition: connections stay open, nothing gets through) and let them through again, and can
/// drop a connection as it sends a given command.
pub struct Proxy {
    pub port: u16,
    held: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    cuts: Cuts,
}

/// What to drop a connection on: bytes the client sends, how many more times, and whether the
/// server gets them first.
type Cuts = std::sync::Arc<std::sync::Mutex<Cut>>;

#[derive(Default)]
struct Cut {
    bytes: Vec<u8>,
    left: usize,
    after_sending: bool,
}

impl Proxy {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::sync::Arc::new(tokio::sync::watch::channel(false).0);
        let cuts: Cuts = Default::default();
        let (h, c) = (held.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let Ok(up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                tokio::spawn(pump(dr, uw, h.subscribe(), c.clone(), cut.clone()));
                tokio::spawn(pump(ur, dw, h.subscribe(), Default::default(), cut));
            }
        });
        Proxy { port, held, cuts }
    }

    /// The next `times` connections that send `bytes` (say `b"SUBSCRIBE"`) are dropped instead
    /// of passing them on: the client's command gets no answer, as when the server closes the
    /// connection just then.
    pub fn cut_on(&self, bytes: &[u8], times: usize) {
        self.cut(bytes, times, false);
    }

    /// As [`cut_on`](Self::cut_on), but the server gets the command and runs it; its reply is
    /// what is lost.
    pub fn cut_after(&self, bytes: &[u8], times: usize) {
        self.cut(bytes, times, true);
    }

    fn cut(&self, bytes: &[u8], times: usize, after_sending: bool) {
        *self.cuts.lock().unwrap() = Cut {
            bytes: bytes.to_vec(),
            left: times,
            after_sending,
        };
    }

    /// How many of the cuts asked for are still to come.
    pub fn cuts_left(&self) -> usize {
        self.cuts.lock().unwrap().left
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

/// Copies `from` to `to`; returning drops both halves (the server then closes its side, and
/// the other direction's pump ends too, closing the client's). `cuts`: what to cut on (nothing
/// for the server's direction); `cut`: the connection's flag that it was cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut held: tokio::sync::watch::Receiver<bool>,
    cuts: Cuts,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::Acquire) {
            return;
        }
        let mut cut_after = false;
        {
            let mut c = cuts.lock().unwrap();
            if c.left > 0
                && !c.bytes.is_empty()
                && buf[..n]
                    .windows(c.bytes.len())
                    .any(|w| w == c.bytes.as_slice())
            {
                c.left -= 1;
                cut.store(true, Ordering::Release);
                if !c.after_sending {
                    return;
                }
                cut_after = true;
            }
        }
        while *held.borrow_and_update() {
            if held.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() || cut_after {
            return;
        }
    }
}
