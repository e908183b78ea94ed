//! The setup through the public API (sign in as the demo approver, create a fresh agent,
//! customer and destination, and the invoices `replay` and `get` rotate over), or for `floor`
//! the ids of the floor's table.

use crate::Args;
use serde_json::{Value, json};

/// The actors and records one run needs.
pub(crate) struct Fixture {
    pub(crate) client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) human: String,
    pub(crate) agent: String,
    pub(crate) customer: String,
    pub(crate) destination: String,
    /// Keys and ids of invoices created up front.
    pub(crate) invoices: Vec<(String, String)>,
    pub(crate) run: String,
}

pub(crate) async fn post(
    client: &reqwest::Client,
    url: String,
    token: &str,
    body: &Value,
) -> Value {
    let res = client
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("request");
    let status = res.status();
    let body: Value = res.json().await.expect("json");
    assert!(status.is_success(), "setup failed: {status} {body}");
    body
}

pub(crate) fn draft(f: &Fixture, n: u64) -> Value {
    json!({
        "customer_id": f.customer,
        "payment_destination_id": f.destination,
        "currency": "EUR",
        "due_date": "2099-12-31",
        "lines": [
            {"description": "Discovery workshop", "quantity": "1", "unit_amount": "400"},
            {"description": format!("Implementation days, batch {n}"), "quantity": "2", "unit_amount": "400.00"}
        ],
        "reasoning": "Monthly retainer agreed in the signed statement of work."
    })
}

pub(crate) async fn fixture(args: &Args) -> Fixture {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency + 4)
        .build()
        .unwrap();
    let base = args.base_url.trim_end_matches('/').to_owned();
    if args.scenario == "floor" {
        let ids = std::fs::read_to_string(&args.ids).expect("--ids: a file of invoice ids");
        let invoices: Vec<(String, String)> = ids
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(args.pool.max(1))
            .map(|id| (String::new(), id.trim().to_owned()))
            .collect();
        assert!(!invoices.is_empty(), "--ids names no invoice");
        return Fixture {
            client,
            base,
            human: String::new(),
            agent: args.token.clone(),
            customer: String::new(),
            destination: String::new(),
            invoices,
            run: String::new(),
        };
    }
    let session = client
        .post(format!("{base}/v1/sessions"))
        .json(&json!({"email": args.email, "password": args.password}))
        .send()
        .await
        .expect("sign in")
        .json::<Value>()
        .await
        .unwrap();
    let human = session["token"].as_str().expect("signed in").to_owned();
    let agent = post(
        &client,
        format!("{base}/v1/agents"),
        &human,
        &json!({"name": "Load agent"}),
    )
    .await;
    let agent_id = agent["agent"]["id"].as_str().unwrap().to_owned();
    let agent_key = agent["api_key"].as_str().unwrap().to_owned();
    let customer = post(
        &client,
        format!("{base}/v1/customers"),
        &human,
        &json!({"agent_id": agent_id, "name": "Load customer", "email": "load@example.com"}),
    )
    .await;
    let destination = post(
        &client,
        format!("{base}/v1/payment-destinations"),
        &agent_key,
        &json!({"label": "Load", "currency": "EUR", "network": "iban", "address": "DE89370400440532013000"}),
    )
    .await;
    let mut f = Fixture {
        client,
        base,
        human,
        agent: agent_key,
        customer: customer["id"].as_str().unwrap().to_owned(),
        destination: destination["id"].as_str().unwrap().to_owned(),
        invoices: Vec::new(),
        run: agent_id,
    };
    if matches!(args.scenario.as_str(), "replay" | "get" | "fixture") {
        for n in 0..args.pool as u64 {
            let key = format!("{}-pool-{n}", f.run);
            let res = f
                .client
                .post(format!("{}/v1/invoices", f.base))
                .bearer_auth(&f.agent)
                .header("idempotency-key", &key)
                .json(&draft(&f, n))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap();
            let id = res["invoice"]["id"]
                .as_str()
                .expect("pool invoice")
                .to_owned();
            f.invoices.push((key, id));
        }
    }
    f
}
