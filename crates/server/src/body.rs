//! The JSON body of a call: checked content type and encoding, size (by the router's body limit),
//! read time and shape, each failure a coded 400, 408, 413 or 415 naming the field at fault. The
//! body and every object nested in it must be a JSON object: an array is never read by position.
//!
//! Numbers and booleans are also accepted as strings ("60000", "true"): n8n's HTTP Request node
//! sends every value of its "Using Fields Below" body mode as a string.

use std::fmt;
use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, MapAccess, Visitor};

use crate::app::App;
use crate::error::{ApiError, BODY_TIMEOUT, INVALID_JSON, PAYLOAD_TOO_LARGE, UNSUPPORTED_ENCODING};

/// A request body of type `T`.
pub struct Body<T>(pub T);

/// A value of type `T` given as a JSON object, and only as one. serde's derived structs also
/// read a JSON array by field position (`["nightly", 60000]` as `{name, timeoutMs}`), which would
/// bypass field names and the refusal of unknown fields: the body, and every object nested in
/// it (`requests: Vec<Object<RequestIn>>`), is read through this type.
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor(PhantomData)).map(Object)
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

fn is_json(ct: &str) -> bool {
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Whether every `Content-Encoding` of the request is `identity` (or there is none): this server
/// reads bodies as sent and decompresses none.
fn is_identity(req: &Request) -> Result<(), ApiError> {
    for v in req.headers().get_all(header::CONTENT_ENCODING) {
        let v = v.to_str().unwrap_or("?");
        if v.split(',').map(str::trim).any(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity")) {
            let shown: String = v.chars().take(40).collect();
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                UNSUPPORTED_ENCODING,
                format!("Content-Encoding {shown:?} is not accepted: send the body uncompressed"),
            ));
        }
    }
    Ok(())
}

impl<T: DeserializeOwned> FromRequest<App> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, app: &App) -> Result<Self, ApiError> {
        let ct = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !is_json(ct) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                INVALID_JSON,
                "the body must be JSON sent with Content-Type: application/json",
            ));
        }
        is_identity(&req)?;
        let limit = app.limits.body_timeout;
        let read = tokio::time::timeout(limit, Bytes::from_request(req, app)).await.map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                BODY_TIMEOUT,
                format!(
                    "the body was not received within the server's body timeout ({} ms)",
                    limit.as_millis()
                ),
            )
        })?;
        let bytes = read.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    PAYLOAD_TOO_LARGE,
                    "the body is larger than this server accepts",
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    INVALID_JSON,
                    format!("the body could not be read: {}", r.body_text()),
                )
            }
        })?;
        parse(&bytes).map(Body)
    }
}

/// Parses one JSON object of type `T` from `bytes`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Object(value) = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        shape_error(if path == "." { "" } else { &path }, e.into_inner())
    })?;
    de.end().map_err(|e| shape_error("", e))?;
    Ok(value)
}

fn shape_error(path: &str, e: serde_json::Error) -> ApiError {
    let text = e.to_string();
    let text = match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let text = json_words(&text);
    if !e.is_data() {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            INVALID_JSON,
            format!("the body is not valid JSON: {text}"),
        );
    }
    // A missing field is reported at its parent: name the field itself.
    if let Some(name) = text.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
        let field = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        return ApiError::invalid(field, "is required");
    }
    if let Some(name) = text.strip_prefix("duplicate field `").and_then(|r| r.split('`').next()) {
        let field = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        return ApiError::invalid(field, "is given more than once");
    }
    if let Some(rest) = text.strip_prefix("unknown field `") {
        let expected = rest.split_once(", ").map(|(_, e)| e).unwrap_or("");
        let field = match rest.split('`').next() {
            Some(name) if !path.ends_with(name) => {
                format!("{path}.{name}").trim_start_matches('.').to_string()
            }
            _ => path.to_string(),
        };
        return ApiError::invalid(field, format!("is not a field of this call ({expected})"));
    }
    // "invalid type: string \"a\", expected a whole number" → "must be a whole number, got string \"a\"".
    let text = match text.strip_prefix("invalid type: ").or_else(|| text.strip_prefix("invalid value: ")) {
        Some(rest) => match rest.rsplit_once(", expected ") {
            Some((got, expected)) => format!("must be {expected}, got {got}"),
            None => text.clone(),
        },
        None => text,
    };
    if path.is_empty() {
        return ApiError::new(StatusCode::BAD_REQUEST, "ERR_INVALID_ARGUMENT", format!("the body {text}"));
    }
    ApiError::invalid(path, text)
}

