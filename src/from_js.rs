//! Typed arguments: JavaScript values converted to Rust types, with errors that name the field.
//!
//! napi-rs converts a method's arguments before the method runs and, on a wrong type, throws its
//! own error synchronously (no `code`; the Rust type is named, not the field). Flowguard's async
//! methods must reject instead, with `ERR_INVALID_ARGUMENT` naming the field in JavaScript terms
//! (`options.timeoutMs must be a number, got a string`). So a method takes its arguments as
//! [`Arg`]s (napi-rs only hands the value over) and converts each with [`FromJs`], naming it.
//! Input objects are `#[napi(object)]` structs (their doc comments become the TypeScript docs of
//! binding.d.ts) with a conversion from [`js_input!`], which refuses option names it does not know.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::time::Duration;

use napi::bindgen_prelude::{Either, FromNapiValue};
use napi::sys;

use flowguard_core::error::{At, Error, FieldPath, Result};

/// A JavaScript argument of type `T`, converted when the method asks for it (see the module docs).
/// In binding.d.ts, `Arg<T>` is `T`.
pub struct Arg<'e, T> {
    env: sys::napi_env,
    value: sys::napi_value,
    _p: PhantomData<Marker<'e, T>>,
}

/// Ties an [`Arg`] to its call (`'e`) and to `T` without owning a `T`.
type Marker<'e, T> = (&'e (), fn() -> T);

impl<T> FromNapiValue for Arg<'_, T> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        Ok(Arg { env, value, _p: PhantomData })
    }
}

impl<T: FromJs> Arg<'_, T> {
    /// The argument as a `T`; `at` names it in an error.
    pub fn get(&self, at: impl At + Copy) -> Result<T> {
        // SAFETY: an `Arg` lives only during the call that received it, on the JavaScript thread.
        unsafe { T::from_js(self.env, self.value, at) }
    }
}

/// An optional argument: absent, `undefined` and `null` give `None`.
pub fn opt<T: FromJs>(arg: &Option<Arg<'_, T>>, at: impl At + Copy) -> Result<Option<T>> {
    arg.as_ref().map(|a| a.get(at)).transpose()
}

/// Conversion of a JavaScript value.
pub trait FromJs: Sized {
    /// # Safety
    /// On the JavaScript thread, with the env and a value of the current call.
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self>;

    /// The elements of an array of `len` entries (see [`FromJs`] for `Vec`).
    ///
    /// # Safety
    /// As [`FromJs::from_js`], with `v` an array.
    unsafe fn from_js_array(
        env: sys::napi_env,
        v: sys::napi_value,
        len: u32,
        at: impl At + Copy,
    ) -> Result<Vec<Self>> {
        (0..len)
            .map(|i| {
                let mut e = std::ptr::null_mut();
                read(env, unsafe { sys::napi_get_element(env, v, i, &mut e) }, Elem(at, i as usize))?;
                unsafe { Self::from_js(env, e, Elem(at, i as usize)) }
            })
            .collect()
    }
}

/// Field `1` of the value at `0` (its path built only for an error).
#[derive(Clone, Copy)]
pub struct Field<A>(pub A, pub &'static str);

impl<A: At> At for Field<A> {
    fn path(self) -> FieldPath {
        self.0.path().field(self.1)
    }
}

/// Element `1` of the array at `0`.
#[derive(Clone, Copy)]
pub struct Elem<A>(pub A, pub usize);

impl<A: At> At for Elem<A> {
    fn path(self) -> FieldPath {
        self.0.path().index(self.1)
    }
}

/// A field name of the core (Rust, snake_case, durations without unit) in JavaScript terms.
pub fn js_name(rust: &str) -> Cow<'_, str> {
    Cow::Borrowed(match rust {
        "timeout" => "timeoutMs",
        "keep" => "keepMs",
        "wait" => "waitMs",
        "lease" => "leaseMs",
        "ttl" => "ttlMs",
        "delay" => "delayMs",
        "visibility_timeout" => "visibilityTimeoutMs",
        "connect_timeout" => "connectTimeoutMs",
        "command_timeout" => "commandTimeoutMs",
        "retention" => "retentionMs",
        "period" => "periodMs",
        "max_wait" => "maxWaitMs",
        other if other.contains('_') => {
            let mut out = String::with_capacity(other.len());
            let mut up = false;
            for c in other.chars() {
                if c == '_' {
                    up = true;
                } else if up {
                    out.extend(c.to_uppercase());
                    up = false;
                } else {
                    out.push(c);
                }
            }
            return Cow::Owned(out);
        }
        other => other,
    })
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::internal(format!("cannot read {what} of an argument (napi status {status})")))
    }
}

