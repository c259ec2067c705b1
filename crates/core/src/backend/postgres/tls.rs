//! TLS to PostgreSQL, with libpq's meaning of each `sslmode` (rustls with the ring provider, as
//! the Redis backend's TLS; the driver's glue is tokio-postgres-rustls):
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | |
//! | `prefer` (default without `tls`) | when the server offers it | not checked, unless a CA is given: then its chain |
//! | `require` | always | not checked, unless a CA is given: then its chain (as libpq's `verify-ca`) |
//! | `verify-ca` | always | its chain, to the CA given, else to the system's trust store |
//! | `verify-full` (default with `tls`) | always | its chain, and that it names the host connected to |
//!
//! The CA is `sslrootcert=<file>` of the URL (a PEM file; `system`: the system's trust store), or
//! the PEM text of the `tls.ca` option. A client certificate (for the server's `cert`
//! authentication, or `clientcert=verify-ca` / `verify-full` in its pg_hba.conf) is
//! `sslcert=<file>` and `sslkey=<file>` of the URL, or the PEM text of the `tls.cert` and
//! `tls.key` options: both or neither (libpq would look for `~/.postgresql/postgresql.crt`; flowguard
//! reads no file it was not named). tokio-postgres knows only `disable`, `prefer` and `require`, and
//! none of the files: they are taken out of the URL here, and the driver is told `require` for the
//! two `verify-*` modes, the check being the verifier's.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode as DriverMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, FieldPath, Result};

/// libpq's `sslmode` values (`allow` is not taken: it would try plain text first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(v: &str) -> Option<SslMode> {
        Some(match v {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// What the driver is told: whether to ask for TLS, and whether to go on without it.
    pub fn driver(self) -> DriverMode {
        match self {
            SslMode::Disable => DriverMode::Disable,
            SslMode::Prefer => DriverMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverMode::Require,
        }
    }
}

/// Where the trusted CA certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file (`sslrootcert=<path>`).
    File(String),
    /// PEM text (the `tls.ca` option).
    Pem(String),
    /// The system's trust store (`sslrootcert=system`; or `verify-*` without a CA).
    System,
}

/// Where a client certificate or its key comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum Pem {
    /// A PEM file (`sslcert=<path>`, `sslkey=<path>` of the URL).
    File(String),
    /// PEM text (the `tls.cert`, `tls.key` options).
    Text(String),
}

/// Never prints PEM text (a key is a secret); a file's path is not.
impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(path) => f.debug_tuple("File").field(path).finish(),
            Pem::Text(_) => f.write_str("Text(***)"),
        }
    }
}

/// A client certificate (its chain, as PEM) and its private key, with the fields their errors
/// are reported under.
#[derive(Debug)]
pub struct ClientCert {
    pub cert: Pem,
    pub cert_field: FieldPath,
    pub key: Pem,
    pub key_field: FieldPath,
}

/// The TLS settings of a URL, and the URL without them (for the driver).
#[derive(Debug, PartialEq, Eq)]
pub struct UrlTls {
    /// The URL (or key=value string) without `sslmode`, `sslrootcert`, `sslcert` and `sslkey`.
    pub rest: String,
    pub mode: Option<SslMode>,
    pub root_cert: Option<String>,
    /// `sslcert=<file>`: the client certificate.
    pub cert: Option<String>,
    /// `sslkey=<file>`: the client certificate's key.
    pub key: Option<String>,
}

fn url_error(msg: impl Into<String>) -> Error {
    Error::invalid_at(FieldPath::new("postgres").field("url"), msg)
}