/// serde's words for JSON shapes ("sequence", "map", "unit value") in the words of JSON.
fn json_words(text: &str) -> String {
    text.replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected a JSON object")
        .replace("sequence, expected", "an array, expected")
        .replace("map, expected", "an object, expected")
        .replace("unit value, expected", "null, expected")
}

/// A whole number >= 0, given as a number or a string of digits.
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(Whole { signed: false }).map(|v| v.map(|v| v as u64))
}

/// A whole number, given as a number or a string.
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(Whole { signed: true }).map(|v| v.map(|v| v as i64))
}

/// A duration in milliseconds (a number, a fraction kept, or the same as a string), read by the
/// core's one rule for it ([`validate::millis`](flowguard_core::validate::millis)), as the addon
/// reads it.
pub fn opt_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<std::time::Duration>, D::Error> {
    d.deserialize_any(Millis)
}

struct Millis;

impl Millis {
    fn read<E: de::Error>(v: f64) -> Result<Option<std::time::Duration>, E> {
        flowguard_core::validate::millis_reason(v).map(Some).map_err(E::custom)
    }
}

impl<'de> Visitor<'de> for Millis {
    type Value = Option<std::time::Duration>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number of milliseconds")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(std::time::Duration::from_millis(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Self::read(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Self::read(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<f64>() {
            Ok(n) if !v.trim().is_empty() => Self::read(n),
            _ => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// `keepMs`: milliseconds (as [`opt_ms`] reads them), or the word `"forever"`.
pub fn opt_keep<'de, D: Deserializer<'de>>(d: D) -> Result<Option<KeepMs>, D::Error> {
    d.deserialize_any(KeepVisitor)
}

/// A `keepMs` as given: milliseconds or forever (see [`keep`]).
pub enum KeepMs {
    Ms(std::time::Duration),
    Forever,
}

/// The core's [`Keep`](flowguard_core::tracker::Keep) of a `keepMs`.
pub fn keep(v: Option<KeepMs>) -> Option<flowguard_core::tracker::Keep> {
    use flowguard_core::tracker::Keep;
    v.map(|k| match k {
        KeepMs::Ms(d) => Keep::For(d),
        KeepMs::Forever => Keep::Forever,
    })
}

struct KeepVisitor;

impl<'de> Visitor<'de> for KeepVisitor {
    type Value = Option<KeepMs>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number of milliseconds or \"forever\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Millis.visit_u64(v).map(|v| v.map(KeepMs::Ms))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Millis.visit_i64(v).map(|v| v.map(KeepMs::Ms))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Millis.visit_f64(v).map(|v| v.map(KeepMs::Ms))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v.trim() == flowguard_core::tracker::Keep::FOREVER_WORD {
            return Ok(Some(KeepMs::Forever));
        }
        match v.trim().parse::<f64>() {
            Ok(n) if !v.trim().is_empty() => Millis::read(n).map(|v| v.map(KeepMs::Ms)),
            _ => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A JSON value that is present (`null` too: a present `null` is `Some(Value::Null)`); with
/// `#[serde(default)]`, an absent field is `None`.
pub fn present_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// A JSON value as its JSON text (the core checks its size), for a field read by [`present_value`].
pub fn json_text(v: Option<serde_json::Value>) -> Option<String> {
    v.map(|v| v.to_string())
}

/// `true` / `false`, also as strings.
pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    d.deserialize_any(Flag)
}

struct Whole {
    signed: bool,
}

impl Whole {
    fn check<E: de::Error>(&self, v: i128) -> Result<Option<i128>, E> {
        let (min, max) =
            if self.signed { (i64::MIN as i128, i64::MAX as i128) } else { (0, u64::MAX as i128) };
        if v < min || v > max {
            let what = if self.signed { "a whole number" } else { "a whole number of 0 or more" };
            Err(E::custom(format!("must be {what}, got {v}")))
        } else {
            Ok(Some(v))
        }
    }
}

impl<'de> Visitor<'de> for Whole {
    type Value = Option<i128>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.signed { "a whole number" } else { "a whole number of 0 or more" })
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.check(v as i128)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.check(v as i128)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() == 0.0 && v.abs() < 9.3e18 {
            self.check(v as i128)
        } else {
            Err(E::custom(format!("must be a whole number, got {v}")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<i128>() {
            Ok(n) => self.check(n),
            Err(_) => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

struct Flag;

impl<'de> Visitor<'de> for Flag {
    type Value = Option<bool>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("true or false")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}
