//! Symbols the running process exports, looked up by name in every object it has loaded (the
//! executable, its libraries and the addons loaded with global scope).
#![allow(unsafe_code)] // dlsym.

use std::ffi::{c_char, c_void, CStr};

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

#[cfg(any(target_os = "macos", target_os = "ios"))]
const RTLD_DEFAULT: *mut c_void = -2isize as *mut c_void;
#[cfg(not(any(target_os = "macos", target_os = "ios")))]
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

/// The address of the exported symbol `name`, or null when no loaded object exports it.
pub(crate) fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: a NUL-terminated name; dlsym only reads it.
    unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) }
}