/// The outcome of reading a property or element, which may run JavaScript (a getter, a Proxy
/// trap): when that throws, the exception is cleared and the call refused naming the field.
fn read(env: sys::napi_env, status: sys::napi_status, at: impl At) -> Result<()> {
    if status == sys::Status::napi_ok {
        return Ok(());
    }
    let mut pending = false;
    // SAFETY: on the JavaScript thread of `env`.
    unsafe {
        if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
            let mut e = std::ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut e);
        }
    }
    Err(Error::invalid_at(at, "could not be read (a getter or Proxy threw)"))
}

unsafe fn type_of(env: sys::napi_env, v: sys::napi_value) -> Result<i32> {
    let mut t = 0;
    check(unsafe { sys::napi_typeof(env, v, &mut t) }, "the type")?;
    Ok(t)
}

fn type_name(t: i32) -> &'static str {
    use sys::ValueType as T;
    match t {
        T::napi_undefined => "undefined",
        T::napi_null => "null",
        T::napi_boolean => "a boolean",
        T::napi_number => "a number",
        T::napi_string => "a string",
        T::napi_symbol => "a symbol",
        T::napi_object => "an object",
        T::napi_function => "a function",
        T::napi_external => "an external",
        T::napi_bigint => "a bigint",
        _ => "an unknown value",
    }
}

/// The error of a value of the wrong type.
pub fn wrong(at: impl At, expected: &str, got: i32) -> Error {
    Error::invalid_at(at, format!("must be {expected}, got {}", type_name(got)))
}

fn absent(t: i32) -> bool {
    t == sys::ValueType::napi_undefined || t == sys::ValueType::napi_null
}

impl FromJs for String {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        let t = unsafe { type_of(env, v)? };
        if t != sys::ValueType::napi_string {
            return Err(wrong(at, "a string", t));
        }
        unsafe { read_string(env, v, at) }
    }

    /// Fast path: one `JSON.stringify` of the array and one parse in Rust, rather than several
    /// napi calls per element; anything that is not plainly an array of well-formed strings (a
    /// number, a hole, a lone surrogate, which JSON.stringify escapes and serde_json refuses) takes
    /// the element-wise path, which names the offending element.
    unsafe fn from_js_array(
        env: sys::napi_env,
        v: sys::napi_value,
        len: u32,
        at: impl At + Copy,
    ) -> Result<Vec<Self>> {
        if let Some(all) = unsafe { strings_via_json(env, v) } {
            if all.len() == len as usize {
                return Ok(all);
            }
        }
        (0..len)
            .map(|i| {
                let mut e = std::ptr::null_mut();
                read(env, unsafe { sys::napi_get_element(env, v, i, &mut e) }, Elem(at, i as usize))?;
                unsafe { String::from_js(env, e, Elem(at, i as usize)) }
            })
            .collect()
    }
}

/// A JavaScript string as UTF-8. V8 writes an unpaired UTF-16 surrogate as U+FFFD, which would
/// make distinct names one; such strings are refused (a real U+FFFD is kept).
unsafe fn read_string(env: sys::napi_env, v: sys::napi_value, at: impl At) -> Result<String> {
    let mut len = 0usize;
    check(unsafe { sys::napi_get_value_string_utf8(env, v, std::ptr::null_mut(), 0, &mut len) }, "a string")?;
    let mut buf = Vec::<u8>::with_capacity(len + 1);
    let mut written = 0usize;
    check(
        unsafe { sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), len + 1, &mut written) },
        "a string",
    )?;
    // SAFETY: napi wrote `written` bytes (without the terminating NUL).
    unsafe { buf.set_len(written) };
    let s = String::from_utf8(buf)
        .map_err(|e| Error::internal(format!("napi gave a string that is not UTF-8: {e}")))?;
    if s.contains('\u{FFFD}') && unsafe { has_lone_surrogate(env, v)? } {
        return Err(lone_surrogate(at));
    }
    Ok(s)
}

