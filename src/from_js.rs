//! Typed arguments: JavaScript values converted to Rust types, with errors that name the field.
//!
//! napi-rs converts a method's arguments before the method runs and, on a wrong type, throws its
//! own error synchronously (no `code`; the Rust type is named, not the field). Flowguard's async
//! methods must reject instead, with `ERR_INVALID_ARGUMENT` naming the field in JavaScript terms
//! (`options.timeoutMs must be a number, got a string`). So a method takes its arguments as
//! [`Arg`]s (napi-rs only hands the value over) and converts each with [`FromJs`], naming it.
//! Input objects are `#[napi(object)]` structs (their doc comments become the TypeScript docs of
//! binding.d.ts) with a conversion from [`js_input!`], which refuses option names it does not know.

use std::marker::PhantomData;
use std::time::Duration;

use napi::bindgen_prelude::{Either, FromNapiValue, Function, JsObjectValue, Object, ToNapiValue, Unknown};
use napi::{sys, Env, JsString, JsValue, ValueType};

use flowguard_core::error::{At, Error, FieldPath, Result};

use crate::node_api;

/// A JavaScript argument of type `T`, converted when the method asks for it (see the module docs).
/// In binding.d.ts, `Arg<T>` is `T`.
pub struct Arg<'e, T> {
    value: Unknown<'e>,
    _p: PhantomData<fn() -> T>,
}

#[allow(unsafe_code)]
impl<T> FromNapiValue for Arg<'_, T> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        // SAFETY: napi-rs hands over an argument of the current call with its env; an `Arg` lives
        // only during that call, on the JavaScript thread.
        let value = unsafe { Unknown::from_napi_value(env, value)? };
        Ok(Arg { value, _p: PhantomData })
    }
}

impl<T: FromJs> Arg<'_, T> {
    /// The argument as a `T`; `at` names it in an error.
    pub fn get(&self, at: impl At + Copy) -> Result<T> {
        T::from_js(self.value, at)
    }
}

/// An optional argument: absent, `undefined` and `null` give `None`.
pub fn opt<T: FromJs>(arg: &Option<Arg<'_, T>>, at: impl At + Copy) -> Result<Option<T>> {
    arg.as_ref().map(|a| a.get(at)).transpose()
}

/// Conversion of a JavaScript value (of the current call, on the JavaScript thread).
pub trait FromJs: Sized {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self>;

    /// The elements of an array of `len` entries (see [`FromJs`] for `Vec`).
    fn from_js_array(arr: &Object<'_>, len: u32, at: impl At + Copy) -> Result<Vec<Self>> {
        (0..len)
            .map(|i| Self::from_js(element(arr, i, Elem(at, i as usize))?, Elem(at, i as usize)))
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

fn check<T>(r: napi::Result<T>, what: &str) -> Result<T> {
    r.map_err(|e| Error::internal(format!("cannot read {what} of an argument (napi status {})", e.status)))
}

/// The outcome of reading a property or element, which may run JavaScript (a getter, a Proxy
/// trap): when that throws, the exception is cleared and the call refused naming the field.
fn read<T>(env: &Env, r: napi::Result<T>, at: impl At) -> Result<T> {
    r.map_err(|_| {
        node_api::clear_exception(env);
        Error::invalid_at(at, "could not be read (a getter or Proxy threw)")
    })
}

/// The env of a value (napi-rs's handle of it, for its calls).
fn env_of<'e>(v: &impl JsValue<'e>) -> Env {
    Env::from_raw(v.value().env)
}

/// Element `i` of the array `arr`.
fn element<'e>(arr: &Object<'e>, i: u32, at: impl At) -> Result<Unknown<'e>> {
    read(&env_of(arr), arr.get_element::<Unknown<'e>>(i), at)
}

fn type_of(v: &Unknown<'_>) -> Result<ValueType> {
    check(v.get_type(), "the type")
}

