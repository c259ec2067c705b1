//! libuv, found by name in the running process, and the one owner of the handles the connection
//! puts on an environment's loop: every raw libuv call of the addon is in this file.
//!
//! Node exports libuv for addons, but Node-API does not wrap these calls, so they are found by
//! name at run time, and only in a process that is Node itself (see `crate::runtime`): Bun
//! exports functions of the same names that abort the process.
//!
//! A [`Handle`] is initialised on construction and closed on drop (or by [`Handle::close`]); its
//! memory belongs to this module, which frees it when libuv's close callback says libuv is done
//! with it. libuv's callbacks all go through one function, [`fire`], which finds the handle's
//! owner by the handle's address in a registry of this thread: no callback dereferences a pointer
//! libuv hands it, so they are safe functions, and the callers of this module are safe code.
#![allow(unsafe_code)] // libuv functions found by name, called on handles this module owns.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::sync::OnceLock;

use napi::Env;

/// What a handle reports to its owner, on its loop's thread.
pub(crate) enum Event {
    /// The socket of a poll handle is ready (`status` < 0: libuv reports an error).
    Poll { status: c_int, readable: bool, writable: bool },
    /// A timer handle's time came.
    Timer,
    /// libuv closed the handle; nothing follows.
    Closed,
}

/// The callbacks libuv is given: safe functions (they use the handle's address as a key only).
type PollCb = extern "C" fn(*mut c_void, c_int, c_int);
type HandleCb = extern "C" fn(*mut c_void);

/// Declares the libuv functions used, each with the C signature uv.h gives it, and their lookup.
macro_rules! libuv_functions {
    ($($field:ident = $name:literal: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The C signature of each function.
        #[allow(non_camel_case_types)]
        mod signature {
            use super::*;
            $(pub(super) type $field = unsafe extern "C" fn($($arg),*) $(-> $ret)?;)*
        }

        struct Functions {
            $($field: signature::$field,)*
        }

        /// Looks up every function by name; None if one is missing.
        fn functions() -> Option<Functions> {
            Some(Functions {
                $($field: {
                    let p = crate::exported::lookup($name);
                    if p.is_null() {
                        return None;
                    }
                    // SAFETY: under Node (the only caller, see the module docs), the symbol of
                    // this name is libuv's function, whose C signature the field's type repeats
                    // (uv.h); a function pointer has the size of a data pointer.
                    unsafe { std::mem::transmute::<*mut c_void, signature::$field>(p) }
                },)*
            })
        }
    };
}

libuv_functions! {
    handle_size = c"uv_handle_size": fn(c_int) -> usize;
    poll_init_socket = c"uv_poll_init_socket": fn(*mut c_void, *mut c_void, c_int) -> c_int;
    poll_start = c"uv_poll_start": fn(*mut c_void, c_int, PollCb) -> c_int;
    timer_init = c"uv_timer_init": fn(*mut c_void, *mut c_void) -> c_int;
    timer_start = c"uv_timer_start": fn(*mut c_void, HandleCb, u64, u64) -> c_int;
    close = c"uv_close": fn(*mut c_void, Option<HandleCb>);
    unref = c"uv_unref": fn(*mut c_void);
}

/// The libuv functions used and the sizes of the handles they take.
struct Uv {
    f: Functions,
    poll_size: usize,
    timer_size: usize,
}

const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

/// libuv, if the process is Node and exports it.
fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
        if !crate::runtime::is_node() {
            return None;
        }
        let f = functions()?;
        // SAFETY: libuv's `uv_handle_size` takes any handle type constant and only returns a size.
        let (poll_size, timer_size) = unsafe { ((f.handle_size)(UV_POLL), (f.handle_size)(UV_TIMER)) };
        let fits = |n: usize| n > 0 && n <= 4096;
        (fits(poll_size) && fits(timer_size)).then_some(Uv { f, poll_size, timer_size })
    })
    .as_ref()
}