/// The error of a string holding an unpaired UTF-16 surrogate.
pub fn lone_surrogate(at: impl At) -> Error {
    Error::invalid_at(
        at,
        "contains an unpaired UTF-16 surrogate (a lone \\uD800-\\uDFFF); flowguard accepts only well-formed \
         Unicode text, so that distinct names never become one",
    )
}

unsafe fn has_lone_surrogate(env: sys::napi_env, v: sys::napi_value) -> Result<bool> {
    let mut len = 0usize;
    check(
        unsafe { sys::napi_get_value_string_utf16(env, v, std::ptr::null_mut(), 0, &mut len) },
        "a string",
    )?;
    let mut buf = vec![0u16; len + 1];
    let mut written = 0usize;
    check(
        unsafe { sys::napi_get_value_string_utf16(env, v, buf.as_mut_ptr(), len + 1, &mut written) },
        "a string",
    )?;
    Ok(char::decode_utf16(buf[..written].iter().copied()).any(|c| c.is_err()))
}

unsafe fn strings_via_json(env: sys::napi_env, v: sys::napi_value) -> Option<Vec<String>> {
    let mut global = std::ptr::null_mut();
    let mut json = std::ptr::null_mut();
    let mut stringify = std::ptr::null_mut();
    let mut out = std::ptr::null_mut();
    let ok = |s: sys::napi_status| s == sys::Status::napi_ok;
    // SAFETY: on the JavaScript thread, with the env and value of the current call.
    unsafe {
        if !ok(sys::napi_get_global(env, &mut global))
            || !ok(sys::napi_get_named_property(env, global, c"JSON".as_ptr(), &mut json))
            || !ok(sys::napi_get_named_property(env, json, c"stringify".as_ptr(), &mut stringify))
            || !ok(sys::napi_call_function(env, json, stringify, 1, &v, &mut out))
        {
            // A throwing toJSON or getter leaves an exception pending: clear it, use the slow path.
            let mut pending = false;
            if ok(sys::napi_is_exception_pending(env, &mut pending)) && pending {
                let mut e = std::ptr::null_mut();
                sys::napi_get_and_clear_last_exception(env, &mut e);
            }
            return None;
        }
        let text = String::from_napi_value(env, out).ok()?;
        serde_json::from_str::<Vec<String>>(&text).ok()
    }
}

impl FromJs for f64 {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        let t = unsafe { type_of(env, v)? };
        if t != sys::ValueType::napi_number {
            return Err(wrong(at, "a number", t));
        }
        let mut n = 0.0;
        check(unsafe { sys::napi_get_value_double(env, v, &mut n) }, "a number")?;
        Ok(n)
    }
}

impl FromJs for bool {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        let t = unsafe { type_of(env, v)? };
        if t != sys::ValueType::napi_boolean {
            return Err(wrong(at, "a boolean", t));
        }
        let mut b = false;
        check(unsafe { sys::napi_get_value_bool(env, v, &mut b) }, "a boolean")?;
        Ok(b)
    }
}

impl<T: FromJs> FromJs for Option<T> {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        if absent(unsafe { type_of(env, v)? }) {
            return Ok(None);
        }
        unsafe { T::from_js(env, v, at) }.map(Some)
    }
}

impl<T: FromJs> FromJs for Vec<T> {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        let mut is_array = false;
        check(unsafe { sys::napi_is_array(env, v, &mut is_array) }, "the type")?;
        if !is_array {
            return Err(wrong(at, "an array", unsafe { type_of(env, v)? }));
        }
        let mut len = 0u32;
        check(unsafe { sys::napi_get_array_length(env, v, &mut len) }, "the length")?;
        flowguard_core::validate::batch_len(at, len as usize)?;
        unsafe { T::from_js_array(env, v, len, at) }
    }
}