fn type_name(t: ValueType) -> &'static str {
    match t {
        ValueType::Undefined => "undefined",
        ValueType::Null => "null",
        ValueType::Boolean => "a boolean",
        ValueType::Number => "a number",
        ValueType::String => "a string",
        ValueType::Symbol => "a symbol",
        ValueType::Object => "an object",
        ValueType::Function => "a function",
        ValueType::External => "an external",
        ValueType::BigInt => "a bigint",
        _ => "an unknown value",
    }
}

/// The error of a value of the wrong type.
pub fn wrong(at: impl At, expected: &str, got: ValueType) -> Error {
    Error::invalid_at(at, format!("must be {expected}, got {}", type_name(got)))
}

fn absent(t: ValueType) -> bool {
    matches!(t, ValueType::Undefined | ValueType::Null)
}

impl FromJs for String {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        let t = type_of(&v)?;
        if t != ValueType::String {
            return Err(wrong(at, "a string", t));
        }
        read_string(v, at)
    }

    /// Fast path: one `JSON.stringify` of the array and one parse in Rust, rather than several
    /// napi calls per element; anything that is not plainly an array of well-formed strings (a
    /// number, a hole, a lone surrogate, which JSON.stringify escapes and serde_json refuses) takes
    /// the element-wise path, which names the offending element.
    fn from_js_array(arr: &Object<'_>, len: u32, at: impl At + Copy) -> Result<Vec<Self>> {
        if let Some(all) = strings_via_json(arr) {
            if all.len() == len as usize {
                return Ok(all);
            }
        }
        (0..len)
            .map(|i| String::from_js(element(arr, i, Elem(at, i as usize))?, Elem(at, i as usize)))
            .collect()
    }
}

/// A JavaScript string as UTF-8. V8 writes an unpaired UTF-16 surrogate as U+FFFD, which would
/// make distinct names one; such strings are refused (a real U+FFFD is kept).
fn read_string(v: Unknown<'_>, at: impl At) -> Result<String> {
    let s = check(String::from_unknown(v), "a string")?;
    if s.contains('\u{FFFD}') && has_lone_surrogate(v)? {
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

fn has_lone_surrogate(v: Unknown<'_>) -> Result<bool> {
    let utf16 = check(JsString::from_unknown(v).and_then(JsString::into_utf16), "a string")?;
    Ok(char::decode_utf16(utf16.as_slice().iter().copied()).any(|c| c.is_err()))
}

/// `JSON.stringify(arr)` parsed as strings; `None` when it throws or is not an array of strings.
fn strings_via_json(arr: &Object<'_>) -> Option<Vec<String>> {
    let env = env_of(arr);
    let text = (|| -> napi::Result<String> {
        let json: Object<'_> = env.get_global()?.get_c_named_property_unchecked(c"JSON")?;
        let stringify: Function<'_, Object<'_>, String> =
            json.get_c_named_property_unchecked(c"stringify")?;
        stringify.apply(json, *arr)
    })();
    match text {
        Ok(text) => serde_json::from_str::<Vec<String>>(&text).ok(),
        Err(_) => {
            // A throwing toJSON or getter leaves an exception pending: clear it, use the slow path.
            node_api::clear_exception(&env);
            None
        }
    }
}

impl FromJs for f64 {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        let t = type_of(&v)?;
        if t != ValueType::Number {
            return Err(wrong(at, "a number", t));
        }
        check(f64::from_unknown(v), "a number")
    }
}

impl FromJs for bool {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        let t = type_of(&v)?;
        if t != ValueType::Boolean {
            return Err(wrong(at, "a boolean", t));
        }
        check(bool::from_unknown(v), "a boolean")
    }
}

impl<T: FromJs> FromJs for Option<T> {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        if absent(type_of(&v)?) {
            return Ok(None);
        }
        T::from_js(v, at).map(Some)
    }
}

