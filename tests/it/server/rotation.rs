//! Certificate rotation by Secret-style `..data` symlink swap while a client keeps calling.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::common::*;
use opm_operator::server::TRANSFORMER_REGISTRATIONS_PATH as TR;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_serves_the_new_cert_without_failed_requests_and_rejects_a_bad_pair() {
    let server = TestServer::start_with(Options {
        poll: Duration::from_millis(100),
        ..Options::default()
    })
    .await;
    let first_serial = server.store.info().serial;
    let body = bytes::Bytes::from(to_bytes(&review(
        "rot",
        tr_request(
            "CREATE",
            Some(tr_object(
                "opm-system.k8s-provider",
                "example.com/catalogs/k8s@v1",
                "1.2.0",
            )),
            None,
        ),
    )));

    // A client loop: a fresh connection per call, so every call handshakes with the current cert.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let worker = {
        let (stop, ok, failures, seen) = (stop.clone(), ok.clone(), failures.clone(), seen.clone());
        let client = server.client.clone();
        let addr = server.running.webhook_addr;
        let body = body.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let req = http::Request::post(TR)
                    .header("host", "localhost")
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(body.clone()))
                    .unwrap();
                match client.request(addr, req).await {
                    Ok(r) if r.status == 200 => {
                        ok.fetch_add(1, Ordering::SeqCst);
                        let serial = r.serial.unwrap();
                        let mut s = seen.lock().unwrap();
                        if s.last() != Some(&serial) {
                            s.push(serial);
                        }
                    }
                    Ok(r) => failures
                        .lock()
                        .unwrap()
                        .push(format!("status {}", r.status)),
                    Err(e) => failures.lock().unwrap().push(e),
                }
            }
        })
    };
    eventually(
        "a few calls with the first cert",
        Duration::from_secs(10),
        || async { ok.load(Ordering::SeqCst) >= 5 },
    )
    .await;

    // Rotate: a new leaf from the same CA with an extra SAN, swapped in like a Secret update.
    let mut sans = localhost_sans();
    sans.push("rotated.example".to_string());
    let second = server.ca.issue_server(&sans).unwrap();
    secret_swap(&server.dir(), "2", &second.cert_pem, &second.key_pem);
    eventually(
        "the rotated cert on the wire",
        Duration::from_secs(10),
        || async { seen.lock().unwrap().len() >= 2 },
    )
    .await;
    let at_rotation = ok.load(Ordering::SeqCst);
    eventually(
        "more calls after rotation",
        Duration::from_secs(10),
        || async { ok.load(Ordering::SeqCst) >= at_rotation + 5 },
    )
    .await;
    let second_info = server.store.info();
    assert!(second_info.sans.contains(&"rotated.example".to_string()));
    assert_ne!(second_info.serial, first_serial);
    {
        let s = seen.lock().unwrap();
        assert_eq!(
            s.as_slice(),
            [first_serial.clone(), second_info.serial.clone()]
        );
    }

    // An invalid pair (the key of another cert): rejected, counted, old cert kept.
    let third = server.ca.issue_server(&localhost_sans()).unwrap();
    let stranger = server.ca.issue_server(&localhost_sans()).unwrap();
    secret_swap(&server.dir(), "3", &third.cert_pem, &stranger.key_pem);
    eventually(
        "a counted reload failure",
        Duration::from_secs(10),
        || async {
            metric_value(
                &server.metrics().await,
                r#"cert_reload_total{result="failure"}"#,
            ) == Some(1.0)
        },
    )
    .await;
    let after_bad = ok.load(Ordering::SeqCst);
    eventually(
        "calls after the bad pair",
        Duration::from_secs(10),
        || async { ok.load(Ordering::SeqCst) >= after_bad + 5 },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(15), worker)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(failures.lock().unwrap().as_slice(), [] as [String; 0]);
    assert_eq!(
        server.store.info().serial,
        second_info.serial,
        "the old cert is kept"
    );
    assert_eq!(
        seen.lock().unwrap().last(),
        Some(&second_info.serial),
        "clients still get the second cert"
    );
    let text = server.metrics().await;
    assert_eq!(
        metric_value(&text, r#"cert_reload_total{result="success"}"#),
        Some(1.0)
    );
    assert_eq!(
        metric_value(&text, r#"cert_reload_total{result="failure"}"#),
        Some(1.0)
    );
}