/// One string or an array of them (`enqueue`, `ack`, `release`).
impl FromJs for Either<String, Vec<String>> {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        if unsafe { type_of(env, v)? } == sys::ValueType::napi_string {
            return Ok(Either::A(unsafe { read_string(env, v, at)? }));
        }
        Ok(Either::B(unsafe { Vec::<String>::from_js(env, v, at)? }))
    }
}

/// A number or a string (`keepMs`: milliseconds or `'forever'`).
impl FromJs for Either<f64, String> {
    unsafe fn from_js(env: sys::napi_env, v: sys::napi_value, at: impl At + Copy) -> Result<Self> {
        let t = unsafe { type_of(env, v)? };
        if t == sys::ValueType::napi_string {
            return Ok(Either::B(unsafe { read_string(env, v, at)? }));
        }
        if t != sys::ValueType::napi_number {
            return Err(wrong(at, "a number or a string", t));
        }
        Ok(Either::A(unsafe { f64::from_js(env, v, at)? }))
    }
}

/// The strings of one string or an array of them.
pub fn one_or_many(v: Either<String, Vec<String>>) -> Vec<String> {
    match v {
        Either::A(one) => vec![one],
        Either::B(many) => many,
    }
}

/// The own properties of an input object, by position in `names`; a property not in `names`
/// is refused, so a misspelt option never passes unnoticed.
pub struct Props<const N: usize> {
    env: sys::napi_env,
    values: [sys::napi_value; N],
}

impl<const N: usize> Props<N> {
    /// # Safety
    /// As [`FromJs::from_js`].
    pub unsafe fn read(
        env: sys::napi_env,
        v: sys::napi_value,
        at: impl At + Copy,
        names: &[&'static str; N],
    ) -> Result<Self> {
        let t = unsafe { type_of(env, v)? };
        let mut is_array = false;
        check(unsafe { sys::napi_is_array(env, v, &mut is_array) }, "the type")?;
        if is_array {
            return Err(Error::invalid_at(at, "must be an object, got an array"));
        }
        if t != sys::ValueType::napi_object {
            return Err(wrong(at, "an object", t));
        }
        let mut values = [std::ptr::null_mut(); N];
        let mut keys = std::ptr::null_mut();
        read(
            env,
            unsafe {
                sys::napi_get_all_property_names(
                    env,
                    v,
                    sys::KeyCollectionMode::own_only,
                    sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                    sys::KeyConversion::numbers_to_strings,
                    &mut keys,
                )
            },
            at,
        )?;
        let mut len = 0u32;
        check(unsafe { sys::napi_get_array_length(env, keys, &mut len) }, "the property names")?;
        for i in 0..len {
            let mut key = std::ptr::null_mut();
            check(unsafe { sys::napi_get_element(env, keys, i, &mut key) }, "a property name")?;
            // Option names are short: a fixed buffer, and a longer name is unknown anyway.
            let mut buf = [0u8; 32];
            let mut n = 0usize;
            check(
                unsafe {
                    sys::napi_get_value_string_utf8(env, key, buf.as_mut_ptr().cast(), buf.len(), &mut n)
                },
                "a property name",
            )?;
            let name = &buf[..n];
            match names.iter().position(|k| k.as_bytes() == name) {
                Some(k) if n < buf.len() - 1 => {
                    let status = unsafe { sys::napi_get_property(env, v, key, &mut values[k]) };
                    read(env, status, Field(at, names[k]))?;
                }
                _ => {
                    let full = unsafe { String::from_napi_value(env, key) }.unwrap_or_default();
                    let shown: String = full.chars().take(60).collect();
                    return Err(Error::invalid_at(
                        at,
                        format!("has an unknown option {shown:?}; the options are {}", names.join(", ")),
                    ));
                }
            }
        }
        Ok(Props { env, values })
    }

    /// Property `k` (see [`Props::read`]) as a `T`; `at` names the object.
    pub fn get<T: FromJs, A: At + Copy>(&self, k: usize, at: A, name: &'static str) -> Result<T> {
        let v = self.values[k];
        if v.is_null() {
            let mut undef = std::ptr::null_mut();
            check(unsafe { sys::napi_get_undefined(self.env, &mut undef) }, "undefined")?;
            return unsafe { T::from_js(self.env, undef, Field(at, name)) };
        }
        // SAFETY: read during the same call, on the JavaScript thread.
        unsafe { T::from_js(self.env, v, Field(at, name)) }
    }
}

/// The [`FromJs`] conversion of an input object (a `#[napi(object, object_from_js = false)]`
/// struct, whose doc comments are the TypeScript docs): each field read by its JavaScript name and
/// named by it in errors; an own property that is not one of them is refused.
macro_rules! js_input {
    ($name:ident { $( $field:ident = $js:literal ),* $(,)? }) => {
        impl $crate::from_js::FromJs for $name {
            unsafe fn from_js(
                env: napi::sys::napi_env,
                v: napi::sys::napi_value,
                at: impl flowguard_core::error::At + Copy,
            ) -> flowguard_core::Result<Self> {
                const NAMES: &[&'static str; [$($js),*].len()] = &[$($js),*];
                let p = unsafe { $crate::from_js::Props::read(env, v, at, NAMES)? };
                let mut _k = 0usize;
                Ok($name {
                    $( $field: { let f = p.get(_k, at, $js)?; _k += 1; f } ),*
                })
            }
        }
    };
}
pub(crate) use js_input;

/// A duration given in milliseconds as a JavaScript number: finite and not negative (the core
/// checks the range and rounds a fraction of a millisecond up).
pub fn ms(at: impl At, value: f64) -> Result<Duration> {
    flowguard_core::validate::millis(at, value)
}

/// An optional duration in milliseconds (see [`ms`]).
pub fn opt_ms(at: impl At, value: Option<f64>) -> Result<Option<Duration>> {
    value.map(|v| ms(at, v)).transpose()
}

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A whole number, 0 or more, given as a JavaScript number (the core checks the range).
pub fn whole(at: impl At, value: Option<f64>) -> Result<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&v) => Ok(Some(v as u64)),
        Some(v) if v.is_finite() && v.fract() == 0.0 && v < 0.0 => {
            Err(Error::invalid_at(at, format!("must be a whole number of 0 or more, got {v}")))
        }
        Some(v) => Err(Error::invalid_at(at, format!("must be a whole number, got {v}"))),
    }
}