/// Takes `sslmode`, `sslrootcert`, `sslcert` and `sslkey` out of a `postgres://` URL's query or of
/// a key=value string. Other settings are left to the driver. Never echoes the URL.
pub fn split_url(url: &str) -> Result<UrlTls> {
    let (rest, pairs) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        split_query(url)?
    } else {
        split_key_values(url)?
    };
    let mut mode = None;
    let (mut root_cert, mut cert, mut key) = (None, None, None);
    for (k, v) in pairs {
        match k.as_str() {
            "sslmode" => {
                mode = Some(SslMode::parse(&v).ok_or_else(|| {
                    url_error(format!(
                        "has sslmode={:?}: must be disable, prefer, require, verify-ca or verify-full",
                        crate::tracker::truncate(&v, 20)
                    ))
                })?)
            }
            "sslcert" => cert = Some(v),
            "sslkey" => key = Some(v),
            _ => root_cert = Some(v),
        }
    }
    Ok(UrlTls { rest, mode, root_cert, cert, key })
}

fn is_tls_key(k: &str) -> bool {
    matches!(k, "sslmode" | "sslrootcert" | "sslcert" | "sslkey")
}

/// The URL form: the query's `sslmode` and `sslrootcert` (percent-decoded) taken out.
fn split_query(url: &str) -> Result<(String, Vec<(String, String)>)> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_string(), vec![])) };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| url_error("has a query value that is not UTF-8 once decoded"))
    };
    let mut kept = vec![];
    let mut taken = vec![];
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        let key = decode(k)?;
        if is_tls_key(&key) {
            taken.push((key, decode(v)?));
        } else {
            kept.push(part);
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, taken))
}

/// The key=value form (`host=h user=u sslmode=require`, values optionally in single quotes with
/// `\` escapes, as libpq and tokio-postgres read it): `sslmode` and `sslrootcert` taken out, the
/// rest written back quoted.
fn split_key_values(s: &str) -> Result<(String, Vec<(String, String)>)> {
    let bad = || url_error("is neither a postgres:// URL nor key=value settings that can be read");
    let mut chars = s.chars().peekable();
    let mut kept = vec![];
    let mut taken = vec![];
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if key.is_empty() || chars.next() != Some('=') {
            return Err(bad());
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next().ok_or_else(bad)? {
                    '\'' => break,
                    '\\' => value.push(chars.next().ok_or_else(bad)?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                value.push(if c == '\\' { chars.next().ok_or_else(bad)? } else { c });
            }
        }
        if is_tls_key(&key) {
            taken.push((key, value));
        } else {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Ok((kept.join(" "), taken))
}

/// The driver's TLS connector for `mode` with `root` as the trusted CAs (none: see the table
/// above) and `client` as the certificate shown to the server when it asks for one. `field` names
/// the option a bad CA is reported under.
pub fn connector(
    mode: SslMode,
    root: Option<&RootCert>,
    field: FieldPath,
    client: Option<&ClientCert>,
) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, root) {
        (SslMode::VerifyFull, root) => webpki(root.unwrap_or(&RootCert::System), &provider, field)?,
        (SslMode::Disable | SslMode::Prefer | SslMode::Require, None) => {
            Arc::new(Lenient { provider: provider.clone(), chain: None })
        }
        (_, root) => {
            let chain = Some(webpki(root.unwrap_or(&RootCert::System), &provider, field)?);
            Arc::new(Lenient { provider: provider.clone(), chain })
        }
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(crate::ErrorCode::Internal, format!("TLS for PostgreSQL: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => {
            let (chain, key) = identity(c)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                Error::invalid_at(
                    c.key_field.clone(),
                    format!(
                        "and the client certificate cannot be used together ({e}): the key must be the certificate's, \
                         the certificate an X.509 v3 one"
                    ),
                )
            })?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The PEM bytes of a certificate or key: the file's, or the text. Errors name the field, and a
/// file by its path (never its contents).
fn pem_bytes(pem: &Pem, field: &FieldPath, url_key: &str) -> Result<Vec<u8>> {
    match pem {
        Pem::Text(t) => Ok(t.as_bytes().to_vec()),
        Pem::File(path) => std::fs::read(path).map_err(|e| {
            Error::invalid_at(field.clone(), format!("has {url_key}={path:?}, which cannot be read ({e})"))
        }),
    }
}

/// A client certificate's chain and its private key, read and parsed.
fn identity(c: &ClientCert) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let what = |pem: &Pem, url_key: &str, kind: &str| match pem {
        Pem::File(path) => format!("has {url_key}={path:?}, which holds no PEM {kind}"),
        Pem::Text(_) => format!("must be a PEM {kind}"),
    };
    let chain = pem_certs(&pem_bytes(&c.cert, &c.cert_field, "sslcert")?).map_err(|()| {
        Error::invalid_at(
            c.cert_field.clone(),
            what(&c.cert, "sslcert", "certificate (-----BEGIN CERTIFICATE-----)"),
        )
    })?;
    let key = PrivateKeyDer::from_pem_slice(&pem_bytes(&c.key, &c.key_field, "sslkey")?).map_err(|_| {
        Error::invalid_at(
            c.key_field.clone(),
            what(&c.key, "sslkey", "private key (-----BEGIN PRIVATE KEY-----, RSA or EC, unencrypted)"),
        )
    })?;
    Ok((chain, key))
}

/// The certificates of `root`, as a trust store.
fn roots(root: &RootCert, field: &FieldPath) -> Result<RootCertStore> {
    let bad = |msg: String| Error::invalid_at(field.clone(), msg);
    let certs: Vec<CertificateDer<'static>> = match root {
        RootCert::System => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                return Err(Error::new(
                    crate::ErrorCode::BackendUnavailable,
                    "TLS for PostgreSQL: the system's trust store holds no certificate to check the server's with: \
                     give the CA (sslrootcert=<file> in the URL, or the tls.ca option)",
                ));
            }
            found.certs
        }
        RootCert::File(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| bad(format!("has sslrootcert={path:?}, which cannot be read ({e})")))?;
            pem_certs(&pem)
                .map_err(|()| bad(format!("has sslrootcert={path:?}, which holds no PEM certificate")))?
        }
        RootCert::Pem(pem) => pem_certs(pem.as_bytes())
            .map_err(|()| bad("must be PEM certificates (-----BEGIN CERTIFICATE-----)".into()))?,
    };
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad("holds no certificate that can be used as a CA".into()));
    }
    Ok(store)
}

