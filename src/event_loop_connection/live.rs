//! One connected socket on an environment's loop: commands written during JavaScript calls,
//! replies read by a poll callback, timeouts by a timer, all on the JavaScript thread.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redis::{RedisError, Value};

use super::libuv::{Event, Handle};
use super::reply::{self, Parsed};
use super::socket::{Settings, Sock};
use super::Connections;

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

/// The reply of a command sent by [`Live::send`].
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
// The connection

struct State {
    wbuf: Vec<u8>,
    wpos: usize,
    /// Whether the poll handle also waits for the socket to be writable (a write was partial).
    writable: bool,
    rbuf: Vec<u8>,
    rlen: usize,
    /// Bytes the reply at the front of `rbuf` needs at least (no parse before they are in).
    need: usize,
    /// Commands sent and not answered yet, in order, with their deadlines.
    fifo: VecDeque<(Arc<Slot>, Instant)>,
    timer_armed: bool,
    corked: bool,
    /// Commands buffered since the last write.
    queued: usize,
    /// Calls timed out since the last reply: a socket that went silent reports no error by
    /// itself, so after a few the connection is retired like the shared one.
    timeouts_in_row: u32,
    dead: bool,
}

pub(crate) struct Live {
    owner: Rc<Connections>,
    settings: Arc<Settings>,
    /// Declared (so dropped, which closes them) before the socket they watch.
    poll: Option<Handle>,
    timer: Option<Handle>,
    sock: Sock,
    s: RefCell<State>,
}

thread_local! {
    /// Set while a reply callback settles calls: commands sent meanwhile are written in one go
    /// when it ends (by whichever environment of this thread they belong to).
    static CORK: Cell<bool> = const { Cell::new(false) };
    static CORKED: RefCell<Vec<Rc<Live>>> = const { RefCell::new(Vec::new()) };
}

/// While corked, a write goes out once this many commands are buffered (measured in
/// BENCHMARKS.md: fewer system calls than a write each, and Redis starts on the first commands
/// while the rest are being made).
const CORK_COMMANDS: usize = 16;
const READ_CHUNK: usize = 16 * 1024;
/// Timeouts in a row after which the connection is retired (the shared connection's rule).
const RETIRE_AFTER_TIMEOUTS: u32 = flowguard_core::backend::redis::RETIRE_AFTER_TIMEOUTS;

impl Live {
    /// Registers a connected socket with the loop of `owner`.
    pub(super) fn start(owner: &Rc<Connections>, settings: Arc<Settings>, sock: Sock) -> Option<Rc<Live>> {
        let live = Rc::new_cyclic(|me: &Weak<Live>| {
            // Each handle tells this connection of its events while it is alive, and its owner
            // when it has closed. Neither handle keeps the loop alive: the threadsafe function
            // of `settle` does while calls are pending.
            let handle_of = |me: Weak<Live>| {
                let conns = owner.clone();
                move |event| match event {
                    Event::Closed => conns.closed(),
                    event => {
                        if let Some(live) = me.upgrade() {
                            live.event(event);
                        }
                    }
                }
            };
            let poll = Handle::poll(&owner.lp, sock.fd(), handle_of(me.clone()));
            if poll.is_some() {
                owner.opened();
            }
            let timer = poll.as_ref().and_then(|_| Handle::timer(&owner.lp, handle_of(me.clone())));
            if timer.is_some() {
                owner.opened();
            }
            Live {
                owner: owner.clone(),
                settings,
                poll,
                timer,
                sock,
                s: RefCell::new(State {
                    wbuf: Vec::with_capacity(4096),
                    wpos: 0,
                    writable: false,
                    rbuf: vec![0; READ_CHUNK],
                    rlen: 0,
                    need: 1,
                    fifo: VecDeque::new(),
                    timer_armed: false,
                    corked: false,
                    queued: 0,
                    timeouts_in_row: 0,
                    dead: false,
                }),
            }
        });
        if live.timer.is_none() || !live.poll.as_ref().is_some_and(|p| p.watch(false)) {
            live.s.borrow_mut().dead = true;
            live.close_handles();
            return None;
        }
        Some(live)
    }

