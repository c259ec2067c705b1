//! The napi-rs binding: conversion of JavaScript values and errors only, no logic.
//!
//! Every async method returns a Promise that settles with a plain object, or rejects with an
//! `Error` carrying a stable `code` (see [`flowguard_core::error::ErrorCode`]). Arguments are converted
//! here, with the field named in the error when a value has the wrong type; their contents are
//! validated by the core. Panics are caught and reported as `ERR_INTERNAL`: none reaches Node.

mod client;
#[cfg(unix)]
mod event_loop_connection;
#[cfg(unix)]
mod exported;
mod from_js;
mod json;
mod limiter;
mod lock;
mod node_api;
mod queue;
#[cfg(unix)]
mod runtime;
mod semaphore;
mod settle;
mod state;
mod tracker;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll, Waker};

use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi::{Env, JsValue};

use flowguard_core::error::Error as CoreError;

/// The tokio runtime of the addon: ONE worker thread (napi-rs would start one per core). A Redis
/// call crosses threads twice anyway (the JavaScript thread hands the command to the connection
/// task, the reply comes back through the threadsafe function); with one worker the connection
/// task, the call's task and the timers live on the same thread, so no wake-up bounces between
/// workers. Measured in BENCHMARKS.md (CPU per call, serial and 64 in flight).
#[napi_derive::module_init]
fn init() {
    // Once per process: a worker thread that loads the addon again shares the same runtime.
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        make_runtime();
        #[cfg(unix)]
        event_loop_connection::install();
    });
}

fn make_runtime() {
    let workers = std::env::var("FLOWGUARD_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1);
    if let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("flowguard-io")
        .enable_all()
        .build()
    {
        napi::bindgen_prelude::create_custom_tokio_runtime(rt);
    }
}

/// Turns a core error into a JavaScript `Error` with `code` and, when the core names one, `field`
/// (in JavaScript terms: `requests[3].timeoutMs`, the start of the message), as a napi error that
/// rejects with it.
pub(crate) fn js_error(env: &Env, e: &CoreError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        let text = e.text(flowguard_core::field_name::public);
        let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, text))?;
        obj.set_named_property("code", e.code.as_str())?;
        if let Some(field) = e.field.as_ref().filter(|p| !p.segments().is_empty()) {
            obj.set_named_property("field", field.render(flowguard_core::field_name::public))?;
        }
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
/// thread and back; anything still pending (Redis round trips, lock waits) continues as one task
/// on the runtime and is settled through the environment's shared threadsafe function (see
/// `settle`). Panics are caught in both cases.
pub(crate) fn promise<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = flowguard_core::Result<T>> + Send + 'static,
{
    match settle::in_env(env, || first_poll(fut)) {
        Ok(outcome) => settled(env, outcome),
        Err(rest) => settle::spawn(env, rest),
    }
}

/// Like [`promise`], but work that completes at once (every embedded-store call) is returned
/// as the value itself, synchronously (an error is thrown), with no Promise made; only work
/// still pending returns a Promise. For the JavaScript layer (index.js), which wraps the value
/// in a resolved Promise: the cheapest way through napi for a call that is done at once.
pub(crate) fn now_or_promise<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<Unknown<'e>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = flowguard_core::Result<T>> + Send + 'static,
{
    match settle::in_env(env, || first_poll(fut)) {
        Ok(Ok(v)) => v.into_unknown(env),
        Ok(Err(e)) => Err(js_error(env, &e)),
        Err(rest) => Ok(settle::spawn(env, rest)?.to_unknown()),
    }
}

pub(crate) type Rest<T> = std::pin::Pin<Box<dyn Future<Output = flowguard_core::Result<T>> + Send>>;

/// Polls `fut` once, right here, inside the tokio runtime's context: its outcome when it is
/// done (panics caught), else the rest of it, to run as a task.
pub(crate) fn first_poll<T, F>(fut: F) -> std::result::Result<flowguard_core::Result<T>, Rest<T>>
where
    T: Send + 'static,
    F: Future<Output = flowguard_core::Result<T>> + Send + 'static,
{
    let mut fut = Box::pin(AssertUnwindSafe(fut).catch_unwind());
    let mut cx = Context::from_waker(Waker::noop());
    let first = napi::bindgen_prelude::within_runtime_if_available(|| {
        std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)))
    });
    match first {
        Ok(Poll::Pending) => Err(Box::pin(async move { settle(fut.await) })),
        Ok(Poll::Ready(r)) => Ok(settle(r)),
        Err(p) => Ok(Err(CoreError::internal(panic_message(p)))),
    }
}

fn settle<T>(
    r: std::result::Result<flowguard_core::Result<T>, Box<dyn std::any::Any + Send>>,
) -> flowguard_core::Result<T> {
    r.unwrap_or_else(|p| Err(CoreError::internal(panic_message(p))))
}

/// A Promise already resolved (or rejected) with `outcome`.
fn settled<'e, T: ToNapiValue>(
    env: &'e Env,
    outcome: flowguard_core::Result<T>,
) -> napi::Result<PromiseRaw<'e, T>> {
    let (deferred, promise) = node_api::promise(env)?;
    settle_deferred(deferred, outcome)?;
    Ok(promise)
}

/// Resolves or rejects `deferred` with `outcome` (on the JavaScript thread that made it).
pub(crate) fn settle_deferred<T: ToNapiValue>(
    deferred: node_api::Deferred,
    outcome: flowguard_core::Result<T>,
) -> napi::Result<()> {
    let env = deferred.env();
    let value = match outcome {
        Ok(v) => v.into_unknown(&env).map_err(|e| {
            js_error(&env, &CoreError::internal(format!("cannot convert a result: {}", e.reason)))
        }),
        Err(e) => Err(js_error(&env, &e)),
    };
    deferred.settle(value)
}