fn pem_certs(pem: &[u8]) -> std::result::Result<Vec<CertificateDer<'static>>, ()> {
    let certs: Vec<_> =
        CertificateDer::pem_slice_iter(pem).collect::<std::result::Result<_, _>>().map_err(|_| ())?;
    if certs.is_empty() {
        Err(())
    } else {
        Ok(certs)
    }
}

fn webpki(
    root: &RootCert,
    provider: &Arc<CryptoProvider>,
    field: FieldPath,
) -> Result<Arc<WebPkiServerVerifier>> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots(root, &field)?), provider.clone())
        .build()
        .map_err(|e| Error::invalid_at(field, format!("cannot be used as a CA ({e})")))
}

/// Every mode but `verify-full`: without a CA (`require` and `prefer` only), the certificate is
/// not checked, as libpq (the handshake's signatures still are); with one, its chain is and its
/// name is not (webpki checks the name after the chain, so a name mismatch means the chain was
/// good).
#[derive(Debug)]
struct Lenient {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_form_loses_its_tls_settings_only() {
        let t = split_url(
            "postgres://u:pw@h:5/db?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(t.rest, "postgres://u:pw@h:5/db?application_name=x");
        assert_eq!((t.mode, t.root_cert.as_deref()), (Some(SslMode::VerifyFull), Some("/tmp/ca.pem")));
        let t = split_url("postgresql://h/db?sslmode=require").unwrap();
        assert_eq!((t.rest.as_str(), t.mode), ("postgresql://h/db", Some(SslMode::Require)));
        let t = split_url("postgres://h/db").unwrap();
        assert_eq!((t.rest.as_str(), t.mode, t.root_cert), ("postgres://h/db", None, None));
    }

