//! Settling Promises of calls that do not finish at once (Redis round trips, lock waits).
//!
//! napi-rs's `spawn_future_with_callback` creates, for every call, a threadsafe function (a libuv
//! async handle, closed again afterwards) plus env cleanup hooks, and spawns two tokio tasks. On a
//! loopback Redis round trip of tens of microseconds that bookkeeping is a measurable share (see
//! BENCHMARKS.md). Here each environment (the main thread, a worker thread, or another instance
//! of the addon) has one threadsafe function, made on first use and kept, and a call goes one of
//! two ways:
//!
//! - A call that sent its command over the environment's own Redis connection (driven by its
//!   event loop, see `crate::event_loop_connection`) stays on this thread: it is kept here as
//!   a task and polled again when its reply arrives, by the loop's poll callback, which then
//!   settles the Promise and runs the microtask checkpoint: no thread hop at all. Should the task
//!   wait on something else (a timer of a lock wait), the wake-up comes through the threadsafe
//!   function.
//! - Any other call runs as one task on the tokio runtime; when it finishes it queues its
//!   settlement on the threadsafe function, and Node runs the queued settlements in a batch on
//!   each wake of the JavaScript thread.
//!
//! The threadsafe function is referenced (keeps the event loop alive) exactly while calls are
//! pending, so an idle process still exits.
//!
//! Everything is kept per environment, never per thread: Node may run several environments of
//! the addon on one thread (each `process.dlopen` of it is one), and each keeps its own calls,
//! connections and teardown.
//!
//! Teardown: an env cleanup hook, registered after the threadsafe function (hooks run in reverse
//! order, so before Node finalizes it), marks it gone under a write lock and drops the tasks kept
//! here; tokio threads call it only under the read lock of that mark, so none calls a finalized
//! function. Settlements queued but not run by then are dropped (their env is gone), as napi-rs
//! does.
#![allow(unsafe_code)] // Node-API threadsafe functions, promises and scopes napi-rs wraps only with more work per call.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::ptr::null_mut;
use std::rc::Rc;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Wake, Waker};

use napi::bindgen_prelude::*;
use napi::sys;
use napi::Env;

#[cfg(unix)]
use crate::event_loop_connection::Connections;

type Job = Box<dyn FnOnce(sys::napi_env) + Send>;

/// The part other threads hold.
struct Shared {
    /// The threadsafe function (as an address); None once the environment is torn down.
    tsfn: RwLock<Option<usize>>,
    /// Tasks kept on the JavaScript thread that were woken from another thread.
    woken: Mutex<Vec<usize>>,
}

impl Shared {
    fn send(&self, job: Job) {
        let guard = self.tsfn.read().unwrap_or_else(|p| p.into_inner());
        let Some(tsfn) = *guard else { return };
        let data = Box::into_raw(Box::new(job));
        // SAFETY: the function is alive while `tsfn` is Some (the teardown hook takes the write
        // lock before Node finalizes it); nonblocking with an unbounded queue never waits. The
        // queued `data` is `call_js`'s to free; one not queued is still ours.
        unsafe {
            let status = sys::napi_call_threadsafe_function(
                tsfn as sys::napi_threadsafe_function,
                data.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            );
            if status != sys::Status::napi_ok {
                drop(Box::from_raw(data));
            }
        }
    }
}

/// A call kept on the JavaScript thread: its future settles its Promise when it ends.
struct Task {
    fut: Pin<Box<dyn Future<Output = ()>>>,
    waker: Waker,
}

/// The part the JavaScript thread keeps, one per environment.
struct Local {
    env: sys::napi_env,
    tsfn: sys::napi_threadsafe_function,
    pending: Cell<usize>,
    shared: Arc<Shared>,
    /// For the callback scope in which the loop's callbacks settle Promises (null: none).
    async_ctx: sys::napi_async_context,
    /// The environment's event-loop Redis connections; None where they cannot be used.
    #[cfg(unix)]
    connections: Option<Rc<Connections>>,
    tasks: RefCell<Vec<Option<Task>>>,
    free: RefCell<Vec<usize>>,
    /// Tasks to poll (woken on this thread).
    ready: RefCell<Vec<usize>>,
    spare: RefCell<Vec<usize>>,
}