/// A whole number that may be negative, given as a JavaScript number.
pub fn signed(at: impl At, value: Option<f64>) -> Result<Option<i64>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE => Ok(Some(v as i64)),
        Some(v) => Err(Error::invalid_at(
            at,
            format!("must be a whole number from -{MAX_SAFE} to {MAX_SAFE}, got {v}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_refuses_lone_surrogate_escapes() {
        // The fast path of string arrays relies on it (JSON.stringify writes "\ud800").
        assert!(serde_json::from_str::<Vec<String>>(r#"["\ud800"]"#).is_err());
        assert!(serde_json::from_str::<Vec<String>>(r#"["a\udc00b"]"#).is_err());
        assert_eq!(serde_json::from_str::<Vec<String>>(r#"["\ud83d\ude00"]"#).unwrap(), vec!["😀"]);
    }

    #[test]
    fn names_in_javascript_terms() {
        assert_eq!(js_name("timeout"), "timeoutMs");
        assert_eq!(js_name("reclaim_completed"), "reclaimCompleted");
        assert_eq!(js_name("group"), "group");
        assert_eq!(js_name("timeoutMs"), "timeoutMs");
    }

    #[test]
    fn milliseconds() {
        assert_eq!(ms("t", 1.5).unwrap(), Duration::from_micros(1500));
        assert!(ms("t", f64::NAN).is_err());
        assert!(ms("t", -1.0).is_err());
        assert_eq!(ms("t", 1e300).unwrap(), Duration::MAX);
        assert_eq!(ms("t", 1e-12).unwrap(), Duration::from_nanos(1));
        assert_eq!(whole("l", Some(3.0)).unwrap(), Some(3));
        assert!(whole("l", Some(1.5)).is_err());
        assert!(whole("l", Some(-1.0)).is_err());
        assert_eq!(signed("by", Some(-3.0)).unwrap(), Some(-3));
    }
}