    #[test]
    fn the_key_value_form_loses_its_tls_settings_only() {
        let t = split_url("host=h password='a b\\'c' sslmode = verify-ca sslrootcert='/x y/ca.pem'").unwrap();
        assert_eq!(t.rest, "host='h' password='a b\\'c'");
        assert_eq!((t.mode, t.root_cert.as_deref()), (Some(SslMode::VerifyCa), Some("/x y/ca.pem")));
        let pg: tokio_postgres::Config = t.rest.parse().unwrap();
        assert_eq!(pg.get_password(), Some(&b"a b'c"[..]));
    }

    #[test]
    fn a_bad_mode_is_refused_naming_the_url_without_echoing_it() {
        for url in ["postgres://u:secret@h/db?sslmode=allow", "host=h password=secret sslmode=bogus"] {
            let e = split_url(url).unwrap_err();
            assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.url"), "{e}");
            assert!(!e.message.contains("secret"), "{e}");
        }
        assert!(split_url("host=h password='unterminated").is_err());
    }

    #[test]
    fn a_bad_ca_is_refused_by_field() {
        let field = || FieldPath::new("postgres").field("tls").field("ca");
        let e = connector(SslMode::VerifyFull, Some(&RootCert::Pem("not pem".into())), field(), None)
            .err()
            .unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.tls.ca"), "{e}");
        let e =
            connector(SslMode::VerifyCa, Some(&RootCert::File("/nonexistent/ca.pem".into())), field(), None)
                .err()
                .unwrap();
        assert!(e.message.contains("cannot be read"), "{e}");
        assert!(connector(SslMode::Require, None, field(), None).is_ok());
    }

    #[test]
    fn the_client_certificate_and_key_are_taken_out_of_the_url() {
        let t = split_url("postgres://u@h/db?sslcert=%2Fc%2Fme.crt&sslkey=%2Fc%2Fme.key&x=1").unwrap();
        assert_eq!(t.rest, "postgres://u@h/db?x=1");
        assert_eq!((t.cert.as_deref(), t.key.as_deref()), (Some("/c/me.crt"), Some("/c/me.key")));
        let t = split_url("host=h sslcert=/c/me.crt sslkey='/c/my key'").unwrap();
        assert_eq!(t.rest, "host='h'");
        assert_eq!((t.cert.as_deref(), t.key.as_deref()), (Some("/c/me.crt"), Some("/c/my key")));
    }

    #[test]
    fn a_bad_client_certificate_or_key_is_refused_by_field_without_echoing_a_key() {
        let tls = FieldPath::new("postgres").field("tls");
        let client = |cert: Pem, key: Pem| ClientCert {
            cert,
            cert_field: tls.clone().field("cert"),
            key,
            key_field: tls.clone().field("key"),
        };
        let secret = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n";
        let c = client(Pem::Text("not a certificate".into()), Pem::Text(secret.into()));
        let e = connector(SslMode::Require, None, tls.clone(), Some(&c)).err().unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.tls.cert"), "{e}");
        let c = client(Pem::File("/nonexistent/me.crt".into()), Pem::File("/nonexistent/me.key".into()));
        let e = connector(SslMode::Require, None, tls.clone(), Some(&c)).err().unwrap();
        assert!(e.message.contains("sslcert=\"/nonexistent/me.crt\", which cannot be read"), "{e}");
        assert!(!format!("{c:?}").contains("c2VjcmV0"), "{c:?}");
        assert!(!format!("{:?}", Pem::Text(secret.into())).contains("c2VjcmV0"));
    }

    #[test]
    fn the_driver_is_asked_for_tls_in_every_mode_but_disable_and_prefer() {
        assert_eq!(SslMode::Disable.driver(), DriverMode::Disable);
        assert_eq!(SslMode::Prefer.driver(), DriverMode::Prefer);
        for m in [SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
            assert_eq!(m.driver(), DriverMode::Require);
        }
    }
}
