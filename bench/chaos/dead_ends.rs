//! The dead-end scenarios of the fault campaign (docs/RELIABILITY.md, docs/EFFECTS.md runbook):
//! `refuse` (the peer refuses a seeded fraction), `peerday` (the peer is down for a simulated
//! day and forgets keys) and `restore` (Tauros restored from a backup under a running peer).
//! Each ends with every invoice issued once or waiting visibly for a human, then takes the
//! human path (issue again or cancel) and checks the peer's effects per operation version.

use super::*;

/// Operation versions looked at per invoice (v1, and one more per "issue again").
const VERSIONS: u32 = 6;

/// What a dead-end scenario hands back to `run()`.
pub(super) struct DeadEndRun {
    pub(super) records: Records,
    pub(super) driver: Arc<Driver>,
    pub(super) servers: Vec<Server>,
    pub(super) helpers: Vec<Helper>,
    /// The database the final lifecycle check reads (the restored one for `restore`).
    pub(super) check_url: String,
}

pub(super) fn issuer_env(
    peer: &str,
    workers: usize,
    retention: Option<&str>,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("TAUROS_ISSUER", "http".to_owned()),
        ("TAUROS_ISSUER_URL", format!("{peer}/invoices")),
        ("TAUROS_ISSUER_TIMEOUT_SECONDS", "2".to_owned()),
        ("TAUROS_WORKERS", workers.to_string()),
        // Deliveries have a pool of their own: "no worker" means neither pool.
        ("TAUROS_WEBHOOK_WORKERS", workers.min(2).to_string()),
        ("TAUROS_JOB_POLL_MS", "100".to_owned()),
        ("TAUROS_JOB_LEASE_SECONDS", "3".to_owned()),
    ];
    if let Some(r) = retention {
        env.push(("TAUROS_ISSUER_KEY_RETENTION", r.to_owned()));
    }
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The reference peer on a fixed port and a file of its own (so it can be restarted on both).
fn start_peer(args: &Args, port: u16, retention: Option<u64>) -> Helper {
    let db = format!("{}/{}-{}-peer.db", args.work, args.label, args.backend);
    for attempt in 0..5 {
        let cmd = peer_command(args, port, &db, retention);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spawn_helper(args, cmd, "peer")
        })) {
            Ok(h) => return h,
            Err(_) if attempt < 4 => std::thread::sleep(Duration::from_millis(500)),
            Err(e) => std::panic::resume_unwind(e),
        }
    }
    unreachable!()
}

async fn peer_arm(http: &reqwest::Client, peer: &str, fault: Value) {
    let r = http
        .post(format!("{peer}/faults"))
        .json(&fault)
        .send()
        .await
        .expect("arm a fault");
    assert_eq!(r.status().as_u16(), 201, "arming {fault}");
}

async fn peer_clear(http: &reqwest::Client, peer: &str) {
    let _ = http.delete(format!("{peer}/faults")).send().await;
}

/// The peer's stored answer under `op` (a recovery query), if it holds one.
async fn peer_record(http: &reqwest::Client, peer: &str, op: &str) -> Option<Value> {
    let r = http
        .get(format!("{peer}/invoices/{op}"))
        .send()
        .await
        .ok()?;
    if r.status().as_u16() != 200 {
        return None;
    }
    r.json().await.ok()
}

