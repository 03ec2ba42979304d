//! A lane's connection ([`Socket`]: TCP or a Unix socket) and the blocking reads and writes the
//! blocking lanes make on it.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo};

/// A lane's connection: TCP or a Unix socket.
pub(crate) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    pub(super) fn connect(
        info: &ConnectionInfo,
        connect: Duration,
        response: Duration,
    ) -> io::Result<Self> {
        let socket = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let mut last = io::Error::other("the host name resolved to no address");
                let mut stream = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, connect) {
                        Ok(s) => {
                            stream = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                let stream = stream.ok_or(last)?;
                stream.set_nodelay(true)?;
                Socket::Tcp(stream)
            }
            ConnectionAddr::Unix(path) => Socket::Unix(UnixStream::connect(path)?),
            _ => return Err(io::Error::other("lanes are plain TCP or Unix sockets")),
        };
        socket.set_read_timeout(response)?;
        socket.set_write_timeout(response)?;
        Ok(socket)
    }

    pub(crate) fn fd(&self) -> i32 {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Unix(s) => s.as_raw_fd(),
        }
    }

    pub(crate) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(on),
            Socket::Unix(s) => s.set_nonblocking(on),
        }
    }

    pub(crate) fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_read_timeout(Some(timeout)),
            Socket::Unix(s) => s.set_read_timeout(Some(timeout)),
        }
    }

    pub(crate) fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_write_timeout(Some(timeout)),
            Socket::Unix(s) => s.set_write_timeout(Some(timeout)),
        }
    }

    /// A second descriptor for the same connection.
    pub(crate) fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    /// Ends the connection for every descriptor of it.
    pub(crate) fn shut_down(&self) {
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Socket::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    /// Whether the server has not closed this idle connection (checked without blocking).
    pub(crate) fn still_open(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: a one-byte buffer that lives across the call; `recv` with MSG_PEEK never
        // consumes data and MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recv(
                self.fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        // Nothing to read is the only healthy state: 0 is the server's close, data is unsolicited
        // (an idle lane is owed nothing), an error is a reset.
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Retries a read or write interrupted by a signal: the caller's signal handlers run when the
/// call returns (a lane round trip is bounded by the response timeout).
pub(super) struct Restarting<'a>(pub(super) &'a mut Socket);

impl Read for Restarting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.0.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }
}

/// Writes all of `buf` to a blocking `socket`.
pub(super) fn write_all(socket: &mut Socket, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match socket.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
