//! Command and timing behaviour over real TCP with the `redis` crate.

mod support;

use redis::Value;
use std::time::{Duration, Instant};
use support::*;

fn jobs(v: Value) -> Vec<Vec<Value>> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|e| match e {
                Value::Array(x) => x,
                other => panic!("unexpected job entry {other:?}"),
            })
            .collect(),
        other => panic!("expected array, got {other:?}"),
    }
}

fn bulk(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        other => panic!("expected bulk, got {other:?}"),
    }
}

#[tokio::test]
async fn addjob_getjob_ackjob_round_trip() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("rt");
    let id = addjob(&mut c, &q, "hello", &[]).await;
    assert_eq!(id.len(), 40);
    assert!(id.starts_with(&format!("D-{}-", &server.node_id()[..8])));
    assert!(id.ends_with("-05a1"));
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 1);
    let v = value(&mut c, &["GETJOB", "NOHANG", "FROM", &q])
        .await
        .unwrap();
    let js = jobs(v);
    assert_eq!(js.len(), 1);
    assert_eq!(bulk(&js[0][0]), q.as_bytes());
    assert_eq!(bulk(&js[0][1]), id.as_bytes());
    assert_eq!(bulk(&js[0][2]), b"hello");
    assert_eq!(int(&mut c, &["ACKJOB", &id]).await, 1);
    assert_eq!(value(&mut c, &["SHOW", &id]).await.unwrap(), Value::Nil);
    assert_eq!(
        value(&mut c, &["GETJOB", "NOHANG", "FROM", &q])
            .await
            .unwrap(),
        Value::Nil
    );
    server.shutdown().await;
}

#[tokio::test]
async fn blocking_getjob_woken_by_addjob() {
    let server = start().await;
    let mut c = conn(&server).await;
    let mut waiter = conn(&server).await;
    let q = queue("block");
    let q2 = q.clone();
    let task = tokio::spawn(async move {
        value(&mut waiter, &["GETJOB", "TIMEOUT", "10000", "FROM", &q2]).await
    });
    let blocked = wait_for(Duration::from_secs(5), || {
        let mut c = c.clone();
        let q = q.clone();
        async move { qstat_field(&mut c, &q, "blocked").await == Some(1) }
    })
    .await;
    assert!(blocked.is_some(), "client never blocked");
    let id = addjob(&mut c, &q, "wake", &[]).await;
    let got = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("served in time")
        .unwrap()
        .unwrap();
    let js = jobs(got);
    assert_eq!(bulk(&js[0][1]), id.as_bytes());
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn getjob_timeout_returns_nil() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("to");
    let t0 = Instant::now();
    let v = value(&mut c, &["GETJOB", "TIMEOUT", "300", "FROM", &q])
        .await
        .unwrap();
    assert_eq!(v, Value::Nil);
    let el = t0.elapsed();
    assert!(
        el >= Duration::from_millis(250) && el < Duration::from_secs(3),
        "{el:?}"
    );
}

#[tokio::test]
async fn retry_requeues_with_additional_deliveries() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("retry");
    let t0 = Instant::now();
    let id = addjob(&mut c, &q, "r", &["RETRY", "1"]).await;
    let _ = value(&mut c, &["GETJOB", "FROM", &q]).await.unwrap();
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 0);
    let ok = wait_for(Duration::from_secs(4), || {
        let mut c = c.clone();
        let q = q.clone();
        async move { int(&mut c, &["QLEN", &q]).await == 1 }
    })
    .await;
    assert!(ok.is_some(), "not requeued");
    assert!(
        t0.elapsed() >= Duration::from_millis(700),
        "requeued too early"
    );
    let js = jobs(
        value(&mut c, &["GETJOB", "WITHCOUNTERS", "FROM", &q])
            .await
            .unwrap(),
    );
    assert_eq!(bulk(&js[0][1]), id.as_bytes());
    assert_eq!(js[0][4], Value::Int(0));
    assert_eq!(js[0][6], Value::Int(1));
    assert_eq!(int(&mut c, &["ACKJOB", &id]).await, 1);
}

#[tokio::test]
async fn delay_is_not_early() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("delay");
    let t0 = Instant::now();
    let id = addjob(&mut c, &q, "d", &["DELAY", "1"]).await;
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 0);
    let js = jobs(
        value(&mut c, &["GETJOB", "TIMEOUT", "5000", "FROM", &q])
            .await
            .unwrap(),
    );
    let el = t0.elapsed();
    assert_eq!(bulk(&js[0][1]), id.as_bytes());
    assert!(
        el >= Duration::from_millis(900) && el < Duration::from_secs(3),
        "{el:?}"
    );
}