    /// An event of one of the handles.
    fn event(self: &Rc<Self>, event: Event) {
        match event {
            Event::Poll { status, .. } if status < 0 => {
                self.settle(|| self.fail(io::Error::other(format!("socket error {status}"))));
            }
            Event::Poll { readable, writable, .. } => {
                if writable {
                    self.flush();
                }
                if readable {
                    self.readable();
                }
            }
            Event::Timer => self.timer_fired(),
            Event::Closed => {}
        }
    }

    fn close_handles(&self) {
        for h in [&self.poll, &self.timer].into_iter().flatten() {
            h.close();
        }
    }

    fn arm_timer(&self, ms: u64) {
        if let Some(t) = &self.timer {
            t.arm(ms);
        }
    }

    pub(super) fn is_dead(&self) -> bool {
        self.s.borrow().dead
    }

    /// Buffers `cmd` (written now, or when the current reply callback ends); None if the
    /// connection broke.
    pub(super) fn send(self: &Rc<Self>, cmd: &redis::Cmd) -> Option<Reply> {
        let slot = Arc::new(Slot::default());
        let mut corked = CORK.with(Cell::get);
        {
            let mut s = self.s.borrow_mut();
            if s.dead {
                return None;
            }
            cmd.write_packed_command(&mut s.wbuf);
            s.fifo.push_back((slot.clone(), Instant::now() + self.settings.command_timeout));
            if !s.timer_armed {
                s.timer_armed = true;
                self.arm_timer(self.settings.command_timeout.as_millis().max(1) as u64);
            }
            s.queued += 1;
            if s.queued >= CORK_COMMANDS {
                corked = false;
            } else if corked && !s.corked {
                s.corked = true;
                CORKED.with(|c| c.borrow_mut().push(self.clone()));
            }
        }
        if !corked {
            self.flush();
        }
        Some(Reply(slot))
    }

