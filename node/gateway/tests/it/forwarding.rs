//! The gateway's rules against real HTTP replicas on loopback: routing, back-pressure,
//! health, retries, streaming, timeouts and bad input.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ganglion_gateway::{Gateway, GatewayError, Health};
use http::StatusCode;
use http_body_util::BodyExt;

use crate::support::{TestReplica, call, gateway, serve, wait_until};

#[tokio::test]
async fn a_request_comes_back_byte_for_byte_and_is_counted_on_its_replica() {
    let a = TestReplica::start("a").await;
    let (_g, pool, addr) = gateway("echo", &serve(8, false), &[&a]).await;
    let body = r#"{"texts":["A man is eating food."]}"#;
    let (status, headers, got) = call("POST", &format!("http://{addr}/echo/echo?x=1"), body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, body.as_bytes());
    assert_eq!(headers["x-ganglion-replica"], "a");
    assert_eq!(headers["x-test-replica"], "a");
    let usage = pool.views()[0].usage;
    assert_eq!(usage.requests, 1);
    assert_eq!(usage.bytes_in, body.len() as u64);
    assert_eq!(usage.bytes_out, body.len() as u64);
    assert_eq!(usage.failed, 0);
    assert_eq!(pool.views()[0].outstanding, 0);
}

#[tokio::test]
async fn a_request_goes_to_the_replica_with_fewest_outstanding() {
    let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
    let (_g, pool, addr) = gateway("svc", &serve(8, false), &[&a, &b]).await;
    // Two slow requests: one lands on each replica (the second sees one outstanding on the
    // first); a third slow one then ties, and a fourth must go to the other replica.
    let slow = |n: u32| {
        tokio::spawn(async move {
            call("GET", &format!("http://{addr}/svc/slow?ms={}", 800 + n), "").await
        })
    };
    let held: Vec<_> = (0..3).map(slow).collect();
    wait_until(Duration::from_secs(2), || {
        pool.views().iter().map(|v| v.outstanding).sum::<u32>() == 3
    })
    .await;
    let views = pool.views();
    let lighter = views.iter().min_by_key(|v| v.outstanding).expect("two");
    assert_eq!(lighter.outstanding, 1, "{views:?}");
    let (status, headers, _) = call("GET", &format!("http://{addr}/svc/whoami"), "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-ganglion-replica"], lighter.replica.id.as_str());
    for h in held {
        assert_eq!(h.await.expect("joined").0, StatusCode::OK);
    }
}