impl Local {
    fn keeps_tasks(&self) -> bool {
        #[cfg(unix)]
        return self.connections.is_some();
        #[cfg(not(unix))]
        false
    }
}

thread_local! {
    /// The environments of this thread (usually one).
    static LOCALS: RefCell<Vec<Rc<Local>>> = const { RefCell::new(Vec::new()) };
    /// The environment whose call is being polled on this thread (null: none).
    static CURRENT: Cell<sys::napi_env> = const { Cell::new(null_mut()) };
    /// The `Shared` (as an address) of the environment whose tasks this thread is polling or
    /// about to poll: a wake-up of one of them here only marks it ready. 0: none.
    static DRAINING: Cell<usize> = const { Cell::new(0) };
    /// Set when the call being polled sent a command over its environment's own connection.
    static IO_STARTED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (the first poll of a call of `env`) with `env` as the current environment, so that
/// its commands may go over the environment's own connection.
pub(crate) fn in_env<R>(env: &Env, f: impl FnOnce() -> R) -> R {
    IO_STARTED.with(|started| started.set(false));
    let prev = CURRENT.with(|c| c.replace(env.raw()));
    struct Restore(sys::napi_env);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = CURRENT.try_with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(prev);
    f()
}

/// The connections of the environment whose call is being polled on this thread.
#[cfg(unix)]
pub(crate) fn current_connections() -> Option<Rc<Connections>> {
    let env = CURRENT.try_with(Cell::get).ok()?;
    if env.is_null() {
        return None;
    }
    local(env).ok()?.connections.clone()
}

/// Tells `spawn` that the call being polled sent a command over its environment's connection,
/// so its task stays on this thread.
#[cfg(unix)]
pub(crate) fn io_started() {
    let _ = IO_STARTED.try_with(|f| f.set(true));
}

struct TaskWake {
    id: usize,
    shared: Arc<Shared>,
}

impl Wake for TaskWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let here = Arc::as_ptr(&self.shared) as usize;
        if DRAINING.try_with(Cell::get).unwrap_or(0) == here {
            let marked = LOCALS
                .try_with(|cell| {
                    let Ok(locals) = cell.try_borrow() else { return false };
                    match locals.iter().find(|l| Arc::ptr_eq(&l.shared, &self.shared)) {
                        Some(l) => l.ready.try_borrow_mut().map(|mut r| r.push(self.id)).is_ok(),
                        None => false,
                    }
                })
                .unwrap_or(false);
            if marked {
                return;
            }
        }
        let first = {
            let mut w = self.shared.woken.lock().unwrap_or_else(|p| p.into_inner());
            w.push(self.id);
            w.len() == 1
        };
        if first {
            self.shared.send(Box::new(run_woken));
        }
    }
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
}

/// The `Local` of `env`, if this thread has one.
fn local_of(env: sys::napi_env) -> Option<Rc<Local>> {
    LOCALS.try_with(|cell| cell.try_borrow().ok()?.iter().find(|l| l.env == env).cloned()).ok().flatten()
}

/// One pending call of `l` is over.
fn finished(l: &Local) {
    let n = l.pending.get().saturating_sub(1);
    l.pending.set(n);
    if n == 0 {
        let _ = keep_alive(l, false);
    }
}

/// Whether the threadsafe function of `l` keeps the event loop alive (while calls are pending).
fn keep_alive(l: &Local, on: bool) -> napi::Result<()> {
    // SAFETY: on the JavaScript thread of `l.env` (a `Local` never leaves it), whose function is
    // alive while its `Local` is.
    let status = unsafe {
        if on {
            sys::napi_ref_threadsafe_function(l.env, l.tsfn)
        } else {
            sys::napi_unref_threadsafe_function(l.env, l.tsfn)
        }
    };
    check(status, "ref or unref a threadsafe function")
}

