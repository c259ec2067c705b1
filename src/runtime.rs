//! Which JavaScript runtime loaded the addon.
//!
//! Bun and Deno run Node-API addons too, without Node's libuv: Bun even exports functions named
//! like libuv's that abort the process when called. The executable's name says nothing (a
//! `bun build --compile` program has its own name, and a copy of bun may be called `node`), so
//! the runtime is asked from JavaScript, once per environment: `process.versions.bun` and
//! `process.versions.deno` are set by those runtimes, and Node names itself in
//! `process.release.name`.

use std::ffi::CStr;
use std::ptr::null_mut;

use napi::sys;

/// Whether `env` runs under Node.js itself. False when anything is missing or unreadable: the
/// caller then keeps to Node-API alone.
pub(crate) fn is_node(env: sys::napi_env) -> bool {
    // SAFETY: on the JavaScript thread of `env`, in a napi call; an exception a getter throws is
    // cleared before returning.
    let node = unsafe { read(env) }.unwrap_or(false);
    unsafe {
        let mut pending = false;
        if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
            let mut e = null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut e);
            return false;
        }
    }
    node
}

/// # Safety
/// As [`is_node`].
unsafe fn read(env: sys::napi_env) -> Option<bool> {
    unsafe {
        let mut global = null_mut();
        ok(sys::napi_get_global(env, &mut global))?;
        let process = object(env, global, c"process")?;
        let versions = object(env, process, c"versions")?;
        if !is_undefined(env, versions, c"bun")? || !is_undefined(env, versions, c"deno")? {
            return Some(false);
        }
        let release = object(env, process, c"release")?;
        Some(string(env, release, c"name")?.as_deref() == Some("node"))
    }
}

fn ok(status: sys::napi_status) -> Option<()> {
    (status == sys::Status::napi_ok).then_some(())
}

unsafe fn property(env: sys::napi_env, obj: sys::napi_value, name: &CStr) -> Option<(sys::napi_value, i32)> {
    unsafe {
        let mut v = null_mut();
        ok(sys::napi_get_named_property(env, obj, name.as_ptr(), &mut v))?;
        let mut t = 0;
        ok(sys::napi_typeof(env, v, &mut t))?;
        Some((v, t))
    }
}

unsafe fn object(env: sys::napi_env, obj: sys::napi_value, name: &CStr) -> Option<sys::napi_value> {
    let (v, t) = unsafe { property(env, obj, name)? };
    (t == sys::ValueType::napi_object).then_some(v)
}

unsafe fn is_undefined(env: sys::napi_env, obj: sys::napi_value, name: &CStr) -> Option<bool> {
    let (_, t) = unsafe { property(env, obj, name)? };
    Some(t == sys::ValueType::napi_undefined)
}

/// The property as a string (None inside when it is not one).
unsafe fn string(env: sys::napi_env, obj: sys::napi_value, name: &CStr) -> Option<Option<String>> {
    let (v, t) = unsafe { property(env, obj, name)? };
    if t != sys::ValueType::napi_string {
        return Some(None);
    }
    let mut buf = [0u8; 16];
    let mut len = 0;
    unsafe { ok(sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), buf.len(), &mut len))? };
    Some(Some(String::from_utf8_lossy(&buf[..len]).into_owned()))
}