#[tokio::test]
async fn every_replica_full_is_503_with_retry_after() {
    let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
    let (_g, pool, addr) = gateway("svc", &serve(1, false), &[&a, &b]).await;
    let held: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(async move {
                call("GET", &format!("http://{addr}/svc/slow?ms=1500"), "").await
            })
        })
        .collect();
    wait_until(Duration::from_secs(2), || {
        pool.views().iter().all(|v| v.outstanding == 1)
    })
    .await;
    let (status, headers, body) = call("GET", &format!("http://{addr}/svc/whoami"), "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
    assert_eq!(headers["retry-after"], "1");
    for h in held {
        assert_eq!(h.await.expect("joined").0, StatusCode::OK);
    }
    // Capacity back: served again.
    assert_eq!(
        call("GET", &format!("http://{addr}/svc/whoami"), "")
            .await
            .0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_replica_that_never_passes_its_health_check_is_never_routed_to() {
    let (good, sick) = (
        TestReplica::start("good").await,
        TestReplica::start("sick").await,
    );
    sick.healthy.store(false, Ordering::SeqCst);
    let (_g, pool, addr) = gateway("svc", &serve(8, false), &[&good, &sick]).await;
    for _ in 0..20 {
        let (status, headers, _) = call("GET", &format!("http://{addr}/svc/whoami"), "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["x-ganglion-replica"], "good");
    }
    assert_eq!(sick.served.load(Ordering::SeqCst), 0);
    let sick_view = pool
        .views()
        .into_iter()
        .find(|v| v.replica.id == "sick")
        .expect("sick");
    assert_ne!(sick_view.health, Health::Healthy);
    assert_eq!(sick_view.usage.requests, 0);

    // With only the sick one left: 503, retry after one health interval.
    good.kill();
    pool.remove("good");
    let (status, headers, _) = call("GET", &format!("http://{addr}/svc/whoami"), "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(sick.served.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_replica_failing_its_health_check_leaves_rotation_within_two_intervals_and_returns() {
    let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
    let serve = serve(8, false);
    let interval = Duration::from_secs(u64::from(serve.health.interval_s));
    let (_g, pool, addr) = gateway("svc", &serve, &[&a, &b]).await;
    a.healthy.store(false, Ordering::SeqCst);
    let took = wait_until(interval * 2 + Duration::from_millis(500), || {
        !crate::support::healthy(&pool, "a")
    })
    .await;
    assert!(took <= interval * 2, "out of rotation after {took:?}");
    let before = a.served.load(Ordering::SeqCst);
    for _ in 0..10 {
        let (_, headers, _) = call("GET", &format!("http://{addr}/svc/whoami"), "").await;
        assert_eq!(headers["x-ganglion-replica"], "b");
    }
    assert_eq!(a.served.load(Ordering::SeqCst), before);
    a.healthy.store(true, Ordering::SeqCst);
    wait_until(interval * 2 + Duration::from_millis(500), || {
        crate::support::healthy(&pool, "a")
    })
    .await;
}

#[tokio::test]
async fn a_dead_replica_loses_no_request_the_next_replica_can_take() {
    let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
    let (_g, pool, addr) = gateway("svc", &serve(8, false), &[&a, &b]).await;
    a.kill();
    // Before any health check notices: every request still succeeds. A connection refused
    // never reached the replica, so even a POST is sent on to the other one.
    for method in ["GET", "POST", "GET", "POST"] {
        let (status, headers, _) = call(method, &format!("http://{addr}/svc/echo"), "x").await;
        assert_eq!(status, StatusCode::OK, "{method}");
        assert_eq!(headers["x-ganglion-replica"], "b");
    }
    assert!(!crate::support::healthy(&pool, "a"), "{:#?}", pool.views());
}

#[tokio::test]
async fn a_post_that_reached_a_broken_replica_is_repeated_only_when_the_service_allows_it() {
    for retry_post in [false, true] {
        let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
        let (_g, pool, addr) = gateway("svc", &serve(8, retry_post), &[&a, &b]).await;
        a.breaks.store(true, Ordering::SeqCst);
        // Make `a` the first choice: equal load, so the lower index wins.
        let mut saw_failure = false;
        for _ in 0..4 {
            let (status, _, _) = call("POST", &format!("http://{addr}/svc/echo"), "x").await;
            if retry_post {
                assert_eq!(status, StatusCode::OK);
            } else if status == StatusCode::BAD_GATEWAY {
                saw_failure = true;
            }
        }
        if !retry_post {
            assert!(
                saw_failure,
                "a POST that reached the broken replica was repeated"
            );
        }
        // A GET is idempotent: always repeated on the other replica.
        let (status, headers, _) = call("GET", &format!("http://{addr}/svc/whoami"), "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["x-ganglion-replica"], "b");
        let failed: u64 = pool.views().iter().map(|v| v.usage.failed).sum();
        assert!(failed >= 1);
    }
}

#[tokio::test]
async fn a_server_sent_event_stream_passes_through_as_it_is_sent() {
    let a = TestReplica::start("a").await;
    let (_g, pool, addr) = gateway("svc", &serve(8, false), &[&a]).await;
    let request = http::Request::get(format!("http://{addr}/svc/stream?n=6"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let started = Instant::now();
    let response = crate::support::client()
        .request(request)
        .await
        .expect("answer");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let mut arrivals = Vec::new();
    let mut text = String::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("frame").into_data() {
            arrivals.push(started.elapsed());
            text.push_str(std::str::from_utf8(&data).expect("utf-8"));
        }
    }
    assert_eq!(text.matches("data: ").count(), 6, "{text}");
    // The replica sends one event every 100 ms: the first reaches the client at least 300 ms
    // before the last (a gateway that buffered the body would deliver them together).
    let (first, last) = (arrivals[0], *arrivals.last().expect("events"));
    assert!(last >= first + Duration::from_millis(300), "{arrivals:?}");
    // While streaming the request counts as outstanding; after it, not.
    assert_eq!(pool.views()[0].outstanding, 0);
    assert_eq!(pool.views()[0].usage.bytes_out, text.len() as u64);
}

#[tokio::test]
async fn a_slow_replica_is_a_504_and_bad_input_is_a_4xx() {
    let a = TestReplica::start("a").await;
    let (g, _pool, addr) = gateway("svc", &serve(8, false), &[&a]).await;
    // request_timeout_s is 5.
    let (status, _, body) = call("GET", &format!("http://{addr}/svc/slow?ms=6000"), "").await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body:?}");
    let (status, _, body) = call("GET", &format!("http://{addr}/nosuch/x"), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&body).contains("nosuch"));
    let big = "x".repeat((16 << 20) + 1);
    let (status, _, _) = call("POST", &format!("http://{addr}/svc/echo"), &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    for name in ["", "Upper", "-lead", "_gateway", "a/b", &"x".repeat(64)] {
        assert!(
            matches!(g.add(name, &serve(1, false)), Err(GatewayError::BadName(_))),
            "{name:?}"
        );
    }
    assert!(matches!(
        g.add("svc", &serve(1, false)),
        Err(GatewayError::Duplicate(_))
    ));
}

#[tokio::test]
async fn the_status_route_shows_replicas_and_load() {
    let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
    let (_g, _pool, addr) = gateway("svc", &serve(8, false), &[&a, &b]).await;
    for _ in 0..10 {
        call("GET", &format!("http://{addr}/svc/whoami"), "").await;
    }
    let (status, _, body) = call("GET", &format!("http://{addr}/_gateway/services"), "").await;
    assert_eq!(status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let svc = &v["svc"];
    assert_eq!(svc["replicas"].as_array().expect("replicas").len(), 2);
    let requests: u64 = svc["replicas"]
        .as_array()
        .expect("replicas")
        .iter()
        .map(|r| r["usage"]["requests"].as_u64().expect("count"))
        .sum();
    assert_eq!(requests, 10);
    assert!(svc["load"]["p50_ms"].as_f64().is_some(), "{v}");
    assert!(svc["load"]["requests_per_s"].as_f64().expect("rate") > 0.0);
    let _ = Gateway::new();
}

#[tokio::test]
async fn a_small_answer_broken_off_mid_body_is_retried_when_the_request_may_repeat() {
    let (a, b) = (TestReplica::start("a").await, TestReplica::start("b").await);
    let (_g, pool, addr) = gateway("svc", &serve(8, true), &[&a, &b]).await;
    a.breaks_mid_body.store(true, Ordering::SeqCst);
    // `a` is preferred (lower RTT) and answers half a body, then is gone: the client gets
    // `b`'s whole answer, never a broken one.
    let body = "x".repeat(4096);
    let (status, headers, got) = call("POST", &format!("http://{addr}/svc/echo"), &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-ganglion-replica"], "b");
    assert_eq!(got.len(), body.len());
    let a_view = pool
        .views()
        .into_iter()
        .find(|v| v.replica.id == "a")
        .expect("a");
    assert_eq!((a_view.usage.requests, a_view.usage.failed), (0, 1));
}

#[tokio::test]
async fn an_empty_post_keeps_its_content_length() {
    let a = TestReplica::start("a").await;
    let (_g, _pool, addr) = gateway("svc", &serve(8, false), &[&a]).await;
    // curl's `-d ''`: an empty POST that says `Content-Length: 0`.
    let request = http::Request::post(format!("http://{addr}/svc/length"))
        .header("content-length", "0")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let response = crate::support::client()
        .request(request)
        .await
        .expect("answer");
    assert_eq!(response.status(), StatusCode::OK);
    let said = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(said, "0".as_bytes());
    let (_, _, said) = call("POST", &format!("http://{addr}/svc/length"), "four").await;
    assert_eq!(said, "4".as_bytes());
}

#[tokio::test]
async fn a_stopping_gateway_finishes_the_stream_in_flight_and_takes_no_new_connection() {
    let a = TestReplica::start("a").await;
    let gateway = Gateway::new();
    let pool = gateway.add("svc", &serve(8, false)).expect("service");
    pool.add(a.replica());
    let stop = tokio_util::sync::CancellationToken::new();
    let listening = ganglion_gateway::listen(
        "127.0.0.1:0".parse().expect("addr"),
        std::sync::Arc::clone(&gateway),
        stop.clone(),
    )
    .await
    .expect("listen");
    let addr = listening.addr;
    wait_until(Duration::from_secs(5), || {
        crate::support::healthy(&pool, "a")
    })
    .await;
    let request = http::Request::get(format!("http://{addr}/svc/stream?n=6"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let mut body = crate::support::client()
        .request(request)
        .await
        .expect("answer")
        .into_body();
    let first = body.frame().await.expect("a first event").expect("frame");
    assert!(first.is_data());
    stop.cancel();
    let mut events = 1;
    while let Some(frame) = body.frame().await {
        if frame.expect("the stream finishes whole").is_data() {
            events += 1;
        }
    }
    assert_eq!(events, 6);
    tokio::time::timeout(Duration::from_secs(5), listening.task)
        .await
        .expect("the listener ends once drained")
        .expect("joined");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting"
    );
}
