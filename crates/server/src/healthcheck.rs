//! `flowguard-server --healthcheck`: asks the server of this host for `/healthz` and exits 0 when it
//! answers 200, 1 otherwise, so a container image needs no shell or HTTP client of its own (a
//! `FROM scratch` image's HEALTHCHECK runs the server binary itself). Plain HTTP only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// How long the probe waits for the whole answer.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// Where a server listening on `listen` is reached from this host: on loopback when it listens on
/// every address, else on that address.
pub fn target(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// `GET /healthz` on `addr` within `timeout`: Ok when the server answers 200.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    let ask = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let conn = tokio::spawn(conn);
        let request = hyper::Request::get("/healthz")
            .header(hyper::header::HOST, addr.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("{addr}: {e}"))?;
        let answer = send.send_request(request).await.map_err(|e| format!("{addr}: {e}"));
        conn.abort();
        match answer?.status() {
            hyper::StatusCode::OK => Ok(()),
            other => Err(format!("{addr} answered /healthz with {other}")),
        }
    };
    tokio::time::timeout(timeout, ask)
        .await
        .map_err(|_| format!("{addr} did not answer /healthz within {} ms", timeout.as_millis()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_is_probed_on_loopback_a_given_one_as_is() {
        assert_eq!(target("0.0.0.0:8080".parse().unwrap()), "127.0.0.1:8080".parse().unwrap());
        assert_eq!(target("[::]:8080".parse().unwrap()), "[::1]:8080".parse().unwrap());
        assert_eq!(target("10.0.0.5:9000".parse().unwrap()), "10.0.0.5:9000".parse().unwrap());
    }
}
