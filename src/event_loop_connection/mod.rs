//! A Redis connection driven by a JavaScript environment's own event loop (libuv), for the lock
//! scripts its calls run: the core's `transport` extension point, implemented for Node.
//!
//! Through redis-rs, a call made from JavaScript crosses threads twice: the JavaScript thread
//! hands the command to the tokio worker that owns the socket (waking it), and the reply comes
//! back through a threadsafe function (waking the JavaScript thread). Here the command is written
//! to the socket during the JavaScript call itself, and the reply is read, and the call's Promise
//! settled, by a poll callback of the same loop: no thread is woken but the one Redis answers.
//! Commands that several settlements issue in one callback (their continuations run in its
//! microtask checkpoint) go out together.
//!
//! State is kept per environment ([`Connections`], owned by the environment's entry in
//! `settle`), not per thread: two environments on one thread each have their own connections
//! and their own teardown. The endpoint declines (the store uses redis-rs) in a process that is
//! not Node itself (see `crate::runtime`), while this environment's connection is being set up
//! (in the background) or after it broke (it is set up again, with backoff). TCP and Unix
//! sockets, RESP2; TLS and RESP3 URLs never use it, nor does any platform but Unix.
//! `FLOWGUARD_REDIS_JS_LOOP=0` turns it off.

mod libuv;
mod live;
mod reply;
mod socket;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowguard_core::backend::redis::transport::{self, Endpoint, Reply, Transport};
use napi::{sys, Env};
use redis::{ConnectionAddr, ConnectionInfo};

use live::{Live, FIRST_BACKOFF, MAX_BACKOFF};
use socket::{Addr, Settings, Sock};

/// Installs the transport in the core (once per process; before any store connects).
pub(crate) fn install() {
    static TRANSPORT: EventLoopTransport = EventLoopTransport;
    transport::install(&TRANSPORT);
}

struct EventLoopTransport;

impl Transport for EventLoopTransport {
    fn endpoint(
        &self,
        info: &ConnectionInfo,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Option<Arc<dyn Endpoint>> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        if std::env::var("FLOWGUARD_REDIS_JS_LOOP").is_ok_and(|v| v == "0") {
            return None;
        }
        let settings = info.redis_settings();
        if settings.protocol() != redis::ProtocolVersion::RESP2 {
            return None;
        }
        let addr = match info.addr() {
            ConnectionAddr::Tcp(h, p) => Addr::Tcp(h.clone(), *p),
            ConnectionAddr::Unix(p) => Addr::Unix(p.clone()),
            _ => return None,
        };
        Some(Arc::new(Server {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            alive: Arc::new(()),
            settings: Arc::new(Settings {
                addr,
                username: settings.username().map(str::to_string),
                password: settings.password().map(str::to_string),
                db: settings.db(),
                connect_timeout: connect_timeout.max(Duration::from_millis(1)),
                command_timeout: command_timeout.max(Duration::from_millis(1)),
            }),
        }))
    }
}

/// One pooled server; each environment that calls it gets a connection of its own.
struct Server {
    id: usize,
    /// Held while the pooled connection is: an environment's connection whose server has gone
    /// (its last client closed) is closed when the environment next connects somewhere.
    alive: Arc<()>,
    settings: Arc<Settings>,
}

