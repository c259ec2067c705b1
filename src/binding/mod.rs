//! The napi-rs binding: conversion of JavaScript values and errors only, no logic.
//!
//! Every async method returns a Promise that settles with a plain object, or rejects with an
//! `Error` carrying a stable `code` (see [`crate::error::ErrorCode`]). Arguments are converted
//! here, with the field named in the error when a value has the wrong type; their contents are
//! validated by the core. Panics are caught and reported as `ERR_INTERNAL`: none reaches Node.

mod args;
mod client;
mod lock;
mod queue;
mod state;
mod tracker;

use std::future::Future;
use std::panic::AssertUnwindSafe;

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

/// Runs a core future on the tokio runtime and settles a Promise with its result.
pub(crate) fn promise<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
{
    let guarded = async move {
        Ok(match AssertUnwindSafe(fut).catch_unwind().await {
            Ok(r) => r,
            Err(p) => Err(CoreError::internal(panic_message(p))),
        })
    };
    env.spawn_future_with_callback(guarded, |env, r: crate::Result<T>| match r {
        Ok(v) => Ok(v),
        Err(e) => Err(js_error(env, &e)),
    })
}