    /// Writes what is buffered; on a partial write, waits for the socket to be writable.
    fn flush(self: &Rc<Self>) {
        let outcome = {
            let mut s = self.s.borrow_mut();
            if s.dead {
                return;
            }
            s.corked = false;
            s.queued = 0;
            let mut res = Ok(());
            while s.wpos < s.wbuf.len() {
                match self.sock.write(&s.wbuf[s.wpos..]) {
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
                if !self.poll.as_ref().is_some_and(|p| p.watch(writable)) {
                    self.fail(io::Error::other("cannot watch the socket"));
                }
            }
            Ok(None) => {}
            Err(e) => self.fail(e),
        }
    }

    /// The connection broke: every pending command fails (as redis-rs reports a dropped
    /// connection), the handles close, and the next calls use redis-rs until a new connection
    /// is up.
    fn fail(self: &Rc<Self>, e: io::Error) {
        let pending = {
            let mut s = self.s.borrow_mut();
            if s.dead {
                return;
            }
            s.dead = true;
            s.wbuf.clear();
            s.wpos = 0;
            std::mem::take(&mut s.fifo)
        };
        self.owner.broke(self);
        self.close_handles();
        let kind = e.kind();
        let msg = e.to_string();
        for (slot, _) in pending {
            slot.complete(Err(io::Error::new(kind, msg.clone()).into()));
        }
    }

    /// The environment goes away: the pending calls go with it (their Promises are gone), the
    /// handles close.
    pub(super) fn shut(self: &Rc<Self>) {
        {
            let mut s = self.s.borrow_mut();
            if s.dead {
                return;
            }
            s.dead = true;
            s.fifo.clear();
        }
        self.close_handles();
    }

    /// Reads what the socket has and completes the calls whose replies are in.
    fn readable(self: &Rc<Self>) {
        let mut replies: Vec<(Arc<Slot>, Result<Value, RedisError>)> = Vec::new();
        let mut broken: Option<io::Error> = None;
        {
            let mut guard = self.s.borrow_mut();
            let s = &mut *guard;
            if s.dead {
                return;
            }
            loop {
                if s.rlen == s.rbuf.len() {
                    // Never past the longest reply accepted: the parser refuses longer ones first.
                    let n = (s.rbuf.len() * 2).min(reply::MAX_REPLY + READ_CHUNK);
                    if n == s.rbuf.len() {
                        broken = Some(io::Error::new(io::ErrorKind::InvalidData, "a reply is too long"));
                        break;
                    }
                    s.rbuf.resize(n, 0);
                }
                let room = s.rbuf.len() - s.rlen;
                let got = match self.sock.read(&mut s.rbuf[s.rlen..]) {
                    Ok(0) => {
                        broken =
                            Some(io::Error::new(io::ErrorKind::UnexpectedEof, "Redis closed the connection"));
                        break;
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        broken = Some(e);
                        break;
                    }
                };
                s.rlen += got;
                s.timeouts_in_row = 0;
                if s.rlen >= s.need {
                    if let Err(e) = take_replies(s, &mut replies) {
                        broken = Some(e);
                        break;
                    }
                }
                // A short read emptied the socket: no need for a read that would block.
                if got < room {
                    break;
                }
            }
            if s.rlen == 0 && s.rbuf.len() > 4 * READ_CHUNK {
                s.rbuf.truncate(READ_CHUNK);
                s.rbuf.shrink_to_fit();
            }
        }
        let mut replies = Some(replies);
        self.settle(|| {
            for (slot, r) in replies.take().into_iter().flatten() {
                slot.complete(r);
            }
            if let Some(e) = broken.take() {
                self.fail(e);
            }
        });
    }

    /// Fails the calls whose deadline passed and arms the timer for the next one.
    fn timer_fired(self: &Rc<Self>) {
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut s = self.s.borrow_mut();
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
            if let Some(d) = next {
                s.timer_armed = true;
                self.arm_timer((d.as_millis() as u64).max(1));
            }
        }
        if expired.is_empty() {
            return;
        }
        let retire = {
            let mut s = self.s.borrow_mut();
            s.timeouts_in_row = s.timeouts_in_row.saturating_add(expired.len() as u32);
            s.timeouts_in_row >= RETIRE_AFTER_TIMEOUTS
        };
        let mut expired = Some(expired);
        self.settle(|| {
            for slot in expired.take().into_iter().flatten() {
                // The reply, should it come, finds the slot done and is dropped.
                slot.complete(Err(io::Error::new(io::ErrorKind::TimedOut, "no reply in time").into()));
            }
            if retire {
                // The calls still waiting fail as on a dropped connection; the next ones take the
                // shared connection until a new one is up.
                self.fail(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no reply to {RETIRE_AFTER_TIMEOUTS} calls in a row: connection retired"),
                ));
            }
        });
    }

    /// Runs `f` (completing calls) in the owning environment's scope, where their Promises are
    /// settled; then writes what their continuations sent meanwhile, in one go.
    fn settle(&self, mut f: impl FnMut()) {
        struct Uncork;
        impl Drop for Uncork {
            fn drop(&mut self) {
                CORK.with(|c| c.set(false));
                let corked = CORKED.with(|c| std::mem::take(&mut *c.borrow_mut()));
                for live in &corked {
                    live.flush();
                }
            }
        }
        let was = CORK.with(|c| c.replace(true));
        let _u = (!was).then_some(Uncork);
        crate::settle::dispatch(self.owner.env, &mut f);
    }
}

/// Parses the complete replies off the front of the read buffer, pairing them with the calls
/// waiting in order. Err: the bytes are not what Redis sends (the connection must go).
fn take_replies(s: &mut State, out: &mut Vec<(Arc<Slot>, Result<Value, RedisError>)>) -> io::Result<()> {
    let mut at = 0;
    let mut res = Ok(());
    while at < s.rlen {
        match reply::parse(&s.rbuf[at..s.rlen]) {
            Ok(Parsed::Reply(v, n)) => {
                at += n;
                match s.fifo.pop_front() {
                    Some((slot, _)) => out.push((slot, v.extract_error())),
                    None => {
                        res = Err(io::Error::new(io::ErrorKind::InvalidData, "a reply nobody asked for"));
                        break;
                    }
                }
            }
            Ok(Parsed::Need(k)) => {
                s.need = k;
                break;
            }
            Err(e) => {
                res = Err(io::Error::new(io::ErrorKind::InvalidData, format!("not a Redis reply: {}", e.0)));
                break;
            }
        }
    }
    if at > 0 {
        s.rbuf.copy_within(at..s.rlen, 0);
        s.rlen -= at;
    }
    if s.rlen == 0 {
        s.need = 1;
    }
    res
}

/// How long to wait before connecting again after a failure.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(250);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(2);
