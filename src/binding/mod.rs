//! The napi-rs binding: conversion of JavaScript values and errors only, no logic.
//!
//! Every async method returns a Promise that settles with a plain object, or rejects with an
//! `Error` carrying a stable `code` (see [`crate::error::ErrorCode`]). Arguments are converted
//! here, with the field named in the error when a value has the wrong type; their contents are
//! validated by the core. Panics are caught and reported as `ERR_INTERNAL`: none reaches Node.

mod args;
mod client;
mod json;
mod lock;
mod queue;
mod state;
mod tracker;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll, Waker};

use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi::{Env, JsValue};

use crate::error::Error as CoreError;

/// Turns a core error into a JavaScript `Error` with `code`, as a napi error that rejects with it.
pub(crate) fn js_error(env: &Env, e: &CoreError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, e.message.clone()))?;
        obj.set_named_property("code", e.code.as_str())?;
        Ok(napi::Error::from(obj.to_unknown()))
    };
    build().unwrap_or_else(|err| err)
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("flowguard hit a bug and stopped this call safely (please report it): {what}")
}

/// Settles a Promise with the result of a core future.
///
/// The future is polled once right here, inside the tokio runtime's context: work that completes
/// at once (every embedded-store call) resolves the Promise immediately, with no hop to a tokio
/// thread and back; anything still pending (Redis round trips, lock waits) continues as a task on
/// the runtime. Panics are caught in both cases.
pub(crate) fn promise<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
{
    let mut fut = Box::pin(AssertUnwindSafe(fut).catch_unwind());
    let mut cx = Context::from_waker(Waker::noop());
    let first = napi::bindgen_prelude::within_runtime_if_available(|| {
        std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)))
    });
    let outcome = match first {
        Ok(Poll::Pending) => {
            return env.spawn_future_with_callback(async move { Ok(settle(fut.await)) }, |env, r: crate::Result<T>| match r {
                Ok(v) => Ok(v),
                Err(e) => Err(js_error(env, &e)),
            });
        }
        Ok(Poll::Ready(r)) => settle(r),
        Err(p) => Err(CoreError::internal(panic_message(p))),
    };
    settled(env, outcome)
}

fn settle<T>(r: std::result::Result<crate::Result<T>, Box<dyn std::any::Any + Send>>) -> crate::Result<T> {
    r.unwrap_or_else(|p| Err(CoreError::internal(panic_message(p))))
}

/// A Promise already resolved (or rejected) with `outcome`.
fn settled<'e, T: ToNapiValue>(env: &'e Env, outcome: crate::Result<T>) -> napi::Result<PromiseRaw<'e, T>> {
    let raw_env = env.raw();
    let mut deferred = std::ptr::null_mut();
    let mut promise = std::ptr::null_mut();
    // SAFETY: called on the JavaScript thread with the live env of this call.
    unsafe {
        check(napi::sys::napi_create_promise(raw_env, &mut deferred, &mut promise))?;
        match outcome {
            Ok(v) => match T::to_napi_value(raw_env, v) {
                Ok(value) => check(napi::sys::napi_resolve_deferred(raw_env, deferred, value))?,
                Err(e) => {
                    let err = js_error(env, &CoreError::internal(format!("cannot convert a result: {}", e.reason)));
                    reject(raw_env, deferred, err)?
                }
            },
            Err(e) => reject(raw_env, deferred, js_error(env, &e))?,
        }
    }
    Ok(PromiseRaw::new(raw_env, promise))
}

unsafe fn reject(env: napi::sys::napi_env, deferred: napi::sys::napi_deferred, err: napi::Error) -> napi::Result<()> {
    let value = unsafe { JsError::from(err).into_value(env) };
    check(unsafe { napi::sys::napi_reject_deferred(env, deferred, value) })
}

fn check(status: napi::sys::napi_status) -> napi::Result<()> {
    if status == napi::sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(Status::from(status), "a napi call failed while settling a promise"))
    }
}
