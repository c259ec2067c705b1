//! A Redis connection driven by a JavaScript thread's own event loop (libuv), for the calls that
//! thread makes.
//!
//! Through redis-rs, a call made from JavaScript crosses threads twice: the JavaScript thread
//! hands the command to the tokio worker that owns the socket (waking it), and the reply comes
//! back through a threadsafe function (waking the JavaScript thread). Here the command is written
//! to the socket during the JavaScript call itself, and the reply is read, and the call's Promise
//! settled, by a poll callback of the same loop: no thread is woken but the one Redis answers.
//! Commands that several settlements issue in one callback (their continuations run in its
//! microtask checkpoint) go out together, in writes of up to [`CORK_COMMANDS`] commands: fewer
//! system calls on both sides than a write each, and Redis starts on the first ones while the
//! rest are being made (one write for all made the two processes take turns).
//!
//! The core knows nothing of Node: a [`Host`] (the napi binding) tells it which loop the current
//! thread runs, settles what became ready inside a JavaScript scope, and reports the teardown of
//! the thread's environment. Without a host, or on a thread the host does not know, [`send`]
//! returns None and the caller uses the shared redis-rs connection; so do the calls made while
//! this thread's connection is being set up (in the background) or after it broke (it is set up
//! again, with backoff). TCP and Unix sockets, RESP2; TLS and RESP3 URLs never use it, nor does
//! any platform but Unix. `FLOWGUARD_REDIS_JS_LOOP=0` turns it off.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void};
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, RedisError, Value};

// -------------------------------------------------------------------------------------------------
// The host (the napi binding) and libuv

/// What the JavaScript host provides. All functions are called on the thread they concern.
pub struct Host {
    /// The current thread's environment (an id) and its libuv loop, when it is a JavaScript thread
    /// the host has set up; None elsewhere (tokio workers, tests).
    pub current: fn() -> Option<(usize, *mut c_void)>,
    /// Runs `f` (which completes replies, waking their calls), then, inside a JavaScript scope,
    /// polls the calls it woke, settles their Promises and runs the microtask checkpoint.
    pub dispatch: fn(&mut dyn FnMut()),
    /// Tells the host that the call being polled sent a command on this thread's loop, so its
    /// task should stay on this thread.
    pub io_started: fn(),
    /// Registers `teardown` for the environment `env` (called once, on its thread, when the
    /// environment goes away; the host keeps it alive until `teardown` calls its `done`).
    /// False if it could not: this environment then never uses the transport.
    pub on_teardown: fn(env: usize, teardown: Teardown) -> bool,
}

/// What the host calls when an environment goes away, with the finisher to call when done.
pub type Teardown = fn(done: Box<dyn FnOnce()>);

static HOST: OnceLock<&'static Host> = OnceLock::new();

/// Installs the host; the first one wins.
pub fn install_host(host: &'static Host) {
    let _ = HOST.set(host);
}

type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
type TimerCb = unsafe extern "C" fn(*mut c_void);
type CloseCb = unsafe extern "C" fn(*mut c_void);
type HandleSizeFn = unsafe extern "C" fn(c_int) -> usize;
type PollInitFn = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int) -> c_int;
type PollStartFn = unsafe extern "C" fn(*mut c_void, c_int, PollCb) -> c_int;
type HandleFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type TimerInitFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type TimerStartFn = unsafe extern "C" fn(*mut c_void, TimerCb, u64, u64) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void, Option<CloseCb>);
type UnrefFn = unsafe extern "C" fn(*mut c_void);

/// The libuv functions used, looked up in the host process (Node exports them for addons).
struct Uv {
    poll_init_socket: PollInitFn,
    poll_start: PollStartFn,
    poll_stop: HandleFn,
    timer_init: TimerInitFn,
    timer_start: TimerStartFn,
    close: CloseFn,
    unref: UnrefFn,
    poll_size: usize,
    timer_size: usize,
}

const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

#[cfg(any(target_os = "macos", target_os = "ios"))]
const RTLD_DEFAULT: *mut c_void = -2isize as *mut c_void;
#[cfg(not(any(target_os = "macos", target_os = "ios")))]
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| unsafe { load_uv() }).as_ref()
}

