//! TLS by rustls (the ring provider, as the core's Redis TLS uses), when the server is given a
//! certificate chain and a private key in PEM files.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::app::{router, App};
use crate::transport::{self, Transport};

/// The TLS settings of a certificate chain file and a key file. Errors name the file, never
/// its contents.
pub fn config(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the certificate chain {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key {}: {e}", key.display()))?;
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| format!("the certificate and key cannot be used: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}

/// Serves `app` over TLS on `listener` with the default transport limits until `shutdown`
/// resolves; then stops accepting and drains the connections (see [`transport::serve`]).
pub async fn serve_tls(
    listener: TcpListener,
    app: App,
    tls: TlsAcceptor,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    transport::serve(listener, router(app), Some(tls), Transport::default(), shutdown).await
}
