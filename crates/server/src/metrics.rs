//! Prometheus metrics: calls and errors by route, status and code, and latency by route.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::app::App;
use crate::error::Code;

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    in_flight: IntGauge,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "flowguard_http_requests_total",
                "HTTP calls by route, status and code (OK when no error)",
            ),
            &["route", "status", "code"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new("flowguard_http_request_duration_seconds", "Time to answer a call, by route")
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0,
                ]),
            &["route"],
        )
        .expect("valid metric");
        let in_flight = IntGauge::new("flowguard_http_requests_in_flight", "Calls being answered now")
            .expect("valid metric");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(in_flight.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Metrics { registry, requests, latency, in_flight }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for these metric kinds.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Counts and times every call. Unknown paths share the route label `unmatched` (so a scan of
/// random paths cannot grow the label set).
pub async fn track(State(app): State<App>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let m = &app.metrics;
    m.in_flight.inc();
    let start = Instant::now();
    let res = next.run(req).await;
    m.in_flight.dec();
    m.latency.with_label_values(&[route.as_str()]).observe(start.elapsed().as_secs_f64());
    let code = res.extensions().get::<Code>().map(|c| c.0).unwrap_or("OK");
    m.requests.with_label_values(&[route.as_str(), res.status().as_str(), code]).inc();
    res
}