/// # Safety
/// Looks up symbols by name; each is transmuted to the signature libuv declares for it.
unsafe fn load_uv() -> Option<Uv> {
    // Runtimes that emulate Node-API without Node's libuv (Bun, Deno) may export stubs of it.
    let exe = std::env::current_exe().ok()?;
    let stem = exe.file_stem()?.to_string_lossy().to_ascii_lowercase();
    if stem.starts_with("bun") || stem.starts_with("deno") {
        return None;
    }
    macro_rules! sym {
        ($name:literal, $ty:ty) => {{
            let p = unsafe { dlsym(RTLD_DEFAULT, concat!($name, "\0").as_ptr().cast()) };
            if p.is_null() {
                return None;
            }
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        }};
    }
    let handle_size = sym!("uv_handle_size", HandleSizeFn);
    let (poll_size, timer_size) = unsafe { (handle_size(UV_POLL), handle_size(UV_TIMER)) };
    if poll_size == 0 || timer_size == 0 || poll_size > 4096 || timer_size > 4096 {
        return None;
    }
    Some(Uv {
        poll_init_socket: sym!("uv_poll_init_socket", PollInitFn),
        poll_start: sym!("uv_poll_start", PollStartFn),
        poll_stop: sym!("uv_poll_stop", HandleFn),
        timer_init: sym!("uv_timer_init", TimerInitFn),
        timer_start: sym!("uv_timer_start", TimerStartFn),
        close: sym!("uv_close", CloseFn),
        unref: sym!("uv_unref", UnrefFn),
        poll_size,
        timer_size,
    })
}

const HANDLE_ALIGN: usize = 16;

fn alloc_handle(size: usize) -> *mut c_void {
    let layout = std::alloc::Layout::from_size_align(size, HANDLE_ALIGN).expect("handle layout");
    // SAFETY: a non-zero size (checked in `load_uv`).
    unsafe { std::alloc::alloc_zeroed(layout).cast() }
}

/// # Safety
/// `h` came from `alloc_handle(size)` and libuv is done with it (its close callback ran).
unsafe fn free_handle(h: *mut c_void, size: usize) {
    let layout = std::alloc::Layout::from_size_align(size, HANDLE_ALIGN).expect("handle layout");
    unsafe { std::alloc::dealloc(h.cast(), layout) }
}

/// The `data` field of a libuv handle (its first field, public).
///
/// # Safety
/// `h` is a libuv handle.
unsafe fn handle_data(h: *mut c_void) -> *mut *const Live {
    h.cast()
}

// -------------------------------------------------------------------------------------------------
// Where a pooled connection goes

enum Addr {
    Tcp(String, u16),
    Unix(PathBuf),
}

/// The settings of one pooled connection that this transport needs (one per pool entry).
pub struct Remote {
    id: usize,
    addr: Addr,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    connect_timeout: Duration,
    command_timeout_ms: u64,
}

impl Remote {
    /// None when this transport cannot serve the URL (TLS, RESP3) or is turned off.
    pub(crate) fn new(
        client: &redis::Client,
        connect_timeout_ms: u64,
        command_timeout_ms: u64,
    ) -> Option<Arc<Remote>> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        if std::env::var("FLOWGUARD_REDIS_JS_LOOP").is_ok_and(|v| v == "0") {
            return None;
        }
        let info = client.get_connection_info();
        let settings = info.redis_settings();
        if settings.protocol() != redis::ProtocolVersion::RESP2 {
            return None;
        }
        let addr = match info.addr() {
            ConnectionAddr::Tcp(h, p) => Addr::Tcp(h.clone(), *p),
            ConnectionAddr::Unix(p) => Addr::Unix(p.clone()),
            _ => return None,
        };
        Some(Arc::new(Remote {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            addr,
            username: settings.username().map(str::to_string),
            password: settings.password().map(str::to_string),
            db: settings.db(),
            connect_timeout: Duration::from_millis(connect_timeout_ms.max(1)),
            command_timeout_ms: command_timeout_ms.max(1),
        }))
    }
}

enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn fd(&self) -> c_int {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => (&*s).read(buf),
            Sock::Unix(s) => (&*s).read(buf),
        }
    }
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
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
fn connect(r: &Remote) -> io::Result<Sock> {
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
    let mut hello: Vec<Vec<&[u8]>> = Vec::new();
    if let Some(pw) = &r.password {
        match &r.username {
            Some(u) => hello.push(vec![b"AUTH", u.as_bytes(), pw.as_bytes()]),
            None => hello.push(vec![b"AUTH", pw.as_bytes()]),
        }
    }
    let db = r.db.to_string();
    if r.db != 0 {
        hello.push(vec![b"SELECT", db.as_bytes()]);
    }
    let mut buf = Vec::new();
    for cmd in &hello {
        encode_command(&mut buf, cmd);
    }
    if !buf.is_empty() {
        let mut sent = 0;
        while sent < buf.len() {
            sent += sock.write(&buf[sent..])?;
        }
        let mut rbuf = vec![0u8; 4096];
        let mut len = 0;
        let mut at = 0;
        let mut answered = 0;
        while answered < hello.len() {
            match parse(&rbuf[at..len]) {
                Ok(Some((v, n))) => {
                    at += n;
                    answered += 1;
                    if let Value::ServerError(_) = v {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            "the handshake was refused",
                        ));
                    }
                }
                Ok(None) => {
                    if len == rbuf.len() {
                        rbuf.resize(len * 2, 0);
                    }
                    let n = sock.read(&mut rbuf[len..])?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    len += n;
                }
                Err(()) => return Err(io::Error::new(io::ErrorKind::InvalidData, "not a Redis reply")),
            }
        }
    }
    sock.set_nonblocking(true)?;
    Ok(sock)
}

// -------------------------------------------------------------------------------------------------
// RESP

fn encode_bulk(buf: &mut Vec<u8>, b: &[u8]) {
    buf.push(b'$');
    push_int(buf, b.len() as i64);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(b);
    buf.extend_from_slice(b"\r\n");
}

fn push_int(buf: &mut Vec<u8>, n: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let neg = n < 0;
    let mut u = n.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        buf.push(b'-');
    }
    buf.extend_from_slice(&tmp[i..]);
}

fn encode_command(buf: &mut Vec<u8>, parts: &[&[u8]]) {
    buf.push(b'*');
    push_int(buf, parts.len() as i64);
    buf.extend_from_slice(b"\r\n");
    for p in parts {
        encode_bulk(buf, p);
    }
}

/// `EVALSHA sha n keys… args…` (or `EVAL source …` with `head` = EVAL).
pub(crate) fn encode_eval(buf: &mut Vec<u8>, head: &[u8], body: &[u8], keys: &[&[u8]], args: &[&[u8]]) {
    buf.push(b'*');
    push_int(buf, (3 + keys.len() + args.len()) as i64);
    buf.extend_from_slice(b"\r\n");
    encode_bulk(buf, head);
    encode_bulk(buf, body);
    let mut n = Vec::with_capacity(4);
    push_int(&mut n, keys.len() as i64);
    encode_bulk(buf, &n);
    for k in keys {
        encode_bulk(buf, k);
    }
    for a in args {
        encode_bulk(buf, a);
    }
}

/// The line starting at `at` (without its CRLF) and the index after it; None if incomplete.
fn line(b: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = b.get(at..)?;
    let i = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..i], at + i + 2))
}

fn int_of(l: &[u8]) -> Result<i64, ()> {
    std::str::from_utf8(l).map_err(|_| ())?.parse().map_err(|_| ())
}

/// Parses one complete RESP2 value at the start of `b`: its value and length, None if more bytes
/// are needed, Err if the bytes are not RESP2.
fn parse(b: &[u8]) -> Result<Option<(Value, usize)>, ()> {
    parse_at(b, 0, 0)
}

fn parse_at(b: &[u8], at: usize, depth: u32) -> Result<Option<(Value, usize)>, ()> {
    if depth > 64 {
        return Err(());
    }
    let Some(&kind) = b.get(at) else { return Ok(None) };
    let Some((l, next)) = line(b, at + 1) else { return Ok(None) };
    Ok(Some(match kind {
        b':' => (Value::Int(int_of(l)?), next),
        b'+' => {
            if l == b"OK" {
                (Value::Okay, next)
            } else {
                (Value::SimpleString(String::from_utf8_lossy(l).into_owned()), next)
            }
        }
        // Error replies are rare: redis-rs's own parser makes them exactly as it reports them.
        b'-' => (
            redis::parse_redis_value(&b[at..next]).unwrap_or_else(|e| Value::SimpleString(e.to_string())),
            next,
        ),
        b'$' => {
            let n = int_of(l)?;
            if n < 0 {
                (Value::Nil, next)
            } else {
                let end = next + n as usize;
                if b.len() < end + 2 {
                    return Ok(None);
                }
                if &b[end..end + 2] != b"\r\n" {
                    return Err(());
                }
                (Value::BulkString(b[next..end].to_vec()), end + 2)
            }
        }
        b'*' => {
            let n = int_of(l)?;
            if n < 0 {
                (Value::Nil, next)
            } else {
                let mut items = Vec::with_capacity((n as usize).min(1024));
                let mut at = next;
                for _ in 0..n {
                    match parse_at(b, at, depth + 1)? {
                        Some((v, after)) => {
                            items.push(v);
                            at = after;
                        }
                        None => return Ok(None),
                    }
                }
                (Value::Array(items), at)
            }
        }
        _ => return Err(()),
    }))
}

