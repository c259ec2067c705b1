//! The socket of one event-loop connection: opened, authenticated and set to non-blocking on a
//! thread of its own, then handed to the JavaScript thread's loop.

use std::ffi::c_int;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use redis::Value;

use super::reply::{self, Parsed};

pub(crate) enum Addr {
    Tcp(String, u16),
    Unix(PathBuf),
}

/// What a connection to one server needs.
pub(crate) struct Settings {
    pub addr: Addr,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
}

pub(crate) enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    pub fn fd(&self) -> c_int {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => (&*s).read(buf),
            Sock::Unix(s) => (&*s).read(buf),
        }
    }
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => (&*s).write(buf),
            Sock::Unix(s) => (&*s).write(buf),
        }
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_nonblocking(on),
            Sock::Unix(s) => s.set_nonblocking(on),
        }
    }
}

/// Connects and authenticates, blocking (run on a thread of its own).
pub(crate) fn connect(r: &Settings) -> io::Result<Sock> {
    let sock = match &r.addr {
        Addr::Tcp(host, port) => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
            let mut found = None;
            for a in (host.as_str(), *port).to_socket_addrs()? {
                match TcpStream::connect_timeout(&a, r.connect_timeout) {
                    Ok(s) => {
                        found = Some(s);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let s = found.ok_or(last)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(r.connect_timeout))?;
            s.set_write_timeout(Some(r.connect_timeout))?;
            Sock::Tcp(s)
        }
        Addr::Unix(p) => {
            let s = UnixStream::connect(p)?;
            s.set_read_timeout(Some(r.connect_timeout))?;
            s.set_write_timeout(Some(r.connect_timeout))?;
            Sock::Unix(s)
        }
    };
    let mut hello = Vec::new();
    if let Some(pw) = &r.password {
        let mut auth = redis::cmd("AUTH");
        if let Some(u) = &r.username {
            auth.arg(u);
        }
        hello.push(auth.arg(pw).clone());
    }
    if r.db != 0 {
        hello.push(redis::cmd("SELECT").arg(r.db).clone());
    }
    if !hello.is_empty() {
        handshake(&sock, &hello)?;
    }
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// Sends the commands and reads their replies; any error reply refuses the connection.
fn handshake(sock: &Sock, cmds: &[redis::Cmd]) -> io::Result<()> {
    let mut buf = Vec::new();
    for cmd in cmds {
        cmd.write_packed_command(&mut buf);
    }
    let mut sent = 0;
    while sent < buf.len() {
        sent += sock.write(&buf[sent..])?;
    }
    let mut rbuf = vec![0u8; 4096];
    let mut len = 0;
    let mut at = 0;
    let mut answered = 0;
    while answered < cmds.len() {
        match reply::parse(&rbuf[at..len]) {
            Ok(Parsed::Reply(v, n)) => {
                at += n;
                answered += 1;
                if let Value::ServerError(_) = v {
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, "the handshake was refused"));
                }
            }
            Ok(Parsed::Need(_)) => {
                if len == rbuf.len() {
                    if len >= reply::MAX_REPLY {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "a handshake reply is too long",
                        ));
                    }
                    rbuf.resize(len * 2, 0);
                }
                let n = sock.read(&mut rbuf[len..])?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                len += n;
            }
            Err(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "not a Redis reply")),
        }
    }
    Ok(())
}