/// Polls the ready tasks of `l` until none is left. On its JavaScript thread, in a scope where
/// Promises may be settled.
fn drain(l: &Rc<Local>) {
    let prev = DRAINING.with(|d| d.replace(Arc::as_ptr(&l.shared) as usize));
    let prev_env = CURRENT.with(|c| c.replace(l.env));
    let run = || loop {
        let mut ids = std::mem::take(&mut *l.spare.borrow_mut());
        std::mem::swap(&mut ids, &mut *l.ready.borrow_mut());
        if ids.is_empty() {
            *l.spare.borrow_mut() = ids;
            break;
        }
        for &id in &ids {
            let Some(mut task) = l.tasks.borrow_mut().get_mut(id).and_then(Option::take) else { continue };
            let mut cx = Context::from_waker(&task.waker);
            let polled = std::panic::catch_unwind(AssertUnwindSafe(|| task.fut.as_mut().poll(&mut cx)));
            IO_STARTED.with(|f| f.set(false));
            match polled {
                Ok(Poll::Pending) => l.tasks.borrow_mut()[id] = Some(task),
                // Done (a panic here is past the call's own catch: its Promise stays pending).
                _ => {
                    l.free.borrow_mut().push(id);
                    finished(l);
                }
            }
        }
        ids.clear();
        *l.spare.borrow_mut() = ids;
    };
    // Inside the runtime's context (timers, spawns); without it should the runtime be gone
    // (napi-rs's accessor panics then, and this may run in a libuv callback, which must not).
    if std::panic::catch_unwind(AssertUnwindSafe(|| napi::bindgen_prelude::within_runtime_if_available(run)))
        .is_err()
    {
        run();
    }
    CURRENT.with(|c| c.set(prev_env));
    DRAINING.with(|d| d.set(prev));
}

/// Run by the threadsafe function: polls the tasks woken from other threads.
fn run_woken(env: sys::napi_env) {
    let Some(l) = local_of(env) else { return };
    let woken = std::mem::take(&mut *l.shared.woken.lock().unwrap_or_else(|p| p.into_inner()));
    l.ready.borrow_mut().extend(woken);
    drain(&l);
}

/// The env cleanup hook (see the module docs).
fn teardown(shared: Arc<Shared>) {
    *shared.tsfn.write().unwrap_or_else(|p| p.into_inner()) = None;
    let gone = LOCALS.try_with(|cell| {
        let mut locals = cell.borrow_mut();
        let at = locals.iter().position(|l| Arc::ptr_eq(&l.shared, &shared))?;
        Some(locals.swap_remove(at))
    });
    // The kept tasks (and their futures) go with it; other environments of this thread stay.
    if let Ok(Some(l)) = gone {
        let tasks = std::mem::take(&mut *l.tasks.borrow_mut());
        drop(tasks);
    }
}

fn local(env: sys::napi_env) -> napi::Result<Rc<Local>> {
    if let Some(l) = local_of(env) {
        return Ok(l);
    }
    let name = Env::from_raw(env).create_string("flowguard")?.raw();
    let mut tsfn = null_mut();
    // An async context, for the scope in which the event-loop connection settles calls: without
    // it, calls simply take the tokio path.
    let mut async_ctx = null_mut();
    // SAFETY: on the JavaScript thread with the live env of this call; each call writes only
    // through the pointer it is given.
    let status = unsafe {
        let mut status = sys::napi_create_threadsafe_function(
            env,
            null_mut(),
            null_mut(),
            name,
            0,
            1,
            null_mut(),
            None,
            null_mut(),
            Some(call_js),
            &mut tsfn,
        );
        if status == sys::Status::napi_ok {
            status = sys::napi_unref_threadsafe_function(env, tsfn);
        }
        if status == sys::Status::napi_ok
            && sys::napi_async_init(env, null_mut(), name, &mut async_ctx) != sys::Status::napi_ok
        {
            async_ctx = null_mut();
        }
        status
    };
    check(status, "create a threadsafe function")?;
    let shared = Arc::new(Shared { tsfn: RwLock::new(Some(tsfn as usize)), woken: Mutex::new(Vec::new()) });
    Env::from_raw(env).add_env_cleanup_hook(shared.clone(), teardown)?;
    #[cfg(unix)]
    let connections = if async_ctx.is_null() {
        None
    } else {
        // Registered after the cleanup hook above, so it runs before it (reverse order).
        Connections::new(&Env::from_raw(env))
    };
    let l = Rc::new(Local {
        env,
        tsfn,
        pending: Cell::new(0),
        shared,
        async_ctx,
        #[cfg(unix)]
        connections,
        tasks: RefCell::new(Vec::new()),
        free: RefCell::new(Vec::new()),
        ready: RefCell::new(Vec::new()),
        spare: RefCell::new(Vec::new()),
    });
    LOCALS.with(|cell| cell.borrow_mut().push(l.clone()));
    Ok(l)
}