impl Endpoint for Server {
    fn send(&self, cmd: &redis::Cmd) -> Option<Reply> {
        let conns = crate::settle::current_connections()?;
        let reply = conns.live(self)?.send(cmd)?;
        crate::settle::io_started();
        Some(Box::pin(reply))
    }
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

/// The connections of one environment, on its loop.
pub(crate) struct Connections {
    env: sys::napi_env,
    lp: libuv::Loop,
    conns: RefCell<HashMap<usize, Entry>>,
    /// The server of each entry of `conns`, held weakly.
    servers: RefCell<HashMap<usize, std::sync::Weak<()>>>,
    /// libuv handles not closed yet (a teardown finishes when none is left).
    open: Cell<usize>,
    /// The teardown in progress, finished once every handle is closed.
    teardown: Cell<Option<crate::node_api::Teardown>>,
    torn_down: Cell<bool>,
}

impl Connections {
    /// Connections for `env`; None where this transport must not run (not Node itself, no
    /// libuv, or Node would not register the teardown).
    pub(crate) fn new(env: &Env) -> Option<Rc<Connections>> {
        let lp = libuv::Loop::of(env)?;
        let conns = Rc::new(Connections {
            env: env.raw(),
            lp,
            conns: RefCell::new(HashMap::new()),
            servers: RefCell::new(HashMap::new()),
            open: Cell::new(0),
            teardown: Cell::new(None),
            torn_down: Cell::new(false),
        });
        let hooked = conns.clone();
        crate::node_api::on_teardown(env, move |done| on_teardown(&hooked, done)).ok()?;
        Some(conns)
    }

    /// This environment's live connection to `server`, starting (or picking up) one when needed.
    fn live(self: &Rc<Self>, server: &Server) -> Option<Rc<Live>> {
        if self.torn_down.get() {
            return None;
        }
        let mut conns = self.conns.try_borrow_mut().ok()?;
        if !conns.contains_key(&server.id) {
            let mut servers = self.servers.try_borrow_mut().ok()?;
            sweep(&mut conns, &mut servers);
            servers.insert(server.id, Arc::downgrade(&server.alive));
        }
        let entry =
            conns.entry(server.id).or_insert(Entry::Down { at: Instant::now(), backoff: Duration::ZERO });
        if matches!(entry, Entry::Live(l) if l.is_dead()) {
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
                let (settings, landed) = (server.settings.clone(), slot.clone());
                let spawned = std::thread::Builder::new().name("flowguard-connect".into()).spawn(move || {
                    let res = socket::connect(&settings);
                    *landed.lock().unwrap_or_else(|p| p.into_inner()) = Some(res);
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
                    Some(Ok(sock)) => match Live::start(self, server.settings.clone(), sock) {
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
    }

    /// `live` broke: the next calls use redis-rs until a new connection is up.
    fn broke(&self, live: &Rc<Live>) {
        if let Ok(mut conns) = self.conns.try_borrow_mut() {
            for e in conns.values_mut() {
                if matches!(e, Entry::Live(l) if Rc::ptr_eq(l, live)) {
                    *e = Entry::Down { at: Instant::now(), backoff: FIRST_BACKOFF };
                }
            }
        }
    }

    fn opened(&self) {
        self.open.set(self.open.get() + 1);
    }

    /// A handle finished closing; the last one after a teardown releases it.
    fn closed(&self) {
        let left = self.open.get().saturating_sub(1);
        self.open.set(left);
        if left == 0 {
            self.finish_teardown();
        }
    }

    fn finish_teardown(&self) {
        drop(self.teardown.take());
    }
}

/// Closes the connections of servers no pooled connection holds any more (each new server
/// sweeps, so their number stays that of the servers in use).
fn sweep(conns: &mut HashMap<usize, Entry>, servers: &mut HashMap<usize, std::sync::Weak<()>>) {
    servers.retain(|id, alive| {
        if alive.strong_count() > 0 {
            return true;
        }
        if let Some(Entry::Live(l)) = conns.remove(id) {
            l.shut();
        }
        false
    });
}

/// The environment goes away: close every handle; tell Node once libuv has closed them.
fn on_teardown(conns: &Connections, done: crate::node_api::Teardown) {
    conns.torn_down.set(true);
    let lives: Vec<Rc<Live>> = match conns.conns.try_borrow_mut() {
        Ok(mut c) => c
            .drain()
            .filter_map(|(_, e)| match e {
                Entry::Live(l) => Some(l),
                _ => None,
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    for live in &lives {
        live.shut();
    }
    // Handles closed here, or earlier by a failure, may still be closing (their close callbacks
    // come in a later turn of the loop): finish after the last. Should the above panic, `done`
    // goes with the unwinding, and Node is told at once.
    if conns.open.get() > 0 {
        conns.teardown.set(Some(done));
    }
}
