//! `restore`: Tauros restored from a backup under a running peer.

use super::{
    DeadEndRun, VERSIONS, approved_ids, check_final, events_of, finished, human, human_path,
    issuer_env, keys, lifecycle_keys, op, org_of, peer_record, settled, standing, start_peer,
    summary, wait_all,
};
use crate::args::Args;
use crate::checker::{Verdict, db_invoices, peer_operations};
use crate::counters::Counters;
use crate::ctx::{Ctx, prefix};
use crate::driver::Driver;
use crate::process::{Server, free_port};
use crate::workload::{APPROVE, CREATE, Records, SUBMIT, fixture};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

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
pub(crate) async fn restore(
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
