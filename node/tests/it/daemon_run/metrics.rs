//! Scraping a node's `GET /metrics` (the address from its `node.json`) over plain HTTP/1.1,
//! checking every line is OpenMetrics text and parsing it with `prometheus-parse`.

use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use prometheus_parse::{LineInfo, Scrape, Value};

/// `GET http://<addr><path>`: status, content type and body.
pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect to the metrics endpoint {addr}: {e}"));
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, ctype, String::from_utf8_lossy(&body).into_owned())
}

/// Scrapes `addr`: 200, the OpenMetrics content type, every line a descriptor or a sample,
/// `# EOF` last; then parsed.
pub(crate) async fn scrape(addr: SocketAddr) -> Scrape {
    let (status, ctype, text) = get(addr, "/metrics").await;
    assert_eq!(status, 200, "GET /metrics: {text}");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert_eq!(text.lines().last(), Some("# EOF"), "{text}");
    for line in text.lines() {
        let descriptor = ["# HELP ", "# TYPE ", "# UNIT "]
            .iter()
            .any(|p| line.starts_with(p));
        let sample = matches!(LineInfo::parse(line), LineInfo::Sample { value, .. }
            if value.parse::<f64>().is_ok() || value == "+Inf" || value == "NaN");
        assert!(
            descriptor || sample || line == "# EOF",
            "not OpenMetrics text: {line:?}\n{text}"
        );
    }
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses")
}

/// The value of the gauge, counter or untyped sample `metric` whose labels include `labels`
/// (panics when there is none: the metric must be present).
pub(crate) fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {metric} {labels:?} in {:#?}", s.samples));
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{metric} is not a single value: {other:?}"),
    }
}

/// How many samples `metric` has (one per label set).
pub(crate) fn series(s: &Scrape, metric: &str) -> usize {
    s.samples.iter().filter(|x| x.metric == metric).count()
}