impl<T: FromJs> FromJs for Vec<T> {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        if !check(v.is_array(), "the type")? {
            return Err(wrong(at, "an array", type_of(&v)?));
        }
        let arr = check(Object::from_unknown(v), "the type")?;
        let len = check(arr.get_array_length_unchecked(), "the length")?;
        flowguard_core::validate::batch_len(at, len as usize)?;
        T::from_js_array(&arr, len, at)
    }
}

/// One string or an array of them (`enqueue`, `ack`, `release`).
impl FromJs for Either<String, Vec<String>> {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        if type_of(&v)? == ValueType::String {
            return Ok(Either::A(read_string(v, at)?));
        }
        Ok(Either::B(Vec::<String>::from_js(v, at)?))
    }
}

/// A URL or an object of options (`postgres` of `Flowguard.open`).
impl FromJs for Either<String, crate::client::PostgresOptions> {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        if type_of(&v)? == ValueType::String {
            return Ok(Either::A(read_string(v, at)?));
        }
        Ok(Either::B(crate::client::PostgresOptions::from_js(v, at)?))
    }
}

/// A number or a string (`keepMs`: milliseconds or `'forever'`).
impl FromJs for Either<f64, String> {
    fn from_js(v: Unknown<'_>, at: impl At + Copy) -> Result<Self> {
        let t = type_of(&v)?;
        if t == ValueType::String {
            return Ok(Either::B(read_string(v, at)?));
        }
        if t != ValueType::Number {
            return Err(wrong(at, "a number or a string", t));
        }
        Ok(Either::A(f64::from_js(v, at)?))
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
pub struct Props<'e, const N: usize> {
    env: Env,
    values: [Option<Unknown<'e>>; N],
}

impl<'e, const N: usize> Props<'e, N> {
    /// Reads the own properties of `v`, an object.
    pub fn read(v: Unknown<'e>, at: impl At + Copy, names: &[&'static str; N]) -> Result<Self> {
        let t = type_of(&v)?;
        if check(v.is_array(), "the type")? {
            return Err(Error::invalid_at(at, "must be an object, got an array"));
        }
        if t != ValueType::Object {
            return Err(wrong(at, "an object", t));
        }
        let env = env_of(&v);
        let obj = check(Object::from_unknown(v), "the type")?;
        let mut values = [None; N];
        let keys = read(&env, node_api::own_keys(&obj), at)?;
        let len = check(keys.get_array_length_unchecked(), "the property names")?;
        for i in 0..len {
            let key: JsString<'_> = check(keys.get_element(i), "a property name")?;
            // Option names are short: a fixed buffer, and a longer name is unknown anyway.
            let mut buf = [0u8; 32];
            let n = check(node_api::utf8_into(&key, &mut buf), "a property name")?;
            let name = &buf[..n];
            match names.iter().position(|k| k.as_bytes() == name) {
                Some(k) if n < buf.len() - 1 => {
                    values[k] = Some(read(&env, obj.get_property_unchecked(key), Field(at, names[k]))?);
                }
                _ => {
                    let full = String::from_unknown(key.to_unknown()).unwrap_or_default();
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
        match self.values[k] {
            Some(v) => T::from_js(v, Field(at, name)),
            None => T::from_js(check(().into_unknown(&self.env), "undefined")?, Field(at, name)),
        }
    }
}

/// The [`FromJs`] conversion of an input object (a `#[napi(object, object_from_js = false)]`
/// struct, whose doc comments are the TypeScript docs): each field read by its JavaScript name and
/// named by it in errors; an own property that is not one of them is refused.
macro_rules! js_input {
    ($name:ident { $( $field:ident = $js:literal ),* $(,)? }) => {
        impl $crate::from_js::FromJs for $name {
            fn from_js(
                v: napi::bindgen_prelude::Unknown<'_>,
                at: impl flowguard_core::error::At + Copy,
            ) -> flowguard_core::Result<Self> {
                const NAMES: &[&'static str; [$($js),*].len()] = &[$($js),*];
                let p = $crate::from_js::Props::read(v, at, NAMES)?;
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
