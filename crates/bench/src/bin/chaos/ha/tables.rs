//! The HA tables of the report.

use serde_json::Value;

/// The HA tables of the report (the runs of `scripts/ha`).
pub(crate) fn tables(runs: &[Value]) -> String {
    let mut t = String::new();
    let ha: Vec<&Value> = runs.iter().filter(|r| r["ha"].is_object()).collect();
    if ha.is_empty() {
        return t;
    }
    t.push_str("\n| run | replication | failover | kind | keys | writes acknowledged | lost | duplicated | wrong | promoted after ms | first write after ms | 503 answers (transport errors) during it | 500 answers |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let opt = |v: &Value| v.as_u64().map_or("—".to_owned(), |x| x.to_string());
    for r in &ha {
        let h = &r["ha"];
        for f in r["failovers"].as_array().cloned().unwrap_or_default() {
            t.push_str(&format!(
                "| {} | {} | {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} |\n",
                r["scenario"].as_str().unwrap_or(""),
                h["replication"].as_str().unwrap_or(""),
                n(&f, "n"),
                f["kind"].as_str().unwrap_or(""),
                if f["lag"].as_str().unwrap_or("").is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f["lag"].as_str().unwrap_or(""))
                },
                n(&f, "keys"),
                n(&f, "acknowledged"),
                n(&f, "lost"),
                n(&f, "duplicated"),
                n(&f, "wrong"),
                opt(&f["promoted_ms"]),
                opt(&f["first_write_ms"]),
                n(&f, "answers_503"),
                n(&f, "transport_errors"),
                n(&f, "answers_500"),
            ));
        }
        t.push_str(&format!(
            "| {} | {} | **total** | | {} | {} | {} | {} | {} | | | {} ({}) in all | {} |\n",
            r["scenario"].as_str().unwrap_or(""),
            h["replication"].as_str().unwrap_or(""),
            n(r, "keys"),
            n(h, "acknowledged"),
            n(r, "lost"),
            n(r, "duplicated"),
            n(r, "wrong"),
            n(h, "answers_503"),
            n(h, "transport_errors"),
            n(h, "answers_500"),
        ));
    }
    let fed: Vec<&Value> = ha
        .iter()
        .copied()
        .filter(|r| r["settlement"].is_object())
        .collect();
    if !fed.is_empty() {
        t.push_str("\n| run | payments reported (each invoice issued, paid in full) | acknowledged | redelivered (same event again) | lost | duplicated | wrong amount or state |\n");
        t.push_str("|---|---|---|---|---|---|---|\n");
        for r in fed {
            let p = &r["settlement"];
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r["scenario"].as_str().unwrap_or(""),
                n(p, "payments_sent"),
                n(p, "acknowledged"),
                n(p, "redelivered"),
                n(p, "lost"),
                n(p, "duplicated"),
                n(p, "wrong"),
            ));
        }
    }
    t
}
