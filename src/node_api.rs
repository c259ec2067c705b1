//! The few Node-API calls flowguard needs that napi-rs 3 has no safe (or no as cheap) wrapper for,
//! each behind a safe function over napi-rs's own value types (which carry their env and are
//! used only on the JavaScript thread during the call that received them).
#![allow(unsafe_code)]

use napi::bindgen_prelude::{Object, PromiseRaw, Unknown};
use napi::{sys, Env, JsString, JsValue, Status};

/// Clears the exception a getter or a Proxy trap left pending, if any.
pub fn clear_exception(env: &Env) {
    let mut pending = false;
    let mut e = std::ptr::null_mut();
    // SAFETY: `env` is the live env of the current call, on its JavaScript thread; both calls
    // only write through the pointers given.
    unsafe {
        if sys::napi_is_exception_pending(env.raw(), &mut pending) == sys::Status::napi_ok && pending {
            sys::napi_get_and_clear_last_exception(env.raw(), &mut e);
        }
    }
}

/// The own enumerable string-keyed property names of `obj` (numbers as strings), in one call:
/// napi-rs's `get_all_property_names` takes one key filter, not a combination.
pub fn own_keys<'e>(obj: &Object<'e>) -> napi::Result<Object<'e>> {
    let env = obj.value().env;
    let mut keys = std::ptr::null_mut();
    // SAFETY: `obj` is a value of the current call with its env; the call writes `keys` only.
    let status = unsafe {
        sys::napi_get_all_property_names(
            env,
            obj.raw(),
            sys::KeyCollectionMode::own_only,
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
            sys::KeyConversion::numbers_to_strings,
            &mut keys,
        )
    };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(Status::from(status), "cannot list the properties"));
    }
    Ok(Object::from_raw(env, keys))
}

/// Copies the UTF-8 of `s` into `buf` (cut to fit, NUL-terminated) in one call, with no
/// allocation: the length written, without the NUL. napi-rs's `into_utf8` takes two calls.
pub fn utf8_into(s: &JsString, buf: &mut [u8]) -> napi::Result<usize> {
    let mut n = 0usize;
    // SAFETY: a string of the current call with its env; napi writes at most `buf.len()` bytes
    // into `buf` and the count into `n`.
    let status = unsafe {
        sys::napi_get_value_string_utf8(s.value().env, s.raw(), buf.as_mut_ptr().cast(), buf.len(), &mut n)
    };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(Status::from(status), "cannot read a property name"));
    }
    Ok(n)
}

/// The resolver of a Promise made by [`promise`], settled once (it is consumed). It may be moved
/// to another thread and back, but is settled only on the thread that made it (checked), the
/// JavaScript thread of its env; `crate::settle` drops the unsettled ones of an env torn down.
pub struct Deferred {
    env: sys::napi_env,
    deferred: sys::napi_deferred,
    thread: std::thread::ThreadId,
}

// SAFETY: the handles are only carried across threads, never used there: `settle` checks that it
// runs on the thread that made them.
unsafe impl Send for Deferred {}

/// A new Promise and its resolver, in one call (napi-rs's `JsDeferred` settles through a
/// threadsafe function of its own, made for each Promise).
pub fn promise<'e, T>(env: &'e Env) -> napi::Result<(Deferred, PromiseRaw<'e, T>)> {
    let mut deferred = std::ptr::null_mut();
    let mut promise = std::ptr::null_mut();
    // SAFETY: the live env of the current call, on its JavaScript thread; the call writes the two
    // handles only.
    let status = unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) };
    settled(status)?;
    let thread = std::thread::current().id();
    Ok((Deferred { env: env.raw(), deferred, thread }, PromiseRaw::new(env.raw(), promise)))
}

impl Deferred {
    /// The env that made the Promise.
    pub fn env(&self) -> Env {
        Env::from_raw(self.env)
    }

    /// Resolves the Promise with `value` (`Ok`) or rejects it with the error (`Err`).
    pub fn settle(self, value: std::result::Result<Unknown<'_>, napi::Error>) -> napi::Result<()> {
        if std::thread::current().id() != self.thread {
            return Err(napi::Error::new(
                Status::GenericFailure,
                "a Promise settled off its JavaScript thread",
            ));
        }
        let (resolve, value) = match value {
            Ok(v) => (true, v.raw()),
            Err(e) => (false, napi::JsError::from(e).into_unknown(self.env()).raw()),
        };
        // SAFETY: on the thread that made the deferred (checked above), with its env and a value
        // of it; the deferred is consumed, so settled once.
        let status = unsafe {
            if resolve {
                sys::napi_resolve_deferred(self.env, self.deferred, value)
            } else {
                sys::napi_reject_deferred(self.env, self.deferred, value)
            }
        };
        settled(status)
    }
}

fn settled(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(Status::from(status), "a napi call failed while settling a promise"))
    }
}

/// An environment's teardown in progress, which Node waits for until this is dropped (on the
/// environment's JavaScript thread: the type is neither `Send` nor `Sync`).
pub struct Teardown(sys::napi_async_cleanup_hook_handle);

impl Drop for Teardown {
    fn drop(&mut self) {
        // SAFETY: the handle Node gave the hook of `on_teardown`, removed once (here).
        unsafe { sys::napi_remove_async_cleanup_hook(self.0) };
    }
}

type TeardownHook = Box<dyn FnOnce(Teardown)>;

/// Runs `f` when the environment of `env` is torn down, which then waits until `f` drops the
/// [`Teardown`] it is given (Node's async cleanup hook). napi-rs's `add_async_cleanup_hook`
/// tells Node the teardown is over as soon as its hook returns, before libuv has closed what the
/// hook closed.
pub fn on_teardown(env: &Env, f: impl FnOnce(Teardown) + 'static) -> napi::Result<()> {
    let data = Box::into_raw(Box::new(Box::new(f) as TeardownHook));
    // SAFETY: the live env of the current call, on its JavaScript thread. The hook owns `data`
    // (taken back by `teardown_hook`); a hook that was not added never runs, so it is taken
    // back here.
    let status = unsafe {
        let status = sys::napi_add_async_cleanup_hook(
            env.raw(),
            Some(teardown_hook),
            data.cast(),
            std::ptr::null_mut(),
        );
        if status != sys::Status::napi_ok {
            drop(Box::from_raw(data));
        }
        status
    };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(Status::from(status), "cannot register a teardown hook"));
    }
    Ok(())
}

unsafe extern "C" fn teardown_hook(handle: sys::napi_async_cleanup_hook_handle, data: *mut std::ffi::c_void) {
    // SAFETY: `data` is the hook leaked by `on_teardown` for this hook, which Node runs once.
    let f = unsafe { Box::from_raw(data.cast::<TeardownHook>()) };
    // A panic must not unwind into Node; the `Teardown` then goes with the unwinding.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(Teardown(handle))));
}
