//! The HTTP/1.1 transport (hyper): accepting connections, at most `max_connections` at once (the
//! others wait in the listen backlog), the header and idle timeouts of each connection, TLS, and
//! the bounded drain on shutdown. A connection's life:
//!
//! - from its opening (or the end of its last answer and the first byte of the next head) until
//!   its request head is whole: at most `header_timeout` (a silent or trickling client is cut);
//! - between an answer and the first byte of the next request: at most `idle_timeout`;
//! - while a call is answered: the body's read time (`Limits::body_timeout`, 408) and the call's
//!   (`Limits::request_timeout`, 504) bound it.
//!
//! On shutdown the listener is closed, idle connections close, calls in flight are answered
//! (keep-alive off), and whatever is still open after `drain_timeout` is closed: the process ends
//! within it. A call cut there was applied whole or not at all (each backend step is atomic).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// The transport's limits (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Transport {
    /// The longest a client may take to send a whole request head (and a TLS handshake).
    pub header_timeout: Duration,
    /// The longest a kept-alive connection may stay silent between calls.
    pub idle_timeout: Duration,
    /// The most connections served at once.
    pub max_connections: usize,
    /// The longest the server drains its connections on shutdown before it closes them.
    pub drain_timeout: Duration,
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// Serves `router` on `listener` (over TLS with `tls`) until `shutdown` resolves, then drains the
/// connections for at most `t.drain_timeout` and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    t: Transport,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(t.max_connections.max(1)));
    let (stop, stopping) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        while conns.try_join_next().is_some() {}
        // A free place first: beyond the cap, connections wait in the listen backlog.
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        let conn = Connection {
            router: router.clone(),
            tls: tls.clone(),
            t: t.clone(),
            stopping: stopping.clone(),
            peer,
        };
        conns.spawn(async move {
            conn.run(stream).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    let open = conns.len();
    let drained =
        tokio::time::timeout(t.drain_timeout, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            open = conns.len(),
            of = open,
            drain_timeout_ms = t.drain_timeout.as_millis() as u64,
            "closing the connections still open after the drain timeout"
        );
        conns.shutdown().await;
    }
    Ok(())
}

/// An accept error: a connection that failed before it was accepted is skipped; anything else
/// (out of file descriptors) pauses accepting briefly, as the connections in hand go on.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(e.kind(), ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted) {
        return;
    }
    tracing::warn!(error = %e, "cannot accept a connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

struct Connection {
    router: Router,
    tls: Option<TlsAcceptor>,
    t: Transport,
    stopping: watch::Receiver<bool>,
    /// The client's address, given to each call as `ConnectInfo` (the action log names it).
    peer: SocketAddr,
}

impl Connection {
    async fn run(self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let clock = Arc::new(Clock::new(self.t.header_timeout, self.t.idle_timeout));
        match self.tls.clone() {
            None => self.http(Watched { io: stream, clock: clock.clone() }, clock).await,
            Some(acceptor) => {
                match tokio::time::timeout(self.t.header_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => self.http(Watched { io: tls, clock: clock.clone() }, clock).await,
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake not done within the header timeout"),
                }
            }
        }
    }

    async fn http<IO>(mut self, io: Watched<IO>, clock: Arc<Clock>)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let router = TowerToHyperService::new(self.router.clone());
        let calls = clock.clone();
        let peer = ConnectInfo(self.peer);
        let service = service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(peer);
            let busy = calls.begin();
            let answer = hyper::service::Service::call(&router, req);
            async move {
                let r = answer.await;
                drop(busy);
                r
            }
        });
        let conn = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        let mut draining = false;
        loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended");
                    }
                    return;
                }
                _ = self.stopping.wait_for(|s| *s), if !draining => {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
                why = clock.expired() => {
                    tracing::debug!(timeout = why, "closing a connection");
                    return;
                }
            }
        }
    }
}

/// Where a connection is in its life, for its timeouts.
#[derive(Clone, Copy)]
enum Phase {
    /// Waiting for (the rest of) a request head since then.
    Head(Instant),
    /// A call is being answered.
    Busy,
    /// Answered; no byte of a next request since then.
    Idle(Instant),
}

/// The phase of one connection, moved by the bytes read and the calls answered.
struct Clock {
    phase: Mutex<(Phase, usize)>,
    moved: Notify,
    header: Duration,
    idle: Duration,
}

impl Clock {
    fn new(header: Duration, idle: Duration) -> Clock {
        Clock { phase: Mutex::new((Phase::Head(Instant::now()), 0)), moved: Notify::new(), header, idle }
    }

    fn with<R>(&self, f: impl FnOnce(&mut (Phase, usize)) -> R) -> R {
        let mut g = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }

    /// Bytes arrived: on an idle connection, the head of the next request begins.
    fn read(&self) {
        if self.with(|p| match p.0 {
            Phase::Idle(_) => {
                p.0 = Phase::Head(Instant::now());
                true
            }
            _ => false,
        }) {
            self.moved.notify_one();
        }
    }

    /// A call begins (its head is whole); it ends when the guard is dropped.
    fn begin(self: &Arc<Self>) -> Busy {
        self.with(|p| {
            p.0 = Phase::Busy;
            p.1 += 1;
        });
        self.moved.notify_one();
        Busy(self.clone())
    }

    /// Resolves with the name of the timeout that ran out.
    async fn expired(&self) -> &'static str {
        loop {
            let moved = self.moved.notified();
            let due = self.with(|p| match p.0 {
                Phase::Head(t) => Some((t + self.header, "header")),
                Phase::Idle(t) => Some((t + self.idle, "idle")),
                Phase::Busy => None,
            });
            match due {
                None => moved.await,
                Some((at, why)) => tokio::select! {
                    _ = moved => {}
                    _ = tokio::time::sleep_until(at) => return why,
                },
            }
        }
    }
}

struct Busy(Arc<Clock>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.with(|p| {
            p.1 = p.1.saturating_sub(1);
            if p.1 == 0 {
                p.0 = Phase::Idle(Instant::now());
            }
        });
        self.0.moved.notify_one();
    }
}

/// A connection's stream, telling its clock when bytes arrive.
struct Watched<IO> {
    io: IO,
    clock: Arc<Clock>,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.read();
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
