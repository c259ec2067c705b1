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
        let status = match value {
            // SAFETY: on the thread that made the deferred (checked above), with its env; the
            // deferred is consumed, so settled once.
            Ok(v) => unsafe { sys::napi_resolve_deferred(self.env, self.deferred, v.raw()) },
            Err(e) => {
                let err = napi::JsError::from(e).into_unknown(self.env());
                // SAFETY: as above.
                unsafe { sys::napi_reject_deferred(self.env, self.deferred, err.raw()) }
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
