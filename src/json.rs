//! Results handed to JavaScript as JSON text and turned into objects by V8's `JSON.parse`.
//!
//! Building a JavaScript object through napi costs one call per property (the key is internalized
//! each time); results of many items (a claim of 10,000 ids is 10,000 objects with nested item
//! states) spend most of their time there. One `JSON.parse` of the serialized results builds the
//! same objects several times faster. The TypeScript types stay those of the `#[napi(object)]`
//! structs, which also derive `Serialize` with the same (camelCase) field names, None omitted.

use napi::bindgen_prelude::*;
use napi::sys;
use serde::Serialize;

use flowguard_core::error::Error as CoreError;

/// JSON text that becomes a JavaScript value when handed to JavaScript.
pub struct Json(String);

/// Serializes a result (on whichever thread computed it).
pub fn json<T: Serialize>(v: &T) -> flowguard_core::Result<Json> {
    json_sized(v, 0)
}

/// Serializes a result into text of about `bytes` reserved up front: the text of thousands of
/// items grown by doubling is copied a dozen times, and each large reallocation makes the
/// allocator sweep the small blocks the items' conversion just freed.
pub fn json_sized<T: Serialize>(v: &T, bytes: usize) -> flowguard_core::Result<Json> {
    let mut out = Vec::with_capacity(bytes);
    serde_json::to_writer(&mut out, v)
        .map_err(|e| CoreError::internal(format!("cannot serialize a result: {e}")))?;
    // serde_json writes UTF-8 only: the check is a formality, linear and cheap next to JSON.parse.
    String::from_utf8(out)
        .map(Json)
        .map_err(|e| CoreError::internal(format!("cannot serialize a result: {e}")))
}

#[allow(unsafe_code)]
impl ToNapiValue for Json {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let env = Env::from_raw(env);
        let parsed = (|| -> Result<Unknown<'_>> {
            let json: Object<'_> = env.get_global()?.get_c_named_property_unchecked(c"JSON")?;
            let parse: Function<'_, String, Unknown<'_>> = json.get_c_named_property_unchecked(c"parse")?;
            parse.apply(json, val.0)
        })();
        parsed
            .map(|v| v.raw())
            .map_err(|e| Error::new(e.status, format!("JSON.parse of a result failed: {}", e.reason)))
    }
}