// -------------------------------------------------------------------------------------------------
// A reply on its way

#[derive(Default)]
struct SlotState {
    result: Option<Result<Value, RedisError>>,
    waker: Option<Waker>,
    done: bool,
}

/// Where the reply of one command lands (the reader fills it on the JavaScript thread; the call
/// that awaits it may be polled anywhere).
#[derive(Default)]
struct Slot(Mutex<SlotState>);

impl Slot {
    fn state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn is_done(&self) -> bool {
        self.state().done
    }
    /// Stores the outcome (the first one only) and wakes the call.
    fn complete(&self, r: Result<Value, RedisError>) {
        let waker = {
            let mut s = self.state();
            if s.done {
                return;
            }
            s.done = true;
            s.result = Some(r);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The reply of a command sent by [`send`].
pub(crate) struct Reply(Arc<Slot>);

impl Future for Reply {
    type Output = Result<Value, RedisError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0.state();
        if let Some(r) = s.result.take() {
            return Poll::Ready(r);
        }
        if s.done {
            return Poll::Ready(Err(io::Error::other("reply already taken").into()));
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

// -------------------------------------------------------------------------------------------------
// A live connection on this thread's loop

struct LiveState {
    wbuf: Vec<u8>,
    wpos: usize,
    /// Whether the poll handle also waits for the socket to be writable (a write was partial).
    writable: bool,
    rbuf: Vec<u8>,
    rlen: usize,
    /// Commands sent and not answered yet, in order, with their deadlines.
    fifo: VecDeque<(Arc<Slot>, Instant)>,
    timer_armed: bool,
    corked: bool,
    /// Commands buffered since the last write.
    queued: usize,
    dead: bool,
}

struct Live {
    remote: Arc<Remote>,
    sock: Sock,
    poll: *mut c_void,
    timer: *mut c_void,
    s: RefCell<LiveState>,
}

enum Entry {
    /// Connecting on a thread of its own; the socket lands here.
    Connecting(Arc<Mutex<Option<io::Result<Sock>>>>, Duration),
    Live(Rc<Live>),
    /// Down since `at`; try again after `backoff`.
    Down {
        at: Instant,
        backoff: Duration,
    },
}

struct Reg {
    env: usize,
    uv_loop: *mut c_void,
    conns: HashMap<usize, Entry>,
    /// The host's finisher of a teardown, called once every handle is closed.
    done: Option<Box<dyn FnOnce()>>,
    torn_down: bool,
}

thread_local! {
    static REG: RefCell<Option<Reg>> = const { RefCell::new(None) };
    /// Set while a reply callback settles calls: commands sent meanwhile are written in one go
    /// when it ends.
    static CORK: Cell<bool> = const { Cell::new(false) };
    static CORKED: RefCell<Vec<Rc<Live>>> = const { RefCell::new(Vec::new()) };
    /// libuv handles of this thread not closed yet (a teardown finishes when none is left).
    static OPEN: Cell<usize> = const { Cell::new(0) };
}

/// While corked, a write goes out once this many commands are buffered. Measured with 64 lock
/// pairs in flight (BENCHMARKS.md): one write per callback 55,000 pairs/s; every 32 commands
/// 96,000; every 16, 99,000 (CPU per pair 8.7 vs 9.2 µs); every 8, 99,000 (9.8 µs).
pub(crate) const CORK_COMMANDS: usize = 16;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;

/// This thread's live connection for `r`, starting (or picking up) one when needed.
fn live(r: &Arc<Remote>) -> Option<Rc<Live>> {
    let host = HOST.get()?;
    let (env, uv_loop) = (host.current)()?;
    let uv = uv()?;
    REG.with(|cell| {
        let mut reg = cell.borrow_mut();
        if reg.as_ref().is_some_and(|g| g.env != env || g.torn_down) {
            if reg.as_ref().is_some_and(|g| g.torn_down) {
                return None;
            }
            *reg = None;
        }
        let g = reg.get_or_insert_with(|| {
            let registered = (host.on_teardown)(env, teardown);
            Reg { env, uv_loop, conns: HashMap::new(), done: None, torn_down: !registered }
        });
        if g.torn_down {
            return None;
        }
        let entry =
            g.conns.entry(r.id).or_insert(Entry::Down { at: Instant::now(), backoff: Duration::ZERO });
        if matches!(entry, Entry::Live(l) if l.s.borrow().dead) {
            *entry = Entry::Down { at: Instant::now(), backoff: FIRST_BACKOFF };
        }
        match entry {
            Entry::Live(l) => Some(l.clone()),
            Entry::Down { at, backoff } => {
                if at.elapsed() < *backoff {
                    return None;
                }
                let next = (*backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                let slot = Arc::new(Mutex::new(None));
                let (r2, s2) = (r.clone(), slot.clone());
                let spawned = std::thread::Builder::new().name("flowguard-connect".into()).spawn(move || {
                    let res = connect(&r2);
                    *s2.lock().unwrap_or_else(|p| p.into_inner()) = Some(res);
                });
                *entry = match spawned {
                    Ok(_) => Entry::Connecting(slot, next),
                    Err(_) => Entry::Down { at: Instant::now(), backoff: next },
                };
                None
            }
            Entry::Connecting(slot, backoff) => {
                let got = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                let backoff = *backoff;
                match got {
                    None => None,
                    Some(Err(_)) => {
                        *entry = Entry::Down { at: Instant::now(), backoff };
                        None
                    }
                    Some(Ok(sock)) => match unsafe { start(uv, g.uv_loop, r.clone(), sock) } {
                        Some(l) => {
                            *entry = Entry::Live(l.clone());
                            Some(l)
                        }
                        None => {
                            *entry = Entry::Down { at: Instant::now(), backoff };
                            None
                        }
                    },
                }
            }
        }
    })
}

/// Registers a connected socket with the loop.
///
/// # Safety
/// On the loop's thread.
unsafe fn start(uv: &Uv, uv_loop: *mut c_void, remote: Arc<Remote>, sock: Sock) -> Option<Rc<Live>> {
    let poll = alloc_handle(uv.poll_size);
    let timer = alloc_handle(uv.timer_size);
    if poll.is_null() || timer.is_null() {
        return None;
    }
    // SAFETY: fresh handles of the sizes libuv reported, on the loop's thread.
    unsafe {
        if (uv.poll_init_socket)(uv_loop, poll, sock.fd()) != 0 {
            free_handle(poll, uv.poll_size);
            free_handle(timer, uv.timer_size);
            return None;
        }
        OPEN.with(|n| n.set(n.get() + 1));
        if (uv.timer_init)(uv_loop, timer) != 0 {
            *handle_data(poll) = std::ptr::null();
            (uv.close)(poll, Some(on_close_poll));
            free_handle(timer, uv.timer_size);
            return None;
        }
        OPEN.with(|n| n.set(n.get() + 1));
    }
    let live = Rc::new(Live {
        remote,
        sock,
        poll,
        timer,
        s: RefCell::new(LiveState {
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            writable: false,
            rbuf: vec![0; READ_CHUNK],
            rlen: 0,
            fifo: VecDeque::new(),
            timer_armed: false,
            corked: false,
            queued: 0,
            dead: false,
        }),
    });
    // SAFETY: each handle owns one strong count of `live`, given back in its close callback.
    unsafe {
        *handle_data(poll) = Rc::into_raw(live.clone());
        *handle_data(timer) = Rc::into_raw(live.clone());
        // Neither handle keeps the loop alive: the host keeps it alive while calls are pending.
        (uv.unref)(poll);
        (uv.unref)(timer);
        if (uv.poll_start)(poll, UV_READABLE, on_poll) != 0 {
            close_handles(uv, &live);
            return None;
        }
    }
    Some(live)
}

/// Sends a command built by `encode` on this thread's connection for `r`. None: there is none
/// (not a JavaScript thread, not connected yet, or down): use redis-rs.
pub(crate) fn send(r: &Arc<Remote>, encode: impl FnOnce(&mut Vec<u8>)) -> Option<Reply> {
    let live = live(r)?;
    let slot = Arc::new(Slot::default());
    let mut corked = CORK.with(Cell::get);
    {
        let mut s = live.s.borrow_mut();
        if s.dead {
            return None;
        }
        encode(&mut s.wbuf);
        s.fifo.push_back((
            slot.clone(),
            Instant::now() + Duration::from_millis(live.remote.command_timeout_ms),
        ));
        if !s.timer_armed {
            s.timer_armed = true;
            if let Some(uv) = uv() {
                // SAFETY: a live timer handle of this thread's loop.
                unsafe { (uv.timer_start)(live.timer, on_timer, live.remote.command_timeout_ms, 0) };
            }
        }
        s.queued += 1;
        if s.queued >= CORK_COMMANDS {
            corked = false;
        } else if corked && !s.corked {
            s.corked = true;
            CORKED.with(|c| c.borrow_mut().push(live.clone()));
        }
    }
    if let Some(host) = HOST.get() {
        (host.io_started)();
    }
    if !corked {
        flush(&live);
    }
    Some(Reply(slot))
}

/// Writes what is buffered; on a partial write, waits for the socket to be writable.
fn flush(live: &Rc<Live>) {
    let outcome = {
        let mut s = live.s.borrow_mut();
        if s.dead {
            return;
        }
        s.corked = false;
        s.queued = 0;
        let mut res = Ok(());
        while s.wpos < s.wbuf.len() {
            match live.sock.write(&s.wbuf[s.wpos..]) {
                Ok(0) => {
                    res = Err(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => s.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        if s.wpos == s.wbuf.len() {
            s.wbuf.clear();
            s.wpos = 0;
        }
        let want_writable = !s.wbuf.is_empty();
        match res {
            Ok(()) if want_writable != s.writable => {
                s.writable = want_writable;
                Ok(Some(want_writable))
            }
            Ok(()) => Ok(None),
            Err(e) => Err(e),
        }
    };
    match outcome {
        Ok(Some(writable)) => {
            if let Some(uv) = uv() {
                let events = if writable { UV_READABLE | UV_WRITABLE } else { UV_READABLE };
                // SAFETY: the live poll handle of this thread's loop.
                if unsafe { (uv.poll_start)(live.poll, events, on_poll) } != 0 {
                    fail(live, io::Error::other("cannot watch the socket"));
                }
            }
        }
        Ok(None) => {}
        Err(e) => fail(live, e),
    }
}

/// Writes the commands corked during a reply callback.
fn uncork() {
    CORK.with(|c| c.set(false));
    let corked = CORKED.with(|c| std::mem::take(&mut *c.borrow_mut()));
    for live in &corked {
        flush(live);
    }
}

/// The connection broke: every pending command fails (as redis-rs reports a dropped connection),
/// the handles close, and the next calls use redis-rs until a new connection is up.
fn fail(live: &Rc<Live>, e: io::Error) {
    let pending = {
        let mut s = live.s.borrow_mut();
        if s.dead {
            return;
        }
        s.dead = true;
        s.wbuf.clear();
        s.wpos = 0;
        std::mem::take(&mut s.fifo)
    };
    let id = live.remote.id;
    REG.with(|cell| {
        if let Ok(mut reg) = cell.try_borrow_mut() {
            if let Some(g) = reg.as_mut() {
                if matches!(g.conns.get(&id), Some(Entry::Live(l)) if Rc::ptr_eq(l, live)) {
                    g.conns.insert(id, Entry::Down { at: Instant::now(), backoff: FIRST_BACKOFF });
                }
            }
        }
    });
    if let Some(uv) = uv() {
        // SAFETY: the live handles of this thread's loop, closed once (`dead` guards).
        unsafe { close_handles(uv, live) };
    }
    let kind = e.kind();
    let msg = e.to_string();
    for (slot, _) in pending {
        slot.complete(Err(io::Error::new(kind, msg.clone()).into()));
    }
}

/// # Safety
/// The live handles of this thread's loop, not closed yet.
unsafe fn close_handles(uv: &Uv, live: &Rc<Live>) {
    unsafe {
        (uv.poll_stop)(live.poll);
        (uv.close)(live.poll, Some(on_close_poll));
        (uv.close)(live.timer, Some(on_close_timer));
    }
}

/// Gives back the strong count a handle owns and frees it.
///
/// # Safety
/// Called by libuv once per handle, after `uv_close`.
unsafe fn closed(h: *mut c_void, size: usize) {
    unsafe {
        let data = *handle_data(h);
        if !data.is_null() {
            drop(Rc::from_raw(data));
        }
        free_handle(h, size);
    }
    let left = OPEN.with(|n| {
        n.set(n.get().saturating_sub(1));
        n.get()
    });
    let done =
        if left == 0 { REG.with(|cell| cell.try_borrow_mut().ok()?.as_mut()?.done.take()) } else { None };
    if let Some(done) = done {
        done();
    }
}

unsafe extern "C" fn on_close_poll(h: *mut c_void) {
    if let Some(uv) = uv() {
        // SAFETY: libuv closed our poll handle.
        guarded(|| unsafe { closed(h, uv.poll_size) })
    }
}

unsafe extern "C" fn on_close_timer(h: *mut c_void) {
    if let Some(uv) = uv() {
        // SAFETY: libuv closed our timer handle.
        guarded(|| unsafe { closed(h, uv.timer_size) })
    }
}

/// A strong reference to the connection a handle belongs to.
///
/// # Safety
/// `h` is one of our handles, not closed yet.
unsafe fn live_of(h: *mut c_void) -> Option<Rc<Live>> {
    unsafe {
        let data = *handle_data(h);
        if data.is_null() {
            return None;
        }
        Rc::increment_strong_count(data);
        Some(Rc::from_raw(data))
    }
}

/// Settles what became ready inside the host's JavaScript scope, then writes what the
/// continuations sent meanwhile in one go.
fn settle(mut f: impl FnMut()) {
    let Some(host) = HOST.get() else {
        f();
        return;
    };
    struct Uncork;
    impl Drop for Uncork {
        fn drop(&mut self) {
            uncork();
        }
    }
    CORK.with(|c| c.set(true));
    let _u = Uncork;
    (host.dispatch)(&mut f);
}

/// Runs a libuv callback's body; a panic must not unwind into libuv (it would abort Node).
fn guarded(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

unsafe extern "C" fn on_poll(h: *mut c_void, status: c_int, events: c_int) {
    // SAFETY: libuv calls this with our live poll handle.
    guarded(|| unsafe { poll_ready(h, status, events) })
}

unsafe extern "C" fn on_timer(h: *mut c_void) {
    // SAFETY: libuv calls this with our live timer handle.
    guarded(|| unsafe { timer_fired(h) })
}

/// # Safety
/// `h` is our poll handle, not closed.
unsafe fn poll_ready(h: *mut c_void, status: c_int, events: c_int) {
    let Some(live) = (unsafe { live_of(h) }) else { return };
    if status < 0 {
        settle(|| fail(&live, io::Error::other(format!("socket error {status}"))));
        return;
    }
    if events & UV_WRITABLE != 0 {
        flush(&live);
    }
    if events & UV_READABLE == 0 {
        return;
    }
    let mut replies: Vec<(Arc<Slot>, Result<Value, RedisError>)> = Vec::new();
    let mut broken: Option<io::Error> = None;
    {
        let mut guard = live.s.borrow_mut();
        let s = &mut *guard;
        if s.dead {
            return;
        }
        loop {
            if s.rlen == s.rbuf.len() {
                let n = s.rbuf.len() * 2;
                s.rbuf.resize(n, 0);
            }
            match live.sock.read(&mut s.rbuf[s.rlen..]) {
                Ok(0) => {
                    broken =
                        Some(io::Error::new(io::ErrorKind::UnexpectedEof, "Redis closed the connection"));
                    break;
                }
                Ok(n) => {
                    s.rlen += n;
                    if s.rlen < s.rbuf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    broken = Some(e);
                    break;
                }
            }
        }
        let mut at = 0;
        while at < s.rlen {
            match parse(&s.rbuf[at..s.rlen]) {
                Ok(Some((v, n))) => {
                    at += n;
                    match s.fifo.pop_front() {
                        Some((slot, _)) => replies.push((slot, v.extract_error())),
                        None => {
                            broken =
                                Some(io::Error::new(io::ErrorKind::InvalidData, "a reply nobody asked for"));
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(()) => {
                    broken = Some(io::Error::new(io::ErrorKind::InvalidData, "not a Redis reply"));
                    break;
                }
            }
        }
        if at > 0 {
            s.rbuf.copy_within(at..s.rlen, 0);
            s.rlen -= at;
        }
        if s.rlen == 0 && s.rbuf.len() > 4 * READ_CHUNK {
            s.rbuf.truncate(READ_CHUNK);
            s.rbuf.shrink_to_fit();
        }
    }
    let mut replies = Some(replies);
    settle(|| {
        for (slot, r) in replies.take().into_iter().flatten() {
            slot.complete(r);
        }
        if let Some(e) = broken.take() {
            fail(&live, e);
        }
    });
}

/// # Safety
/// `h` is our timer handle, not closed.
unsafe fn timer_fired(h: *mut c_void) {
    let Some(live) = (unsafe { live_of(h) }) else { return };
    let now = Instant::now();
    let mut expired = Vec::new();
    {
        let mut s = live.s.borrow_mut();
        s.timer_armed = false;
        if s.dead {
            return;
        }
        let mut next = None;
        for (slot, deadline) in &s.fifo {
            if *deadline > now {
                next = Some(*deadline - now);
                break;
            }
            if !slot.is_done() {
                expired.push(slot.clone());
            }
        }
        if let (Some(d), Some(uv)) = (next, uv()) {
            s.timer_armed = true;
            // SAFETY: the live timer handle, in its own callback.
            unsafe { (uv.timer_start)(live.timer, on_timer, (d.as_millis() as u64).max(1), 0) };
        }
    }
    if expired.is_empty() {
        return;
    }
    let mut expired = Some(expired);
    settle(|| {
        for slot in expired.take().into_iter().flatten() {
            // The reply, should it come, finds the slot done and is dropped.
            slot.complete(Err(io::Error::new(io::ErrorKind::TimedOut, "no reply in time").into()));
        }
    });
}

/// The environment goes away: close every handle; `done` once libuv has closed them.
fn teardown(done: Box<dyn FnOnce()>) {
    let lives: Vec<Rc<Live>> = REG.with(|cell| {
        let mut reg = cell.borrow_mut();
        let Some(g) = reg.as_mut() else { return Vec::new() };
        g.torn_down = true;
        g.conns
            .drain()
            .filter_map(|(_, e)| match e {
                Entry::Live(l) => Some(l),
                _ => None,
            })
            .collect()
    });
    let uv = uv();
    for live in &lives {
        let mut s = live.s.borrow_mut();
        if s.dead {
            continue;
        }
        s.dead = true;
        s.fifo.clear();
        drop(s);
        if let Some(uv) = uv {
            // SAFETY: live handles of this thread's loop, closed once.
            unsafe { close_handles(uv, live) };
        }
    }
    drop(lives);
    if OPEN.with(Cell::get) == 0 {
        done();
        return;
    }
    // Handles closed here, or earlier by `fail`, are still closing: finish after the last one.
    let stored = REG.with(|cell| match cell.borrow_mut().as_mut() {
        Some(g) => {
            g.done = Some(done);
            None
        }
        None => Some(done),
    });
    if let Some(done) = stored {
        done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resp2() {
        assert_eq!(parse(b":12\r\n").unwrap(), Some((Value::Int(12), 5)));
        assert_eq!(parse(b":12\r").unwrap(), None);
        assert_eq!(parse(b"$3\r\nabc\r\n+OK\r\n").unwrap(), Some((Value::BulkString(b"abc".to_vec()), 9)));
        assert_eq!(parse(b"$3\r\nab").unwrap(), None);
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Value::Nil, 5)));
        assert_eq!(
            parse(b"*2\r\n$5\r\n1:a:b\r\n:-3\r\n").unwrap(),
            Some((Value::Array(vec![Value::BulkString(b"1:a:b".to_vec()), Value::Int(-3)]), 20))
        );
        assert_eq!(parse(b"*2\r\n$5\r\n1:a:b\r\n").unwrap(), None);
        let (e, n) = parse(b"-NOSCRIPT No matching script\r\n").unwrap().unwrap();
        assert_eq!(n, 30);
        let err = e.extract_error().unwrap_err();
        assert_eq!(err.kind(), redis::ErrorKind::Server(redis::ServerErrorKind::NoScript));
        assert!(parse(b"?x\r\n").is_err());
    }

    #[test]
    fn encodes_evalsha() {
        let mut b = Vec::new();
        encode_eval(&mut b, b"EVALSHA", b"abc", &[b"k"], &[b"1", b""]);
        assert_eq!(b, b"*6\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\n$1\r\n1\r\n$0\r\n\r\n");
        let mut n = Vec::new();
        push_int(&mut n, -120);
        assert_eq!(n, b"-120");
    }
}
