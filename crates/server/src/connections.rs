//! Bounds on connections, before any request is read or authenticated: at most
//! [`MAX_CONNECTIONS`] open at once (a connection past the cap is closed as soon as it
//! is accepted), so slow or idle clients cannot use up the process's file descriptors
//! (1,024 by default) and lock every other client out, or leave none for the store.
//! `ui` also closes a connection whose request head has not arrived within
//! [`HEADER_TIMEOUT`].

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections open at once, per server.
pub const MAX_CONNECTIONS: usize = 512;

/// How long a client may take to send a request's head (`ui`).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection holding one of the server's connection slots until it is dropped.
pub struct Limited {
    stream: TcpStream,
    slot: OwnedSemaphorePermit,
}

impl Limited {
    pub fn into_parts(self) -> (TcpStream, OwnedSemaphorePermit) {
        (self.stream, self.slot)
    }
}

/// Accepts connections from `listener`, each with a slot; one that finds none free is
/// closed at once. An accept error (the descriptor limit, a reset) waits a moment and
/// goes on: it never ends the server.
pub struct Acceptor {
    listener: TcpListener,
    slots: Arc<Semaphore>,
}

impl Acceptor {
    pub fn new(listener: TcpListener, max: usize) -> Acceptor {
        Acceptor { listener, slots: Arc::new(Semaphore::new(max.max(1))) }
    }

    pub async fn accept(&self) -> Limited {
        loop {
            match self.listener.accept().await {
                Ok((stream, _)) => match self.slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let _ = stream.set_nodelay(true);
                        return Limited { stream, slot };
                    }
                    Err(_) => drop(stream),
                },
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// The accepted connections as a stream (what tonic serves from).
    pub fn into_stream(self) -> impl futures::Stream<Item = io::Result<Limited>> + Send + 'static {
        futures::stream::unfold(self, |acceptor| async move {
            let connection = acceptor.accept().await;
            Some((Ok(connection), acceptor))
        })
    }
}

impl AsyncRead for Limited {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for Limited {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn past_the_cap_a_connection_is_closed_and_a_freed_slot_is_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = Arc::new(Acceptor::new(listener, 2));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let serving = acceptor.clone();
        tokio::spawn(async move {
            loop {
                let connection = serving.accept().await;
                tx.send(connection).unwrap();
            }
        });
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(TcpStream::connect(addr).await.unwrap());
        }
        let held: Vec<Limited> = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
        // The third is accepted and closed: its read ends at once.
        let mut third = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf)).await.unwrap().unwrap_or(0);
        assert_eq!(n, 0, "a connection past the cap stayed open");
        // A slot given back serves the next connection.
        drop(held);
        let mut fourth = TcpStream::connect(addr).await.unwrap();
        let mut served = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        fourth.write_all(b"x").await.unwrap();
        let mut got = [0u8; 1];
        served.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"x");
    }

    #[test]
    fn hosts_are_told_apart() {
        use crate::ui::host_allowed;
        let local: std::net::SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let allowed = vec!["board.lan".to_string()];
        for ok in ["127.0.0.1:8765", "localhost:8765", "LOCALHOST", "[::1]:8765", "app.localhost:1", "board.lan"] {
            assert!(host_allowed(ok, local, &allowed), "{ok}");
        }
        for refused in ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "board.lan.evil", "", "10.0.0.1"]
        {
            assert!(!host_allowed(refused, local, &allowed), "{refused}");
        }
    }
}
