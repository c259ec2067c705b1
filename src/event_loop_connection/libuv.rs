//! The few libuv functions the connection uses, looked up in the running process.
//!
//! Node exports libuv for addons, but Node-API does not wrap these calls, so they are found by
//! name at run time. Only call [`uv`] in a process that is Node itself (see `crate::runtime`):
//! Bun exports functions of the same names that abort the process.
#![allow(unsafe_code)] // libuv functions found by name.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

pub(crate) type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
pub(crate) type TimerCb = unsafe extern "C" fn(*mut c_void);
pub(crate) type CloseCb = unsafe extern "C" fn(*mut c_void);
type HandleSizeFn = unsafe extern "C" fn(c_int) -> usize;
type PollInitFn = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int) -> c_int;
type PollStartFn = unsafe extern "C" fn(*mut c_void, c_int, PollCb) -> c_int;
type HandleFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type TimerInitFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type TimerStartFn = unsafe extern "C" fn(*mut c_void, TimerCb, u64, u64) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void, Option<CloseCb>);
type UnrefFn = unsafe extern "C" fn(*mut c_void);

/// The libuv functions used and the sizes of the handles they take.
pub(crate) struct Uv {
    pub poll_init_socket: PollInitFn,
    pub poll_start: PollStartFn,
    pub poll_stop: HandleFn,
    pub timer_init: TimerInitFn,
    pub timer_start: TimerStartFn,
    pub close: CloseFn,
    pub unref: UnrefFn,
    pub poll_size: usize,
    pub timer_size: usize,
}

const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
pub(crate) const UV_READABLE: c_int = 1;
pub(crate) const UV_WRITABLE: c_int = 2;

/// libuv, if the process exports it. Only under Node (see the module docs).
pub(crate) fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(load).as_ref()
}

/// Looks up the functions by name; each is transmuted to the signature libuv declares for it.
/// Called by [`uv`] only, under Node (see the module docs).
fn load() -> Option<Uv> {
    macro_rules! sym {
        ($name:literal, $ty:ty) => {{
            let p = crate::exported::lookup($name);
            if p.is_null() {
                return None;
            }
            // SAFETY: under Node, the symbol of this name is libuv's function, whose C
            // signature `$ty` repeats (uv.h); a function pointer has the size of a data pointer.
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        }};
    }
    let handle_size = sym!(c"uv_handle_size", HandleSizeFn);
    // SAFETY: libuv's `uv_handle_size` takes any handle type constant and only returns a size.
    let (poll_size, timer_size) = unsafe { (handle_size(UV_POLL), handle_size(UV_TIMER)) };
    if poll_size == 0 || timer_size == 0 || poll_size > 4096 || timer_size > 4096 {
        return None;
    }
    Some(Uv {
        poll_init_socket: sym!(c"uv_poll_init_socket", PollInitFn),
        poll_start: sym!(c"uv_poll_start", PollStartFn),
        poll_stop: sym!(c"uv_poll_stop", HandleFn),
        timer_init: sym!(c"uv_timer_init", TimerInitFn),
        timer_start: sym!(c"uv_timer_start", TimerStartFn),
        close: sym!(c"uv_close", CloseFn),
        unref: sym!(c"uv_unref", UnrefFn),
        poll_size,
        timer_size,
    })
}

const HANDLE_ALIGN: usize = 16;

/// A zeroed handle of `size` bytes (a size libuv reported, checked in `load`); null if out of
/// memory.
pub(crate) fn alloc_handle(size: usize) -> *mut c_void {
    match std::alloc::Layout::from_size_align(size, HANDLE_ALIGN) {
        // SAFETY: a non-zero size.
        Ok(layout) => unsafe { std::alloc::alloc_zeroed(layout).cast() },
        Err(_) => std::ptr::null_mut(),
    }
}

/// # Safety
/// `h` came from `alloc_handle(size)` and libuv is done with it (its close callback ran).
pub(crate) unsafe fn free_handle(h: *mut c_void, size: usize) {
    if let Ok(layout) = std::alloc::Layout::from_size_align(size, HANDLE_ALIGN) {
        // SAFETY: allocated by `alloc_handle` with this layout (the caller's contract).
        unsafe { std::alloc::dealloc(h.cast(), layout) }
    }
}

/// Where the `data` field of the libuv handle `h` is (its first field, public): reading or
/// writing it is the caller's unsafe step, on a handle of ours.
pub(crate) fn handle_data<T>(h: *mut c_void) -> *mut *const T {
    h.cast()
}
