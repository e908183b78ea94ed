//! A panic in a handler is a bug, but its answer is still one of ours (docs/contract/api.md
//! Errors): a 500 problem+json with `X-Request-Id` and the same `request_id` in the body. Needs no
//! database, so it runs once, through the real layer stack.

use axum::Router;
use axum::routing::get;
use reqwest::StatusCode;
use tauros_api::{HttpConfig, with_layers};

#[tokio::test]
async fn a_panicking_handler_answers_500_with_its_request_id() {
    let router = with_layers(
        Router::new().route(
            "/boom",
            get(|| async {
                if true {
                    panic!("a bug in a handler");
                }
                "unreachable"
            }),
        ),
        &HttpConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let client = reqwest::Client::new();

    // A client's own request id is echoed; otherwise one is made.
    for sent in [Some("trace-me-123"), None] {
        let mut req = client.get(format!("http://{addr}/boom"));
        if let Some(id) = sent {
            req = req.header("x-request-id", id);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let header = res
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .expect("X-Request-Id on a panic's 500");
        if let Some(id) = sent {
            assert_eq!(header, id);
        }
        assert_eq!(
            res.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/problem+json")
        );
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["code"], "internal");
        assert_eq!(body["request_id"], header.as_str());
        assert!(
            !body["detail"]
                .as_str()
                .unwrap()
                .contains("a bug in a handler")
        );
    }
}
