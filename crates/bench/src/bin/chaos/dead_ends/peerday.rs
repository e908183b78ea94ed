//! `peerday`: the peer down for a simulated day, forgetting keys.

use super::{
    DeadEndRun, approved_ids, check_final, events_of, finished, human_path, issuer_env, keys,
    lifecycle_keys, peer_arm, settled, standing, start_peer, summary, wait_all,
};
use crate::checker::{Verdict, db_invoices, peer_operations};
use crate::counters::Counters;
use crate::ctx::{Ctx, prefix};
use crate::driver::Driver;
use crate::process::{Server, free_port};
use crate::workload::{APPROVE, CREATE, Records, SUBMIT, fixture};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `peerday`: a day of outage in seconds. Tauros assumes the peer remembers keys for
/// `RETENTION` seconds (`TAUROS_ISSUER_KEY_RETENTION`), and the peer does remember them exactly
/// that long (`--key-retention-seconds`); the outage lasts longer. Some invoices were executed
/// at the peer just before it went down without Tauros learning it (reply dropped, recovery
/// unclear); others are approved during the outage and after it.
pub(crate) async fn peerday(
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
