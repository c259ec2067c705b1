//! The `--postgres-url` option (with `--postgres-schema` and `--postgres-pool-size`) turned into
//! the core's PostgreSQL options, and the core's errors about them renamed after the flags. The
//! URL may hold a password: it is never printed (the core redacts it from the driver's messages).

use std::borrow::Cow;

use flowguard_core::backend::postgres::PostgresOptions;
use flowguard_core::error::{FieldPath, Segment};
use flowguard_core::{Error, Result};

const URL_FLAG: &str = "--postgres-url";

/// What the operator gave, before it is checked.
pub struct PostgresFlags<'a> {
    pub url: &'a str,
    pub schema: Option<&'a str>,
    pub pool_size: Option<u32>,
}

/// The core's options, checked; an `ERR_INVALID_ARGUMENT` naming the flag at fault otherwise.
pub fn options(f: &PostgresFlags<'_>) -> Result<PostgresOptions> {
    if f.url.trim().is_empty() {
        return Err(Error::invalid_at(
            URL_FLAG,
            "must be a PostgreSQL URL (postgres://user:password@host:port/database)",
        ));
    }
    let opts = PostgresOptions {
        url: f.url.to_string(),
        schema: f.schema.map(str::to_string),
        pool_size: f.pool_size,
        // TLS is the URL's: sslmode and sslrootcert=<file> (docs/postgres.md).
        tls: None,
        sweep_interval_ms: None,
    };
    opts.schema().map_err(flag_error)?;
    opts.pool_size().map_err(flag_error)?;
    Ok(opts)
}

/// `e` with a field of the core's `postgres` options (`postgres.url`, `postgres.schema`,
/// `postgres.pool_size`) renamed after the flag that gave it; any other error as it is.
pub fn flag_error(mut e: Error) -> Error {
    let flag = match e.field.as_ref().map(FieldPath::segments) {
        Some([Segment::Field(p), Segment::Field(f)]) if p == "postgres" => match f.as_ref() {
            "url" => URL_FLAG,
            "schema" => "--postgres-schema",
            "pool_size" => "--postgres-pool-size",
            _ => return e,
        },
        _ => return e,
    };
    e.field = Some(FieldPath::new(Cow::Borrowed(flag)));
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowguard_core::ErrorCode;

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        let flags = |url, schema, pool_size| PostgresFlags { url, schema, pool_size };
        let o = options(&flags("postgres://u:pw@h/db", Some("fg_1"), Some(4))).unwrap();
        assert_eq!((o.schema.as_deref(), o.pool_size), (Some("fg_1"), Some(4)));
        for (f, flag) in [
            (flags(" ", None, None), "--postgres-url"),
            (flags("postgres://u:secret-value@h/db", Some("Bad-Name"), None), "--postgres-schema"),
            (flags("postgres://u:secret-value@h/db", None, Some(0)), "--postgres-pool-size"),
        ] {
            let e = options(&f).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument);
            assert!(e.to_string().contains(&format!("{flag} must be")), "{e}");
            assert!(!e.to_string().contains("secret-value"), "{e}");
        }
    }

    #[test]
    fn other_errors_are_left_as_they_are() {
        let e = flag_error(Error::invalid_at("prefix", "must be short"));
        assert_eq!(e.to_string(), "ERR_INVALID_ARGUMENT: prefix must be short");
        let e = flag_error(Error::invalid_at(FieldPath::new("postgres").field("url"), "names no host"));
        assert_eq!(e.to_string(), "ERR_INVALID_ARGUMENT: --postgres-url names no host");
    }
}
