//! The report: one table from the JSON lines, optionally written into docs/RELIABILITY.md.

use crate::{ha, tenancy};
use serde_json::Value;

pub(crate) fn report(path: &str, doc: Option<&str>, command: &str, marker: &str) -> bool {
    let text = std::fs::read_to_string(path).expect("results");
    let runs: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let map_str = |v: &Value| {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let mut t = String::new();
    t.push_str("| scenario | backend | requests by command | keys | dup / conflict attempted | fresh | replayed | 409 mismatch | 409 in-flight | other 4xx | 5xx (500s) | transport | faults injected | recovery ms (min / max) |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let resp = &r["responses"];
        let rec: Vec<u64> = r["recovery_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let faults = map_str(&r["faults"]);
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} |\n",
            r["scenario"].as_str().unwrap_or(""),
            r["backend"].as_str().unwrap_or(""),
            map_str(&r["requests"]),
            n(r, "keys"),
            n(r, "duplicates_attempted"),
            n(r, "conflicts_attempted"),
            n(resp, "fresh"),
            n(resp, "replayed"),
            n(resp, "409_mismatch"),
            n(resp, "409_inflight"),
            n(resp, "other_4xx"),
            n(resp, "5xx"),
            n(r, "http_500"),
            n(resp, "transport"),
            if faults.is_empty() {
                "—".into()
            } else {
                faults
            },
            if rec.is_empty() {
                "—".into()
            } else {
                format!("{} / {}", rec.first().unwrap(), rec.last().unwrap())
            },
        ));
    }
    t.push('\n');
    t.push_str("| scenario | backend | effects: acknowledged / found | issued at peer · webhooks | lost | duplicated | unexpected | recovered | wrong | indeterminate left | seconds | verdict |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut ok = true;
    for r in &runs {
        let eff = |k: &str| {
            let e = &r[format!("effects.{k}")];
            format!("{k} {}/{}", n(e, "acked"), n(e, "found"))
        };
        let extra = if r["effects.issue"].is_object() {
            let i = &r["effects.issue"];
            let w = &r["effects.webhooks"];
            format!(
                "issued {}, at peer {} · webhooks {} expected, {} distinct, {} redelivered",
                n(i, "issued"),
                n(i, "at_peer"),
                n(w, "expected"),
                n(w, "distinct"),
                n(w, "redelivered")
            )
        } else if r["effects.resend"].is_object() {
            let e = &r["effects.resend"];
            format!(
                "webhooks: {} deliveries, {} failed, {} resends ({}), {} received, {} distinct",
                n(e, "deliveries"),
                n(e, "failed"),
                n(e, "resends"),
                map_str(&e["answers"]),
                n(e, "received"),
                n(e, "distinct")
            )
        } else if r["effects.dead_ends"].is_object() {
            r["effects.dead_ends"]["summary"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        } else if r["effects.tenancy"].is_object() {
            r["effects.tenancy"]["summary"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        } else if r["integrity_check"].is_string() {
            format!(
                "integrity_check: {}",
                r["integrity_check"].as_str().unwrap_or("")
            )
        } else {
            "—".into()
        };
        let passed = r["passed"].as_bool() == Some(true);
        ok &= passed;
        let verdict = match (r["expect_loss"].as_bool() == Some(true), passed) {
            (true, true) => "control: loss detected ✓",
            (true, false) => "**control FAILED: no loss seen**",
            (false, true) => "pass",
            (false, false) => "**FAIL**",
        };
        t.push_str(&format!(
            "| {} | {} | {}, {}, {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} |\n",
            r["scenario"].as_str().unwrap_or(""),
            r["backend"].as_str().unwrap_or(""),
            eff("create"),
            eff("submit"),
            eff("approve"),
            extra,
            n(r, "lost"),
            n(r, "duplicated"),
            n(r, "unexpected"),
            n(r, "recovered"),
            n(r, "wrong"),
            n(r, "final_indeterminate"),
            r["seconds"].as_f64().unwrap_or(0.0),
            verdict
        ));
    }
    t.push_str(&tenancy::tables(&runs));
    t.push_str(&ha::tables(&runs));
    println!("{t}");
    if let Some(doc) = doc {
        let old = std::fs::read_to_string(doc).unwrap_or_default();
        // `chaos` for scripts/chaos, `ha` for scripts/ha: each writes only its own block.
        let (start, end) = (
            format!("<!-- {marker}:begin -->"),
            format!("<!-- {marker}:end -->"),
        );
        let (start, end) = (start.as_str(), end.as_str());
        if let (Some(a), Some(b)) = (old.find(start), old.find(end)) {
            let secs: f64 = runs.iter().filter_map(|r| r["seconds"].as_f64()).sum();
            let body = format!(
                "{start}\n```sh\n{command}\n```\n\n{} runs, {:.0} s of scenarios, seed {}.\n\n{t}{end}",
                runs.len(),
                secs,
                runs.first().map_or(0, |r| n(r, "seed")),
            );
            let new = format!("{}{}{}", &old[..a], body, &old[b + end.len()..]);
            std::fs::write(doc, new).expect("write the doc");
            eprintln!("chaos: figures written to {doc}");
        }
    }
    ok
}