/// The libuv loop of an environment, used on its JavaScript thread only (the type is neither
/// `Send` nor `Sync`).
#[derive(Clone, Copy)]
pub(crate) struct Loop {
    raw: *mut c_void,
    uv: &'static Uv,
}

impl Loop {
    /// The loop of `env`; None where the process is not Node, or lacks libuv.
    pub(crate) fn of(env: &Env) -> Option<Loop> {
        let uv = uv()?;
        let raw = env.get_uv_event_loop().ok()?.cast::<c_void>();
        (!raw.is_null()).then_some(Loop { raw, uv })
    }
}

/// The memory of one handle, 16-byte aligned and zeroed: libuv holds its address from `init`
/// to the close callback, so it is freed only when the registry drops it (after that callback,
/// or when the handle was never initialised).
struct Memory(*mut [u128]);

impl Memory {
    fn new(size: usize) -> Memory {
        Memory(Box::into_raw(vec![0u128; size.div_ceil(16)].into_boxed_slice()))
    }
    fn ptr(&self) -> *mut c_void {
        self.0.cast()
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` in `new`, freed once (here), when libuv no longer
        // holds it (see the type's docs).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// A handle's owner: told of each event, on the loop's thread.
type Owner = Rc<dyn Fn(Event)>;

struct Entry {
    key: usize,
    /// Held for its drop, which frees it.
    _memory: Memory,
    owner: Owner,
}

/// The open handles of one thread's loops (a few per environment).
struct Registry(Vec<Entry>);

impl Drop for Registry {
    fn drop(&mut self) {
        // The thread ends with handles open (a process that exits without its environments'
        // teardown): libuv may still hold them, so their memory and owners are left.
        if !self.0.is_empty() {
            std::mem::forget(std::mem::take(&mut self.0));
        }
    }
}

thread_local! {
    /// This thread's handles, by address.
    static HANDLES: RefCell<Registry> = const { RefCell::new(Registry(Vec::new())) };
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Poll(c_int),
    Timer,
}

/// What [`Handle::start`] starts: a poll for these events, a timer for these milliseconds.
enum Start {
    Poll(c_int),
    Timer(u64),
}

/// One libuv handle on a loop, owned: open from construction to [`Handle::close`] or drop.
/// Neither `Send` nor `Sync`: used on its loop's thread only.
pub(crate) struct Handle {
    ptr: *mut c_void,
    uv: &'static Uv,
    kind: Kind,
    closed: Cell<bool>,
}

impl Handle {
    /// A poll handle watching the socket `fd`, which must stay open until the handle is closed;
    /// `owner` gets its events. The handle does not keep the loop alive.
    pub(crate) fn poll(lp: &Loop, fd: c_int, owner: impl Fn(Event) + 'static) -> Option<Handle> {
        Handle::init(lp, Kind::Poll(fd), Rc::new(owner))
    }

    /// A timer handle; `owner` gets its events. The handle does not keep the loop alive.
    pub(crate) fn timer(lp: &Loop, owner: impl Fn(Event) + 'static) -> Option<Handle> {
        Handle::init(lp, Kind::Timer, Rc::new(owner))
    }

    fn init(lp: &Loop, kind: Kind, owner: Owner) -> Option<Handle> {
        let uv = lp.uv;
        let memory = Memory::new(if kind == Kind::Timer { uv.timer_size } else { uv.poll_size });
        let ptr = memory.ptr();
        // Registered first, so that the close callback always finds it.
        let registered = HANDLES
            .try_with(|h| {
                h.try_borrow_mut()
                    .map(|mut h| h.0.push(Entry { key: ptr as usize, _memory: memory, owner }))
                    .is_ok()
            })
            .unwrap_or(false);
        if !registered {
            return None;
        }
        // SAFETY: zeroed memory of the size libuv gave for this handle type, which stays put
        // until libuv's close callback (the registry owns it); `lp` is a live loop of this
        // thread (a `Loop` is made from its env and never leaves the thread).
        let ok = unsafe {
            let rc = match kind {
                Kind::Poll(fd) => (uv.f.poll_init_socket)(lp.raw, ptr, fd),
                Kind::Timer => (uv.f.timer_init)(lp.raw, ptr),
            };
            if rc == 0 {
                (uv.f.unref)(ptr);
            }
            rc == 0
        };
        if !ok {
            // Never initialised: libuv does not know it, so it goes at once.
            let _ = HANDLES.try_with(|h| h.try_borrow_mut().map(|mut h| remove(&mut h.0, ptr as usize)));
            return None;
        }
        Some(Handle { ptr, uv, kind, closed: Cell::new(false) })
    }

    /// Watches the socket of a poll handle for reads, and for writes too if `writable`; false if
    /// libuv refused (or the handle is closed, or not a poll handle).
    pub(crate) fn watch(&self, writable: bool) -> bool {
        self.start(Start::Poll(if writable { UV_READABLE | UV_WRITABLE } else { UV_READABLE }))
    }

    /// Starts a timer handle: one `Timer` event after `ms` milliseconds (replacing the one
    /// pending); false if libuv refused (or the handle is closed, or not a timer).
    pub(crate) fn arm(&self, ms: u64) -> bool {
        self.start(Start::Timer(ms))
    }

    fn start(&self, how: Start) -> bool {
        if self.closed.get() || matches!(self.kind, Kind::Timer) != matches!(how, Start::Timer(_)) {
            return false;
        }
        // SAFETY: an open handle of this module (state checked) of the kind the call takes
        // (checked), on its loop's thread (a `Handle` never leaves it).
        let rc = unsafe {
            match how {
                Start::Poll(events) => (self.uv.f.poll_start)(self.ptr, events, on_poll),
                Start::Timer(ms) => (self.uv.f.timer_start)(self.ptr, on_timer, ms, 0),
            }
        };
        rc == 0
    }

    /// Closes the handle (once; later calls do nothing): no event but `Closed` follows, which
    /// comes from a later turn of the loop.
    pub(crate) fn close(&self) {
        if self.closed.replace(true) {
            return;
        }
        // SAFETY: an open handle of this module, closed once (the flag), on its loop's thread.
        // Closing stops it, and its memory stays until the close callback.
        unsafe { (self.uv.f.close)(self.ptr, Some(on_close)) }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.close();
    }
}

fn remove(entries: &mut Vec<Entry>, key: usize) -> Option<Entry> {
    let at = entries.iter().position(|e| e.key == key)?;
    Some(entries.swap_remove(at))
}

extern "C" fn on_poll(h: *mut c_void, status: c_int, events: c_int) {
    fire(h, Event::Poll { status, readable: events & UV_READABLE != 0, writable: events & UV_WRITABLE != 0 });
}

extern "C" fn on_timer(h: *mut c_void) {
    fire(h, Event::Timer);
}

extern "C" fn on_close(h: *mut c_void) {
    fire(h, Event::Closed);
}

/// Every libuv callback: tells the owner of the handle at `h` (found in the registry; a handle
/// not there is ignored). After `Closed` the entry leaves the registry and the memory is freed.
/// A panic stops here: unwinding into libuv would abort Node.
fn fire(h: *mut c_void, event: Event) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let key = h as usize;
        let closed = matches!(event, Event::Closed);
        let found = HANDLES.try_with(|h| {
            let mut h = h.try_borrow_mut().ok()?;
            if closed {
                remove(&mut h.0, key).map(|e| (e.owner.clone(), Some(e)))
            } else {
                h.0.iter().find(|e| e.key == key).map(|e| (e.owner.clone(), None))
            }
        });
        // The registry is not borrowed while the owner runs (it may open or close handles).
        if let Ok(Some((owner, entry))) = found {
            owner(event);
            drop(entry);
        }
    }));
}
