//! Settling Promises of calls that finish on a tokio thread (Redis round trips, lock waits)
//! through ONE threadsafe function per JavaScript environment.
//!
//! napi-rs's `spawn_future_with_callback` creates, for every call, a threadsafe function (a libuv
//! async handle, closed again afterwards) plus env cleanup hooks, and spawns two tokio tasks. On a
//! loopback Redis round trip of tens of microseconds that bookkeeping is a measurable share (see
//! BENCHMARKS.md). Here each environment (the main thread, or a worker thread) has one
//! threadsafe function, made on first use and kept: a finished call queues its settlement on it,
//! and Node runs the queued settlements in a batch on each wake of the JavaScript thread. The
//! function is referenced (keeps the event loop alive) exactly while calls are pending, so an
//! idle process still exits.
//!
//! Teardown: an env cleanup hook, registered after the threadsafe function (hooks run in reverse
//! order, so before Node finalizes it), marks it gone under a write lock; tokio threads call it
//! only under the read lock of that mark, so none calls a finalized function. Settlements queued
//! but not run by then are dropped (their env is gone), as napi-rs does.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::ptr::null_mut;
use std::rc::Rc;
use std::sync::{Arc, RwLock};

use napi::bindgen_prelude::*;
use napi::sys;
use napi::Env;

type Job = Box<dyn FnOnce(sys::napi_env) + Send>;

/// The part tokio threads hold.
struct Shared {
    /// The threadsafe function (as an address); None once the environment is torn down.
    tsfn: RwLock<Option<usize>>,
}

impl Shared {
    fn send(&self, job: Job) {
        let guard = self.tsfn.read().unwrap_or_else(|p| p.into_inner());
        let Some(tsfn) = *guard else { return };
        let data = Box::into_raw(Box::new(job));
        // SAFETY: the function is alive while `tsfn` is Some (the teardown hook takes the write
        // lock before Node finalizes it); nonblocking with an unbounded queue never waits.
        let status = unsafe {
            sys::napi_call_threadsafe_function(tsfn as sys::napi_threadsafe_function, data.cast(), sys::ThreadsafeFunctionCallMode::nonblocking)
        };
        if status != sys::Status::napi_ok {
            // SAFETY: not queued, so still ours.
            drop(unsafe { Box::from_raw(data) });
        }
    }
}

/// The part the JavaScript thread keeps.
struct Local {
    env: sys::napi_env,
    tsfn: sys::napi_threadsafe_function,
    pending: Cell<usize>,
    shared: Arc<Shared>,
}

thread_local! {
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(Status::from(status), format!("napi: {what} failed")))
    }
}

unsafe extern "C" fn call_js(env: sys::napi_env, _cb: sys::napi_value, _ctx: *mut c_void, data: *mut c_void) {
    // SAFETY: `data` is a `Box<Job>` leaked by `Shared::send`.
    let job = unsafe { Box::from_raw(data as *mut Job) };
    if env.is_null() {
        return; // the function is being torn down: only free the data
    }
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| job(env)));
    let _ = LOCAL.try_with(|cell| {
        if let Some(l) = &*cell.borrow() {
            if l.env == env {
                let n = l.pending.get().saturating_sub(1);
                l.pending.set(n);
                if n == 0 {
                    // SAFETY: on the JavaScript thread of `env`, the function is alive.
                    unsafe { sys::napi_unref_threadsafe_function(env, l.tsfn) };
                }
            }
        }
    });
}

unsafe extern "C" fn teardown(arg: *mut c_void) {
    // SAFETY: the hook owns the `Arc` leaked for it in `local`.
    let shared = unsafe { Arc::from_raw(arg as *const Shared) };
    *shared.tsfn.write().unwrap_or_else(|p| p.into_inner()) = None;
    let _ = LOCAL.try_with(|cell| {
        let mut c = cell.borrow_mut();
        if c.as_ref().is_some_and(|l| Arc::ptr_eq(&l.shared, &shared)) {
            *c = None;
        }
    });
}

fn local(env: sys::napi_env) -> napi::Result<Rc<Local>> {
    LOCAL.with(|cell| {
        if let Some(l) = &*cell.borrow() {
            if l.env == env {
                return Ok(l.clone());
            }
        }
        let mut name = null_mut();
        let mut tsfn = null_mut();
        // SAFETY: on the JavaScript thread with the live env of this call.
        unsafe {
            check(sys::napi_create_string_utf8(env, c"flowguard".as_ptr(), 9, &mut name), "create a string")?;
            check(
                sys::napi_create_threadsafe_function(env, null_mut(), null_mut(), name, 0, 1, null_mut(), None, null_mut(), Some(call_js), &mut tsfn),
                "create a threadsafe function",
            )?;
            check(sys::napi_unref_threadsafe_function(env, tsfn), "unref a threadsafe function")?;
        }
        let shared = Arc::new(Shared { tsfn: RwLock::new(Some(tsfn as usize)) });
        let hook = Arc::into_raw(shared.clone());
        // SAFETY: as above; on failure the hook never runs, so take its Arc back.
        if let Err(e) = check(unsafe { sys::napi_add_env_cleanup_hook(env, Some(teardown), hook as *mut c_void) }, "add a cleanup hook") {
            drop(unsafe { Arc::from_raw(hook) });
            return Err(e);
        }
        let l = Rc::new(Local { env, tsfn, pending: Cell::new(0), shared });
        *cell.borrow_mut() = Some(l.clone());
        Ok(l)
    })
}

/// A Promise settled with `fut`'s outcome, which runs as one task on the tokio runtime.
pub(crate) fn spawn<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
{
    let raw = env.raw();
    let l = local(raw)?;
    let mut deferred = null_mut();
    let mut promise = null_mut();
    // SAFETY: on the JavaScript thread with the live env of this call.
    unsafe { check(sys::napi_create_promise(raw, &mut deferred, &mut promise), "create a promise")? };
    if l.pending.get() == 0 {
        // SAFETY: as above.
        unsafe { check(sys::napi_ref_threadsafe_function(raw, l.tsfn), "ref a threadsafe function")? };
    }
    l.pending.set(l.pending.get() + 1);
    let shared = l.shared.clone();
    let deferred = deferred as usize;
    napi::bindgen_prelude::spawn(async move {
        let outcome = fut.await;
        shared.send(Box::new(move |env| {
            // SAFETY: run by `call_js` on the JavaScript thread of the env that made `deferred`.
            let _ = unsafe { super::settle_deferred(env, deferred as sys::napi_deferred, outcome) };
        }));
    });
    Ok(PromiseRaw::new(raw, promise))
}
