//! The approver console (docs/CONSOLE.md): its page and assets come from the binary with the right
//! media types, its strict Content-Security-Policy and no framing; `/` leads to it; it needs
//! nothing from another origin. What it does in a browser is tested by `scripts/browser`.

use crate::helpers::{TestApp, both_backends, expect_problem};
use reqwest::StatusCode;
use tauros_api::console::{ASSETS, CONTENT_SECURITY_POLICY, PATH};

both_backends!(
    the_console_is_served_from_the_binary_with_its_types_and_policy,
    the_console_needs_nothing_from_another_origin,
);

fn header<'a>(res: &'a reqwest::Response, name: &str) -> &'a str {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{} lacks {name}", res.url()))
}

async fn the_console_is_served_from_the_binary_with_its_types_and_policy(app: TestApp) {
    // `/` and `/console` lead to the page.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for from in ["/", "/console"] {
        let res = no_redirects.get(app.url(from)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{from}");
        assert_eq!(header(&res, "location"), PATH);
    }

    let page = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.url().path(), PATH);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert_eq!(
        header(&page, "content-security-policy"),
        CONTENT_SECURITY_POLICY
    );
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(
            CONTENT_SECURITY_POLICY.contains(directive),
            "policy lacks {directive}"
        );
    }
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    assert_eq!(header(&page, "x-frame-options"), "DENY");
    assert_eq!(header(&page, "x-content-type-options"), "nosniff");
    assert_eq!(header(&page, "referrer-policy"), "no-referrer");
    assert_eq!(header(&page, "cache-control"), "no-cache");
    let etag = header(&page, "etag").to_owned();
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="app.js"></script>"#));
    // Nothing inline: the policy would refuse it.
    assert_eq!(html.matches("<script").count(), 1, "one script, by src");
    assert!(!html.contains("<style") && !html.contains(" style="));

    // Unchanged since the browser's copy: 304, no body.
    let res = app
        .client
        .get(app.url(PATH))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header(&res, "etag"), etag);

    // Every asset, with its media type, byte for byte.
    for &(name, media_type, body) in ASSETS {
        let res = app
            .client
            .get(app.url(&format!("{PATH}{name}")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{name}");
        let expected = match name.rsplit_once('.').map_or("html", |(_, ext)| ext) {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "svg" => "image/svg+xml",
            _ => "text/html; charset=utf-8",
        };
        assert_eq!(media_type, expected, "{name}");
        assert_eq!(header(&res, "content-type"), expected, "{name}");
        assert_eq!(header(&res, "x-content-type-options"), "nosniff");
        assert!(res.headers().get("etag").is_some(), "{name}");
        assert_eq!(res.text().await.unwrap(), body, "{name}");
    }

    // Unknown files and other methods are problems like everywhere else; /docs keeps its own
    // policy (Swagger UI needs inline styles, the console does not).
    expect_problem(
        app.client
            .get(app.url("/console/missing.js"))
            .send()
            .await
            .unwrap(),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_problem(
        app.client.post(app.url(PATH)).send().await.unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
    let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
    let policy = header(&docs, "content-security-policy");
    assert!(
        policy.contains("style-src 'self' 'unsafe-inline'"),
        "{policy}"
    );
    assert_eq!(header(&docs, "x-frame-options"), "DENY");
}

/// Every module the page loads is one of the embedded assets, and no asset names another
/// origin: the console works with no network but the Tauros server itself.
async fn the_console_needs_nothing_from_another_origin(app: TestApp) {
    let names: Vec<&str> = ASSETS.iter().map(|(name, _, _)| *name).collect();
    for &(name, media_type, body) in ASSETS {
        if media_type.starts_with("text/javascript") {
            for import in body.split("from \"./").skip(1) {
                let target = import.split('"').next().unwrap_or_default();
                assert!(names.contains(&target), "{name} imports {target}");
            }
            assert!(!body.contains("import(\"http"), "{name}");
        }
        if media_type != "image/svg+xml" {
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{name} names another origin"
            );
        }
    }
    // The page talks only to the public API, on this origin: every request it makes is one
    // of the documented /v1/ routes (the integration is exercised by scripts/browser).
    let doc: serde_json::Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for &(name, media_type, body) in ASSETS {
        if !media_type.starts_with("text/javascript") {
            continue;
        }
        for call in body
            .split("\"/v1/")
            .skip(1)
            .chain(body.split("`/v1/").skip(1))
        {
            let path: String = call
                .chars()
                .take_while(|c| !matches!(c, '"' | '`' | '?'))
                .collect();
            // A `${…}` segment stands for any one segment (an id, or the command's name).
            let ours: Vec<&str> = path.split('/').collect();
            let documented = doc["paths"].as_object().unwrap().keys().any(|known| {
                let theirs: Vec<&str> = known.trim_start_matches("/v1/").split('/').collect();
                theirs.len() == ours.len()
                    && theirs
                        .iter()
                        .zip(&ours)
                        .all(|(t, o)| t == o || o.starts_with("${"))
            });
            assert!(
                documented,
                "{name} calls /v1/{path}, which the API does not document"
            );
        }
    }
}
