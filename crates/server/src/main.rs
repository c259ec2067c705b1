//! The `flowguard-server` binary: configuration, logging, signals.

use clap::Parser;
use flowguard_core::Client;
use flowguard_server::config::Args;
use flowguard_server::{router, transport, App};
use tracing_subscriber::EnvFilter;

fn fail(message: impl std::fmt::Display) -> ! {
    tracing::error!(reason = %message, "cannot start");
    eprintln!("flowguard-server: {message}");
    std::process::exit(2)
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: answering the calls in flight (at most the drain timeout)");
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if args.print_openapi {
        print!("{}", flowguard_server::openapi::json());
        return;
    }
    if args.healthcheck {
        use flowguard_server::healthcheck;
        if args.tls_cert.is_some() {
            fail("--healthcheck speaks plain HTTP: with --tls-cert, check /healthz over HTTPS from outside");
        }
        match healthcheck::probe(healthcheck::target(args.listen), healthcheck::TIMEOUT).await {
            Ok(()) => return,
            Err(e) => {
                eprintln!("flowguard-server: unhealthy: {e}");
                std::process::exit(1)
            }
        }
    }
    let filter = EnvFilter::try_from_env("FLOWGUARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    if args.log_format == "json" {
        tracing_subscriber::fmt().json().with_env_filter(filter).init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    let token = args.token().unwrap_or_else(|e| fail(e));
    let limits = args.limits().unwrap_or_else(|e| fail(e));
    let transport = args.transport().unwrap_or_else(|e| fail(e));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(flowguard_server::tls::config(cert, key).unwrap_or_else(|e| fail(e))),
        _ => None,
    };
    let options = args.open_options().unwrap_or_else(|e| fail(e));
    // The core names the PostgreSQL options `postgres.*`: here they are the --postgres-* flags.
    let client =
        Client::open(options).await.unwrap_or_else(|e| fail(flowguard_server::postgres::flag_error(e)));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .unwrap_or_else(|e| fail(format!("cannot listen on {}: {e}", args.listen)));
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| args.listen.to_string());
    tracing::info!(
        listen = %addr,
        backend = client.kind(),
        auth = token.is_some(),
        tls = args.tls_cert.is_some(),
        "flowguard-server listening"
    );
    let app = App::new(client, token, limits);
    let served = transport::serve(listener, router(app), tls, transport, shutdown_signal()).await;
    if let Err(e) = served {
        fail(format!("server error: {e}"));
    }
    tracing::info!("stopped");
}