/// A Promise settled with `fut`'s outcome: kept on this thread when its first poll (just made by
/// the caller, inside [`in_env`]) sent a command over this environment's own Redis connection,
/// else one task on tokio.
pub(crate) fn spawn<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = flowguard_core::Result<T>> + Send + 'static,
{
    let raw = env.raw();
    let keep_here = IO_STARTED.with(|f| f.replace(false));
    let l = local(raw)?;
    let (deferred, promise) = crate::node_api::promise(env)?;
    if l.pending.get() == 0 {
        keep_alive(&l, true)?;
    }
    l.pending.set(l.pending.get() + 1);
    if keep_here && l.keeps_tasks() {
        let task = Box::pin(async move {
            let outcome = fut.await;
            // Polled only on the JavaScript thread of the env that made `deferred`, in a scope
            // where Promises may be settled.
            let _ = super::settle_deferred(deferred, outcome);
        });
        let id = l.free.borrow_mut().pop().unwrap_or_else(|| {
            let mut t = l.tasks.borrow_mut();
            t.push(None);
            t.len() - 1
        });
        let waker = Waker::from(Arc::new(TaskWake { id, shared: l.shared.clone() }));
        l.tasks.borrow_mut()[id] = Some(Task { fut: task, waker });
        // Poll it now, so it waits on its reply with its own waker.
        l.ready.borrow_mut().push(id);
        drain(&l);
    } else {
        let shared = l.shared.clone();
        napi::bindgen_prelude::spawn(async move {
            let outcome = fut.await;
            shared.send(Box::new(move |env| {
                // Run by `call_js` on the JavaScript thread of the env that made `deferred`.
                let _ = super::settle_deferred(deferred, outcome);
                if let Some(l) = local_of(env) {
                    finished(&l);
                }
            }));
        });
    }
    Ok(promise)
}

/// Runs `f` (replies landing: their calls' tasks become ready), then polls the ready tasks of
/// `env` in a handle scope and a callback scope, whose close runs the microtask checkpoint. For
/// the loop callbacks of the event-loop connection, with no JavaScript on the stack.
#[cfg(unix)]
pub(crate) fn dispatch(env: sys::napi_env, f: &mut dyn FnMut()) {
    let Some(l) = local_of(env) else {
        f();
        return;
    };
    let prev = DRAINING.with(|d| d.replace(Arc::as_ptr(&l.shared) as usize));
    f();
    DRAINING.with(|d| d.set(prev));
    if l.ready.borrow().is_empty() {
        return;
    }
    let mut hs = null_mut();
    let mut cs = null_mut();
    // SAFETY: on the JavaScript thread of `env`, from a callback of its loop (no JavaScript on
    // the stack); the scopes are closed in reverse order below.
    unsafe {
        if sys::napi_open_handle_scope(env, &mut hs) != sys::Status::napi_ok {
            hs = null_mut();
        } else if sys::napi_open_callback_scope(env, null_mut(), l.async_ctx, &mut cs) != sys::Status::napi_ok
        {
            cs = null_mut();
        }
    }
    if hs.is_null() || cs.is_null() {
        // No scope to settle in: hand the tasks to the threadsafe function instead.
        let ready = std::mem::take(&mut *l.ready.borrow_mut());
        l.shared.woken.lock().unwrap_or_else(|p| p.into_inner()).extend(ready);
        l.shared.send(Box::new(run_woken));
    } else {
        drain(&l);
    }
    // SAFETY: the scopes opened above.
    unsafe {
        if !cs.is_null() {
            sys::napi_close_callback_scope(env, cs);
        }
        if !hs.is_null() {
            sys::napi_close_handle_scope(env, hs);
        }
    }
}