/// Runs `steps` of the lifecycle for `keys`, `concurrency` keys at a time; a step runs only
/// when the one before it was acknowledged.
pub(super) async fn lifecycle_keys(
    d: &Arc<Driver>,
    f: &Arc<Fixture>,
    records: &Records,
    keys: &[String],
    steps: &[usize],
    concurrency: usize,
) {
    {
        let mut all = records.lock().unwrap();
        for (i, k) in keys.iter().enumerate() {
            all.entry(k.clone()).or_insert_with(|| KeyRecord {
                agent: i % f.agents.len(),
                ..KeyRecord::default()
            });
        }
    }
    let keys = Arc::new(keys.to_vec());
    let steps = Arc::new(steps.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (d, f, records, keys, steps, next) = (
            d.clone(),
            f.clone(),
            records.clone(),
            keys.clone(),
            steps.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(key) = keys.get(i) else { break };
                for &s in steps.iter() {
                    if s > CREATE && records.lock().unwrap()[key].steps[s - 1] != Step::Acked {
                        break;
                    }
                    lifecycle_step(&d, &f, &records, key, s).await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

pub(super) fn keys(pre: &str, set: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{pre}-{set}{i}")).collect()
}

/// The invoice ids of `keys` whose approval was acknowledged.
pub(super) fn approved_ids(records: &Records, keys: &[String]) -> Vec<String> {
    let all = records.lock().unwrap();
    keys.iter()
        .filter_map(|k| all.get(k))
        .filter(|r| r.steps[APPROVE] == Step::Acked)
        .filter_map(|r| r.invoice_id.clone())
        .collect()
}

async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> Value {
    for _ in 0..20 {
        if let Ok(r) = http.get(url).bearer_auth(token).send().await
            && r.status().as_u16() == 200
            && let Ok(v) = r.json::<Value>().await
        {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("GET {url} failed");
}

/// Where an invoice stands: `issued`, `cancelled`, `approved/<issuing status>`, or its state.
pub(super) fn standing(inv: &Value) -> String {
    let state = inv["state"].as_str().unwrap_or("?");
    match (state, inv["issuing"]["status"].as_str()) {
        ("approved", Some(s)) => format!("approved/{s}"),
        _ => state.to_owned(),
    }
}

/// Stops for a human: the invoice waits, visibly, for issue-again or cancel.
fn waits_for_human(inv: &Value) -> bool {
    matches!(
        standing(inv).as_str(),
        "approved/rejected" | "approved/conflict" | "approved/needs_review"
    )
}

/// Polls the invoices (bounded) until `done` holds for each; their last answers.
pub(super) async fn wait_all(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    ids: &[String],
    done: fn(&Value) -> bool,
    within: Duration,
) -> BTreeMap<String, Value> {
    let end = Instant::now() + within;
    let mut out = BTreeMap::new();
    loop {
        for id in ids {
            if out.get(id).is_some_and(done) {
                continue;
            }
            let inv = get_json(http, &format!("{base}/v1/invoices/{id}"), token).await;
            out.insert(id.clone(), inv);
        }
        if out.values().all(done) || Instant::now() > end {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn settled(inv: &Value) -> bool {
    matches!(standing(inv).as_str(), "issued" | "cancelled") || waits_for_human(inv)
}

fn finished(inv: &Value) -> bool {
    matches!(standing(inv).as_str(), "issued" | "cancelled")
}

async fn events_of(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    id: &str,
    action: &str,
) -> usize {
    let v = get_json(
        http,
        &format!("{base}/v1/invoices/{id}/events?limit=100"),
        token,
    )
    .await;
    v["items"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|e| e["action"] == action).count())
}

/// The human path: issue again (202) or cancel (200). Returns the status.
async fn human(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    id: &str,
    issue_again: bool,
    answers: &Counters,
) -> u16 {
    let (path, body) = if issue_again {
        (format!("{base}/v1/invoices/{id}/issue"), json!({}))
    } else {
        (
            format!("{base}/v1/invoices/{id}/cancel"),
            json!({"reason": "Chaos campaign: the human path cancels it."}),
        )
    };
    let status = match http.post(path).bearer_auth(token).json(&body).send().await {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    };
    let what = if issue_again { "issue again" } else { "cancel" };
    answers.add(&format!("{what} {status}"), 1);
    status
}

fn org_of(db: &[DbInvoice]) -> Option<uuid::Uuid> {
    db.first().and_then(|i| uuid::Uuid::parse_str(&i.org).ok())
}

fn op(org: uuid::Uuid, id: &str, version: u32) -> String {
    tauros_domain::effect::operation_key(org, "invoice.issue", id, version).to_string()
}

/// The final check, per invoice and operation version (docs/RELIABILITY.md, "What counts as a
/// duplicate"): at most one effect per version; no more versions at the peer than 1 plus the
/// human's issue-agains of that invoice (Tauros never executes a new version by itself); an
/// issued invoice has its effect at the peer; a cancelled one keeps its number void and has
/// nothing at the peer unless it stopped for a human first; every operation at the peer
/// belongs to an invoice of the run (or, for `restore`, to one the restore erased).
#[allow(clippy::too_many_arguments)]
async fn check_final(
    http: &reqwest::Client,
    peer: &str,
    db: &[DbInvoice],
    finals: &BTreeMap<String, Value>,
    reissued: &HashSet<String>,
    waited: &HashSet<String>,
    erased: &HashSet<String>,
    v: &mut Verdict,
) -> Value {
    let ops = peer_operations(http, peer).await;
    let mut by_op: HashMap<String, u64> = HashMap::new();
    for (k, e) in &ops {
        *by_op.entry(k.clone()).or_default() += e;
    }
    let Some(org) = org_of(db) else {
        v.note("no invoice in the database".into());
        v.lost += 1;
        return json!({});
    };
    let mut expected = HashSet::new();
    for id in erased {
        for k in 1..=VERSIONS {
            expected.insert(op(org, id, k));
        }
    }
    let (mut issued, mut cancelled, mut waiting, mut second) = (0u64, 0u64, 0u64, 0u64);
    let mut cancelled_with_record = 0u64;
    for inv in db {
        let id = uuid_of(&inv.id);
        let mut versions = 0u64;
        for k in 1..=VERSIONS {
            let key = op(org, &id, k);
            let e = by_op.get(&key).copied().unwrap_or(0);
            expected.insert(key);
            if e > 1 {
                v.duplicated += 1;
                v.note(format!("{}: {e} effects under v{k} at the peer", inv.key));
            }
            if e > 0 {
                versions += 1;
            }
        }
        let allowed = 1 + u64::from(reissued.contains(&id));
        if versions > allowed {
            v.duplicated += 1;
            v.note(format!(
                "{}: {versions} versions at the peer, the human asked for {}",
                inv.key,
                allowed - 1
            ));
        }
        let Some(fin) = finals.get(&id) else { continue };
        match standing(fin).as_str() {
            "issued" => {
                issued += 1;
                if versions == 0 {
                    v.lost += 1;
                    v.note(format!("{}: issued locally, nothing at the peer", inv.key));
                }
                if versions == 2 {
                    second += 1;
                }
            }
            "cancelled" => {
                cancelled += 1;
                if fin["number"].is_string() && fin["number_void"] != true {
                    v.wrong += 1;
                    v.note(format!("{}: cancelled with a number not void", inv.key));
                }
                if versions > 0 {
                    cancelled_with_record += 1;
                    if !waited.contains(&id) {
                        v.unexpected += 1;
                        v.note(format!(
                            "{}: cancelled, never stopped for a human, yet at the peer",
                            inv.key
                        ));
                    }
                }
            }
            s if waits_for_human(fin) => {
                waiting += 1;
                v.note(format!("{}: still waiting for a human ({s})", inv.key));
            }
            "approved" => {
                v.lost += 1;
                v.note(format!(
                    "{}: approved, never issued, no stop shown",
                    inv.key
                ));
            }
            _ => {}
        }
    }
    for k in by_op.keys() {
        if !expected.contains(k) {
            v.unexpected += 1;
            v.note(format!("the peer holds {k}, no invoice of this run"));
        }
    }
    let effects: u64 = by_op.values().sum();
    json!({
        "issued": issued,
        "cancelled": cancelled,
        "waiting": waiting,
        "peer_operations": ops.len(),
        "peer_effects": effects,
        "issued_with_two_versions": second,
        "cancelled_with_a_record_at_the_peer": cancelled_with_record,
    })
}

fn pick(ctx: &Ctx, ids: &[String], one_in: u64) -> HashSet<String> {
    let mut out: HashSet<String> = ids
        .iter()
        .filter(|_| ctx.below(one_in) == 0)
        .cloned()
        .collect();
    if out.is_empty()
        && let Some(first) = ids.get(ctx.below(ids.len() as u64) as usize)
    {
        out.insert(first.clone());
    }
    out
}

/// The human path over `ids` (all waiting): a seeded third cancelled, the rest issued again.
async fn human_path(
    ctx: &Ctx,
    http: &reqwest::Client,
    base: &str,
    token: &str,
    ids: &[String],
    answers: &Counters,
    v: &mut Verdict,
) -> HashSet<String> {
    let mut reissued = HashSet::new();
    for id in ids {
        let again = ctx.below(3) != 0;
        let status = human(http, base, token, id, again, answers).await;
        if status != if again { 202 } else { 200 } {
            v.wrong += 1;
            v.note(format!("{id}: the human path answered {status}"));
        }
        if again {
            reissued.insert(id.clone());
        }
    }
    reissued
}

fn summary(figs: &Value, parts: &[(&str, String)]) -> String {
    let mut s: Vec<String> = parts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    s.push(format!(
        "end: issued {}, cancelled {}, waiting {}; peer effects {} in {} operations",
        figs["issued"],
        figs["cancelled"],
        figs["waiting"],
        figs["peer_effects"],
        figs["peer_operations"]
    ));
    s.join("; ")
}

// ------------------------------------------------------------------------------------------

/// `refuse`: under a load of approvals, the peer refuses a seeded fraction (`refuse_422`
/// armed per operation key). Each refused invoice stops at `rejected` (one `issue_rejected`),
/// every other one is issued once; then the fault is cleared and a human issues again or
/// cancels each rejected one.
pub(super) async fn refuse(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> DeadEndRun {
    let args = &ctx.args;
    let q = args.quick;
    let pre = prefix(args);
    let port = free_port();
    let peer = start_peer(args, port, None);
    let mut s = Server::new(args, "serve", issuer_env(&peer.url, 2, None));
    s.start(http, true).await;
    let base = s.base();
    let driver = Arc::new(Driver::new(
        vec![base.clone()],
        true,
        Duration::from_secs(20),
    ));
    let f = Arc::new(fixture(&driver, 3, &args.label).await);
    let token = f.human.clone();
    let records: Records = Arc::default();
    let n = if q { 24 } else { 80 };
    let all = keys(&pre, "r", n);
    lifecycle_keys(&driver, &f, &records, &all, &[CREATE, SUBMIT], 4).await;
    let db = db_invoices(&args.db_url, &pre).await.expect("read");
    let org = org_of(&db).expect("an invoice");
    let created: Vec<String> = {
        let r = records.lock().unwrap();
        all.iter()
            .filter_map(|k| r.get(k))
            .filter(|r| r.steps[SUBMIT] == Step::Acked)
            .filter_map(|r| r.invoice_id.clone())
            .collect()
    };
    let refused = pick(ctx, &created, 4);
    for id in &refused {
        peer_arm(
            http,
            &peer.url,
            json!({"mode": "refuse_422", "op_key": op(org, id, 1), "reason": "chaos: customer tax id missing"}),
        )
        .await;
    }
    ctx.faults
        .add("refuse_422 armed (per key)", refused.len() as u64);
    lifecycle_keys(&driver, &f, &records, &all, &[APPROVE], 4).await;
    let ids = approved_ids(&records, &all);
    let mid = wait_all(http, &base, &token, &ids, settled, Duration::from_secs(40)).await;
    let mut rejected = Vec::new();
    for (id, inv) in &mid {
        let st = standing(inv);
        if st == "approved/rejected" {
            rejected.push(id.clone());
            if !refused.contains(id) {
                v.wrong += 1;
                v.note(format!(
                    "{id}: rejected but the peer was not told to refuse it"
                ));
            }
            let n = events_of(http, &base, &token, id, "issue_rejected").await;
            if n != 1 {
                v.wrong += 1;
                v.note(format!("{id}: {n} issue_rejected events"));
            }
        } else if refused.contains(id) {
            v.wrong += 1;
            v.note(format!("{id}: refused by the peer, but {st}"));
        } else if st != "issued" {
            v.lost += 1;
            v.note(format!("{id}: not refused, yet {st}"));
        }
    }
    let stopped_mid: BTreeMap<String, u64> = mid.values().fold(BTreeMap::new(), |mut m, inv| {
        *m.entry(standing(inv)).or_default() += 1;
        m
    });
    // The cause is fixed: the faults are cleared, and a human takes each one.
    peer_clear(http, &peer.url).await;
    let answers = Counters::default();
    let reissued = human_path(ctx, http, &base, &token, &rejected, &answers, v).await;
    let finals = wait_all(http, &base, &token, &ids, finished, Duration::from_secs(40)).await;
    let db = db_invoices(&args.db_url, &pre).await.expect("read");
    let waited: HashSet<String> = rejected.iter().cloned().collect();
    let figs = check_final(
        http,
        &peer.url,
        &db,
        &finals,
        &reissued,
        &waited,
        &HashSet::new(),
        v,
    )
    .await;
    // Refused means nothing stored: the peer's effects are exactly the local issues.
    let local: u64 = db.iter().map(|i| i.issued as u64).sum();
    if figs["peer_effects"].as_u64() != Some(local) {
        v.wrong += 1;
        v.note(format!(
            "peer effects {} ≠ local issues {local}",
            figs["peer_effects"]
        ));
    }
    let line = summary(
        &figs,
        &[
            ("approved", ids.len().to_string()),
            ("refused", refused.len().to_string()),
            ("stopped", format!("{stopped_mid:?}")),
            ("human", format!("{:?}", answers.snapshot())),
            ("local issues", local.to_string()),
        ],
    );
    let mut figs = figs;
    figs["summary"] = json!(line);
    figs["mid"] = json!(stopped_mid);
    figs["human"] = json!(answers.snapshot());
    extra.insert("effects.dead_ends".into(), figs);
    DeadEndRun {
        records,
        driver,
        servers: vec![s],
        helpers: vec![peer],
        check_url: args.db_url.clone(),
    }
}

// ------------------------------------------------------------------------------------------

/// `peerday`: a day of outage in seconds. Tauros assumes the peer remembers keys for
/// `RETENTION` seconds (`TAUROS_ISSUER_KEY_RETENTION`), and the peer does remember them exactly
/// that long (`--key-retention-seconds`); the outage lasts longer. Some invoices were executed
/// at the peer just before it went down without Tauros learning it (reply dropped, recovery
/// unclear); others are approved during the outage and after it.
pub(super) async fn peerday(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> DeadEndRun {
    const RETENTION: u64 = 3;
    let args = &ctx.args;
    let q = args.quick;
    let pre = prefix(args);
    let port = free_port();
    let mut peer = start_peer(args, port, Some(RETENTION));
    let peer_url = peer.url.clone();
    let env = issuer_env(&peer_url, 2, Some(&format!("{RETENTION}s")));
    let mut s = Server::new(args, "serve", env);
    s.start(http, true).await;
    let base = s.base();
    let driver = Arc::new(Driver::new(
        vec![base.clone()],
        true,
        Duration::from_secs(20),
    ));
    let f = Arc::new(fixture(&driver, 3, &args.label).await);
    let token = f.human.clone();
    let records: Records = Arc::default();
    let (np, nd, no, nq) = if q { (6, 6, 8, 6) } else { (20, 20, 30, 20) };
    let outage = Duration::from_secs(if q { 6 } else { 10 });
    let steps = [CREATE, SUBMIT, APPROVE];
    // Before: issued normally.
    let kp = keys(&pre, "p", np);
    lifecycle_keys(&driver, &f, &records, &kp, &steps, 3).await;
    let ip = approved_ids(&records, &kp);
    wait_all(http, &base, &token, &ip, finished, Duration::from_secs(30)).await;
    // Executed at the peer, the reply lost and every recovery unclear until it goes down.
    peer_arm(
        http,
        &peer_url,
        json!({"mode": "drop_reply_after_commit", "times": nd}),
    )
    .await;
    peer_arm(
        http,
        &peer_url,
        json!({"mode": "recover_unknown", "times": 100_000}),
    )
    .await;
    let kd = keys(&pre, "d", nd);
    lifecycle_keys(&driver, &f, &records, &kd, &steps, 3).await;
    let id_d = approved_ids(&records, &kd);
    let want = ip.len() + id_d.len();
    let end = Instant::now() + Duration::from_secs(20);
    while peer_operations(http, &peer_url).await.len() < want && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let executed_before = peer_operations(http, &peer_url).await.len() - ip.len();
    drop(peer);
    let down_at = Instant::now();
    ctx.faults.add("peer down (simulated day)", 1);
    // During the outage: most approved at its start, a third just before its end (their
    // claims may still be younger than the retention when the peer is back).
    let ko = keys(&pre, "o", no * 2 / 3);
    let kl = keys(&pre, "l", no - no * 2 / 3);
    lifecycle_keys(&driver, &f, &records, &ko, &steps, 2).await;
    lifecycle_keys(&driver, &f, &records, &kl, &[CREATE, SUBMIT], 2).await;
    // The rest of the day (the nemesis' schedule, not a synchronisation).
    let late = outage.saturating_sub(Duration::from_millis(700));
    tokio::time::sleep(late.saturating_sub(down_at.elapsed())).await;
    lifecycle_keys(&driver, &f, &records, &kl, &[APPROVE], 4).await;
    let id_o = approved_ids(&records, &ko);
    let id_l = approved_ids(&records, &kl);
    tokio::time::sleep(outage.saturating_sub(down_at.elapsed())).await;
    peer = start_peer(args, port, Some(RETENTION));
    extra.insert(
        "outage_ms".into(),
        json!(down_at.elapsed().as_millis() as u64),
    );
    // After.
    let kq = keys(&pre, "q", nq);
    lifecycle_keys(&driver, &f, &records, &kq, &steps, 3).await;
    let id_q = approved_ids(&records, &kq);
    let ids: Vec<String> = ip
        .iter()
        .chain(&id_d)
        .chain(&id_o)
        .chain(&id_l)
        .chain(&id_q)
        .cloned()
        .collect();
    let mid = wait_all(http, &base, &token, &ids, settled, Duration::from_secs(45)).await;
    let mut review = Vec::new();
    let mut by_set: BTreeMap<String, u64> = BTreeMap::new();
    for (set, list) in [
        ("before", &ip),
        ("executed-then-down", &id_d),
        ("during", &id_o),
        ("late in the outage", &id_l),
        ("after", &id_q),
    ] {
        for id in list {
            let st = standing(&mid[id]);
            *by_set.entry(format!("{set} {st}")).or_default() += 1;
            if st == "approved/needs_review" {
                review.push(id.clone());
                let n = events_of(http, &base, &token, id, "issue_needs_review").await;
                if n != 1 {
                    v.wrong += 1;
                    v.note(format!("{id}: {n} issue_needs_review events"));
                }
            } else if st != "issued" {
                v.lost += 1;
                v.note(format!("{id} ({set}): {st} after the outage"));
            }
            // The peer executed these and forgot them: only a human may send them again.
            if set == "executed-then-down" && st == "issued" {
                v.wrong += 1;
                v.note(format!(
                    "{id}: issued although the peer had forgotten its key"
                ));
            }
        }
    }
    let answers = Counters::default();
    let reissued = human_path(ctx, http, &base, &token, &review, &answers, v).await;
    let finals = wait_all(http, &base, &token, &ids, finished, Duration::from_secs(40)).await;
    let db = db_invoices(&args.db_url, &pre).await.expect("read");
    let waited: HashSet<String> = review.iter().cloned().collect();
    let mut figs = check_final(
        http,
        &peer.url,
        &db,
        &finals,
        &reissued,
        &waited,
        &HashSet::new(),
        v,
    )
    .await;
    // An invoice the peer executed before the outage and a human issued again has two effects
    // at the peer: the human's decision (needs_review exists for it), counted, not a duplicate.
    let forgotten_reissued = id_d.iter().filter(|i| reissued.contains(*i)).count();
    let line = summary(
        &figs,
        &[
            ("executed before the outage", executed_before.to_string()),
            ("after the outage", format!("{by_set:?}")),
            ("human", format!("{:?}", answers.snapshot())),
            (
                "forgotten by the peer and issued again by the human",
                forgotten_reissued.to_string(),
            ),
        ],
    );
    figs["summary"] = json!(line);
    figs["mid"] = json!(by_set);
    figs["human"] = json!(answers.snapshot());
    figs["forgotten_then_reissued_by_human"] = json!(forgotten_reissued);
    extra.insert("effects.dead_ends".into(), figs);
    DeadEndRun {
        records,
        driver,
        servers: vec![s],
        helpers: vec![peer],
        check_url: args.db_url.clone(),
    }
}

// ------------------------------------------------------------------------------------------

async fn backup(args: &Args, file: &str) {
    if args.backend == "postgres" {
        let st = Command::new("pg_dump")
            .arg("--format=custom")
            .arg("--file")
            .arg(file)
            .arg(&args.db_url)
            .status()
            .expect("pg_dump");
        assert!(st.success(), "pg_dump failed");
    } else {
        let pool = sqlx::SqlitePool::connect(&args.db_url)
            .await
            .expect("sqlite");
        sqlx::query(sqlx::AssertSqlSafe(format!("vacuum into '{file}'")))
            .execute(&pool)
            .await
            .expect("vacuum into");
        pool.close().await;
    }
}

/// Restores the backup into a fresh database; its URL.
async fn restore_into(args: &Args, file: &str) -> String {
    if args.backend == "postgres" {
        let name = format!(
            "{}_restored",
            args.db_url.rsplit('/').next().unwrap_or("chaos")
        );
        let url = format!(
            "{}/{name}",
            args.db_url.rsplit_once('/').map_or("", |(a, _)| a)
        );
        let pool = sqlx::PgPool::connect(&args.db_url).await.expect("pg");
        sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
            .execute(&pool)
            .await
            .expect("create database");
        pool.close().await;
        let st = Command::new("pg_restore")
            .arg("--no-owner")
            .arg("--exit-on-error")
            .arg("--dbname")
            .arg(&url)
            .arg(file)
            .status()
            .expect("pg_restore");
        assert!(st.success(), "pg_restore failed");
        url
    } else {
        let path = format!("{}/{}-{}-restored.db", args.work, args.label, args.backend);
        std::fs::copy(file, &path).expect("copy the backup");
        format!("sqlite://{path}?mode=rwc")
    }
}

/// `restore`: a backup is taken while some approved invoices wait unnumbered for their jobs;
/// after it those are issued and more invoices are created and issued; then Tauros is
/// restarted on the restored backup while the peer keeps running. The waiting invoices are
/// numbered again in another order (an approver's issue, newest first), so the peer holds
/// their keys with other numbers; new invoices re-use numbers the peer saw for invoices the
/// restore erased.
pub(super) async fn restore(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> DeadEndRun {
    let args = &ctx.args;
    let q = args.quick;
    let pre = prefix(args);
    let port = free_port();
    let peer = start_peer(args, port, None);
    let (np, na, nb, nc) = if q { (6, 8, 6, 6) } else { (20, 30, 20, 20) };
    let steps = [CREATE, SUBMIT, APPROVE];
    let records: Records = Arc::default();
    let erased_records: Records = Arc::default();
    // Before the backup: issued normally.
    let mut s = Server::new(args, "serve", issuer_env(&peer.url, 2, None));
    s.start(http, true).await;
    let driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(20)));
    let f = Arc::new(fixture(&driver, 3, &args.label).await);
    let token = f.human.clone();
    let kp = keys(&pre, "p", np);
    lifecycle_keys(&driver, &f, &records, &kp, &steps, 3).await;
    let ip = approved_ids(&records, &kp);
    wait_all(
        http,
        &s.base(),
        &token,
        &ip,
        finished,
        Duration::from_secs(30),
    )
    .await;
    s.kill();
    // Approved while no worker runs: their jobs wait, unnumbered, in the backup.
    let mut s0 = Server::new(args, "serve-noworker", issuer_env(&peer.url, 0, None));
    s0.start(http, false).await;
    *driver.bases.lock().unwrap() = vec![s0.base()];
    let ka = keys(&pre, "a", na);
    lifecycle_keys(&driver, &f, &records, &ka, &steps, 3).await;
    let ia = approved_ids(&records, &ka);
    let file = format!("{}/{}-{}.backup", args.work, args.label, args.backend);
    backup(args, &file).await;
    ctx.faults.add("backup taken", 1);
    s0.kill();
    // After the backup: the waiting ones are issued, and more invoices are issued.
    let mut s1 = Server::new(args, "serve-after", issuer_env(&peer.url, 2, None));
    s1.start(http, false).await;
    *driver.bases.lock().unwrap() = vec![s1.base()];
    let kb = keys(&pre, "b", nb);
    lifecycle_keys(&driver, &f, &erased_records, &kb, &steps, 3).await;
    let ib = approved_ids(&erased_records, &kb);
    let both: Vec<String> = ia.iter().chain(&ib).cloned().collect();
    let before = wait_all(
        http,
        &s1.base(),
        &token,
        &both,
        finished,
        Duration::from_secs(30),
    )
    .await;
    let old_numbers: HashMap<String, String> = before
        .iter()
        .map(|(id, inv)| (id.clone(), inv["number"].as_str().unwrap_or("").to_owned()))
        .collect();
    if before.values().any(|i| standing(i) != "issued") {
        v.note("not every invoice issued before the restore".into());
    }
    s1.kill();
    // The restore, the peer still running.
    let restored_url = restore_into(args, &file).await;
    ctx.faults.add("database restored", 1);
    let rargs = Args {
        db_url: restored_url.clone(),
        ..args.clone()
    };
    let mut s2 = Server::new(
        &rargs,
        "serve-restored-noworker",
        issuer_env(&peer.url, 0, None),
    );
    s2.start(http, false).await;
    let base2 = s2.base();
    *driver.bases.lock().unwrap() = vec![base2.clone()];
    // An approver numbers the waiting ones again, newest first.
    let numbering = Counters::default();
    for id in ia.iter().rev() {
        human(http, &base2, &token, id, true, &numbering).await;
    }
    extra.insert("renumbering".into(), json!(numbering.snapshot()));
    let answers = Counters::default();
    s2.kill();
    let mut s3 = Server::new(&rargs, "serve-restored", issuer_env(&peer.url, 2, None));
    s3.start(http, false).await;
    let base3 = s3.base();
    *driver.bases.lock().unwrap() = vec![base3.clone()];
    let kc = keys(&pre, "c", nc);
    lifecycle_keys(&driver, &f, &records, &kc, &steps, 3).await;
    let ic = approved_ids(&records, &kc);
    let ids: Vec<String> = ip.iter().chain(&ia).chain(&ic).cloned().collect();
    let mid = wait_all(http, &base3, &token, &ids, settled, Duration::from_secs(40)).await;
    let db = db_invoices(&restored_url, &pre).await.expect("read");
    let org = org_of(&db).expect("an invoice");
    let mut conflicts = Vec::new();
    let mut by_set: BTreeMap<String, u64> = BTreeMap::new();
    let mut renumbered = 0u64;
    for (set, list) in [
        ("before backup", &ip),
        ("waiting at backup", &ia),
        ("after restore", &ic),
    ] {
        for id in list {
            let inv = &mid[id];
            let st = standing(inv);
            *by_set.entry(format!("{set} {st}")).or_default() += 1;
            let number = inv["number"].as_str().unwrap_or("");
            if old_numbers.get(id).is_some_and(|n| n != number) {
                renumbered += 1;
            }
            if st == "approved/conflict" {
                conflicts.push(id.clone());
                let reason = inv["issuing"]["reason"].as_str().unwrap_or("");
                let old = old_numbers.get(id).map_or("", String::as_str);
                if !(reason.contains(number) && reason.contains(old)) {
                    v.wrong += 1;
                    v.note(format!(
                        "{id}: conflict reason without both numbers: {reason}"
                    ));
                }
                let n = events_of(http, &base3, &token, id, "issue_conflict").await;
                if n != 1 {
                    v.wrong += 1;
                    v.note(format!("{id}: {n} issue_conflict events"));
                }
            } else if st == "issued" {
                // Finalised only on matching records.
                let rec = peer_record(http, &peer.url, &op(org, id, 1)).await;
                let held = rec.as_ref().map(|r| r["request"]["number"].clone());
                if held.as_ref().and_then(Value::as_str) != Some(number)
                    || rec.as_ref().map(|r| r["request"]["invoice_id"].clone()) != Some(json!(id))
                {
                    v.wrong += 1;
                    v.note(format!("{id}: issued as {number}, the peer holds {held:?}"));
                }
            } else {
                v.lost += 1;
                v.note(format!("{id} ({set}): {st} after the restore"));
            }
        }
    }
    let reissued = human_path(ctx, http, &base3, &token, &conflicts, &answers, v).await;
    let finals = wait_all(
        http,
        &base3,
        &token,
        &ids,
        finished,
        Duration::from_secs(40),
    )
    .await;
    let db = db_invoices(&restored_url, &pre).await.expect("read");
    let waited: HashSet<String> = conflicts.iter().cloned().collect();
    let erased: HashSet<String> = ib.iter().cloned().collect();
    let mut figs = check_final(
        http, &peer.url, &db, &finals, &reissued, &waited, &erased, v,
    )
    .await;
    // Numbers: each number is finalised by Tauros for at most one invoice (the record under
    // the version it completed); numbers the peer holds for two invoices are counted apart.
    let mut finalised: HashMap<String, HashSet<String>> = HashMap::new();
    for (id, inv) in &finals {
        if standing(inv) != "issued" {
            continue;
        }
        let number = inv["number"].as_str().unwrap_or("").to_owned();
        let mut found = false;
        for k in (1..=VERSIONS).rev() {
            if let Some(rec) = peer_record(http, &peer.url, &op(org, id, k)).await {
                if rec["request"]["number"] == json!(number)
                    && rec["request"]["invoice_id"] == json!(id)
                {
                    found = true;
                }
                break;
            }
        }
        if !found {
            v.wrong += 1;
            v.note(format!(
                "{id}: issued as {number}, no matching record at the peer"
            ));
        }
        finalised.entry(number).or_default().insert(id.clone());
    }
    for (number, owners) in &finalised {
        if owners.len() > 1 {
            v.wrong += 1;
            v.note(format!("{number} finalised for {} invoices", owners.len()));
        }
    }
    let mut at_peer: HashMap<String, HashSet<String>> = HashMap::new();
    for (key, _) in peer_operations(http, &peer.url).await {
        if let Some(rec) = peer_record(http, &peer.url, &key).await {
            at_peer
                .entry(rec["request"]["number"].as_str().unwrap_or("").to_owned())
                .or_default()
                .insert(
                    rec["request"]["invoice_id"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                );
        }
    }
    let shared = at_peer.values().filter(|o| o.len() > 1).count();
    let shared_erased = at_peer
        .values()
        .filter(|o| o.len() > 1 && o.iter().any(|i| erased.contains(i)))
        .count();
    let line = summary(
        &figs,
        &[
            ("erased by the restore", format!("{} issued", ib.len())),
            ("renumbered after the restore", renumbered.to_string()),
            ("after the restore", format!("{by_set:?}")),
            ("human", format!("{:?}", answers.snapshot())),
            (
                "numbers at the peer under two invoices",
                format!("{shared} ({shared_erased} with an erased one)"),
            ),
        ],
    );
    figs["summary"] = json!(line);
    figs["mid"] = json!(by_set);
    figs["human"] = json!(answers.snapshot());
    figs["erased"] = json!(ib.len());
    figs["renumbered"] = json!(renumbered);
    figs["numbers_shared_at_peer"] = json!(shared);
    figs["numbers_shared_with_erased"] = json!(shared_erased);
    extra.insert("effects.dead_ends".into(), figs);
    DeadEndRun {
        records,
        driver,
        servers: vec![s, s0, s1, s2, s3],
        helpers: vec![peer],
        check_url: restored_url,
    }
}
