//! Conversion of JavaScript arguments, with errors that name the field.

use napi::bindgen_prelude::*;
use napi::{JsValue, ValueType};

use flowguard_core::error::{Error, Result};

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

fn kind(v: &Unknown) -> Result<ValueType> {
    v.get_type().map_err(|e| Error::internal(format!("cannot read an argument's type: {e}")))
}

fn wrong(field: &str, expected: &str, got: ValueType) -> Error {
    Error::invalid(format!("{field} must be {expected}, got {}", type_name(got)))
}

fn conv<T>(r: napi::Result<T>, field: &str) -> Result<T> {
    r.map_err(|e| Error::invalid(format!("{field} could not be read: {}", e.reason)))
}

pub fn string(v: &Unknown, field: &str) -> Result<String> {
    match kind(v)? {
        ValueType::String => conv(unsafe { v.cast::<String>() }, field),
        t => Err(wrong(field, "a string", t)),
    }
}

fn is_absent(t: ValueType) -> bool {
    matches!(t, ValueType::Undefined | ValueType::Null)
}

pub fn opt_string(v: &Unknown, field: &str) -> Result<Option<String>> {
    match kind(v)? {
        t if is_absent(t) => Ok(None),
        ValueType::String => conv(unsafe { v.cast::<String>() }, field).map(Some),
        t => Err(wrong(field, "a string", t)),
    }
}

pub fn opt_number(v: &Unknown, field: &str) -> Result<Option<f64>> {
    match kind(v)? {
        t if is_absent(t) => Ok(None),
        ValueType::Number => conv(unsafe { v.cast::<f64>() }, field).map(Some),
        t => Err(wrong(field, "a number", t)),
    }
}

pub fn opt_bool(v: &Unknown, field: &str) -> Result<Option<bool>> {
    match kind(v)? {
        t if is_absent(t) => Ok(None),
        ValueType::Boolean => conv(unsafe { v.cast::<bool>() }, field).map(Some),
        t => Err(wrong(field, "a boolean", t)),
    }
}

/// An optional options object: undefined or null give None.
pub fn opt_object<'e>(v: Option<&Unknown<'e>>, field: &str) -> Result<Option<Object<'e>>> {
    let Some(v) = v else { return Ok(None) };
    match kind(v)? {
        t if is_absent(t) => Ok(None),
        ValueType::Object => conv(unsafe { v.cast::<Object>() }, field).map(Some),
        t => Err(wrong(field, "an object", t)),
    }
}

pub fn object<'e>(v: &Unknown<'e>, field: &str) -> Result<Object<'e>> {
    match kind(v)? {
        ValueType::Object => conv(unsafe { v.cast::<Object>() }, field),
        t => Err(wrong(field, "an object", t)),
    }
}

/// A property of an options object (undefined when missing).
pub fn prop<'e>(o: &Object<'e>, name: &str) -> Result<Unknown<'e>> {
    o.get_named_property::<Unknown>(name)
        .map_err(|e| Error::invalid(format!("{name} could not be read: {}", e.reason)))
}

fn array<'e>(v: &Unknown<'e>, field: &str) -> Result<(Object<'e>, u32)> {
    let t = kind(v)?;
    let is_array = t == ValueType::Object && v.is_array().unwrap_or(false);
    if !is_array {
        return Err(wrong(field, "an array", t));
    }
    let o = conv(unsafe { v.cast::<Object>() }, field)?;
    let len = conv(o.get_array_length(), field)?;
    Ok((o, len))
}

/// An array of strings. Fast path: one `JSON.stringify` of the array and one parse in Rust, rather
/// than three napi calls per element; anything that is not plainly an array of strings (a number,
/// a hole, a lone surrogate) takes the element-wise path, which names the offending element.
pub fn strings(v: &Unknown, field: &str) -> Result<Vec<String>> {
    let (o, len) = array(v, field)?;
    flowguard_core::validate::batch_len(field, len as usize)?;
    if let Some(all) = strings_via_json(v) {
        if all.len() == len as usize {
            return Ok(all);
        }
    }
    (0..len)
        .map(|i| {
            let e = conv(o.get_element::<Unknown>(i), field)?;
            string(&e, &format!("{field}[{i}]"))
        })
        .collect()
}

pub fn objects<'e>(v: &Unknown<'e>, field: &str) -> Result<Vec<Object<'e>>> {
    let (o, len) = array(v, field)?;
    flowguard_core::validate::batch_len(field, len as usize)?;
    (0..len)
        .map(|i| {
            let e = conv(o.get_element::<Unknown>(i), field)?;
            object(&e, &format!("{field}[{i}]"))
        })
        .collect()
}

fn strings_via_json(v: &Unknown) -> Option<Vec<String>> {
    use napi::sys;
    let raw = v.value();
    let env = raw.env;
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
            || !ok(sys::napi_call_function(env, json, stringify, 1, &raw.value, &mut out))
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