#[tokio::test]
async fn delays_a_few_ms_apart_take_effect_together() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("slack");
    let t0 = Instant::now();
    addjob(&mut c, &q, "first", &["DELAY", "1"]).await;
    // The second deadline lands 10 ms after the first: a different timer
    // tick, well within the timer slack.
    tokio::time::sleep(Duration::from_millis(10)).await;
    addjob(&mut c, &q, "second", &["DELAY", "1"]).await;
    let first_seen = loop {
        let n = int(&mut c, &["QLEN", &q]).await;
        if n > 0 {
            break n;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "never queued");
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    assert!(t0.elapsed() >= Duration::from_secs(1), "queued early");
    assert_eq!(first_seen, 2, "the two delayed jobs were queued apart");
}

#[tokio::test]
async fn ttl_expires_job() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("ttl");
    let t0 = Instant::now();
    let id = addjob(&mut c, &q, "t", &["TTL", "1"]).await;
    let gone = wait_for(Duration::from_secs(4), || {
        let mut c = c.clone();
        let id = id.clone();
        async move { value(&mut c, &["SHOW", &id]).await.unwrap() == Value::Nil }
    })
    .await;
    assert!(gone.is_some(), "job not expired");
    assert!(t0.elapsed() >= Duration::from_millis(900));
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 0);
}

#[tokio::test]
async fn nack_requeues_and_counts() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("nack");
    let id = addjob(&mut c, &q, "n", &[]).await;
    assert_eq!(
        int(&mut c, &["NACK", &id]).await,
        0,
        "queued job cannot be nacked"
    );
    let _ = value(&mut c, &["GETJOB", "FROM", &q]).await.unwrap();
    assert_eq!(int(&mut c, &["NACK", &id]).await, 1);
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 1);
    let js = jobs(
        value(&mut c, &["GETJOB", "WITHCOUNTERS", "FROM", &q])
            .await
            .unwrap(),
    );
    assert_eq!(js[0][4], Value::Int(1));
    assert_eq!(js[0][6], Value::Int(0));
}

#[tokio::test]
async fn working_postpones_and_dequeues() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("working");
    let id = addjob(&mut c, &q, "w", &["RETRY", "30"]).await;
    assert_eq!(int(&mut c, &["WORKING", &id]).await, 30);
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 0);
    let err = value(
        &mut c,
        &["WORKING", "D-00000000-AAAAAAAAAAAAAAAAAAAAAAAA-0001"],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Some("NOJOB"));
    let err = value(&mut c, &["WORKING", "nope"]).await.unwrap_err();
    assert_eq!(err.code(), Some("BADID"));
}

#[tokio::test]
async fn pause_in_refuses_addjob_and_out_holds_getjob() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("pause");
    let st: String = redis::cmd("PAUSE")
        .arg(&q)
        .arg("in")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(st, "in");
    let err = value(&mut c, &["ADDJOB", &q, "x", "0"]).await.unwrap_err();
    assert_eq!(err.code(), Some("PAUSED"));
    let st: String = redis::cmd("PAUSE")
        .arg(&q)
        .arg("out")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(st, "out");
    let id = addjob(&mut c, &q, "held", &[]).await;
    assert_eq!(
        value(&mut c, &["GETJOB", "NOHANG", "FROM", &q])
            .await
            .unwrap(),
        Value::Nil
    );
    let mut w = conn(&server).await;
    let q2 = q.clone();
    let task =
        tokio::spawn(
            async move { value(&mut w, &["GETJOB", "TIMEOUT", "10000", "FROM", &q2]).await },
        );
    let blocked = wait_for(Duration::from_secs(5), || {
        let mut c = c.clone();
        let q = q.clone();
        async move { qstat_field(&mut c, &q, "blocked").await == Some(1) }
    })
    .await;
    assert!(blocked.is_some());
    let st: String = redis::cmd("PAUSE")
        .arg(&q)
        .arg("none")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(st, "none");
    let js = jobs(task.await.unwrap().unwrap());
    assert_eq!(bulk(&js[0][1]), id.as_bytes());
}

#[tokio::test]
async fn addjob_validation_errors() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("val");
    let cases: &[(&[&str], &str)] = &[
        (&["TTL", "0"], "TTL must be a number > 0"),
        (&["REPLICATE", "0"], "REPLICATE must be between 1 and 65535"),
        (&["BOGUS"], "syntax error"),
        (&["DELAY", "10", "TTL", "10"], "DELAY is greater than TTL"),
    ];
    for (opts, msg) in cases {
        let mut args = vec!["ADDJOB", q.as_str(), "x", "0"];
        args.extend_from_slice(opts);
        let err = value(&mut c, &args).await.unwrap_err();
        assert!(err.to_string().contains(msg), "{opts:?}: {err}");
    }
    let err = value(&mut c, &["ADDJOB", &q, "x", "0", "REPLICATE", "2"])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("NOREPL"));
}
