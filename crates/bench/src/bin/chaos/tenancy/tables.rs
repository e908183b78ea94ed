//! The report's tables for the tenancy scenarios (empty when none ran).

use serde_json::Value;

fn answers_str(v: &Value, prefix: &str) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, n)| format!("{} {n}", &k[prefix.len()..]))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

pub(crate) fn tables(runs: &[Value]) -> String {
    let mut t = String::new();
    let noisy: Vec<&Value> = runs.iter().filter(|r| r["noisy"].is_object()).collect();
    if !noisy.is_empty() {
        t.push_str("\n| noisy | B GET p50 / p99 ms (samples), quiet → flood | B create p50 / p99 ms (samples) | B approve → issued p50 / p99 ms (samples) (not issued in bound) | p99 ratio GET / create / issued | B issue-job wait max ms, quiet → flood (bound) | A delivery jobs: wait p50 / max ms, not started | A's flood answers | slow bodies (connections: counters) | black holes: attempts, max in flight per endpoint | B errors | goal |\n");
        t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for r in noisy {
            let n = &r["noisy"];
            let (q, f) = (&n["quiet"], &n["flood"]);
            let pair = |k: &str| {
                format!(
                    "{} / {} ({}) → {} / {} ({})",
                    q[k]["p50_ms"],
                    q[k]["p99_ms"],
                    q[k]["n"],
                    f[k]["p50_ms"],
                    f[k]["p99_ms"],
                    f[k]["n"]
                )
            };
            let slow = &n["slow_bodies"];
            t.push_str(&format!(
                "| {} | {} | {} | {} ({} → {}) | {} / {} / {} | {} → {} ({}) | {} / {}, {} of {} | {} | {}: {} | {}, {} | {} | {} |\n",
                r["backend"].as_str().unwrap_or(""),
                pair("get"),
                pair("create"),
                pair("approve_to_issued"),
                q["not_issued_within_bound"],
                f["not_issued_within_bound"],
                n["p99_ratio"]["get"],
                n["p99_ratio"]["create"],
                n["p99_ratio"]["approve_to_issued"],
                n["b_jobs"]["quiet"]["wait_max_ms"],
                n["b_jobs"]["flood"]["wait_max_ms"],
                n["job_wait_bound_ms"],
                n["a_jobs"]["wait_p50_ms"],
                n["a_jobs"]["wait_max_ms"],
                n["a_jobs"]["not_started"],
                n["a_jobs"]["jobs"],
                answers_str(&n["a_answers"], ""),
                slow["connections"],
                answers_str(&slow["counters"], ""),
                n["black_holes"]["attempts"],
                n["black_holes"]["max_in_flight_per_endpoint"],
                n["b_errors"],
                if n["goal"]["met"] == true { "met" } else { "**missed**" },
            ));
        }
    }
    let heads: Vec<&Value> = runs.iter().filter(|r| r["slowheads"].is_object()).collect();
    if !heads.is_empty() {
        t.push_str("\n| slowheads | attackers (addresses) | prompt client: requests, p50 / p99 / max ms | answers over 1 s | attack: opened, closed by the server | server: shed, header timeouts | goal |\n");
        t.push_str("|---|---|---|---|---|---|---|\n");
        for r in heads {
            let h = &r["slowheads"];
            t.push_str(&format!(
                "| {} | {} | {}, {} / {} / {} | {} | {}, {} | {}, {} | {} |\n",
                r["backend"].as_str().unwrap_or(""),
                h["attackers"],
                h["prompt_requests"],
                h["p50_ms"],
                h["p99_ms"],
                h["max_ms"],
                h["over_goal"],
                h["attack"]["connections opened"],
                h["attack"]["closed by the server"],
                h["shed"],
                h["header_timeouts"],
                if h["goal"]["met"] == true {
                    "met"
                } else {
                    "**missed**"
                },
            ));
        }
    }
    let anon: Vec<&Value> = runs.iter().filter(|r| r["anonflood"].is_object()).collect();
    if !anon.is_empty() {
        t.push_str("\n| anonflood | wrong sign-ins sent | sign-in answers | invitation accepts (64 in parallel) | seconds | RSS start / peak MiB (limit) | legitimate sign-ins (status, attempts, ms) | verdict |\n");
        t.push_str("|---|---|---|---|---|---|---|---|\n");
        for r in anon {
            let a = &r["anonflood"];
            let legit = a["legitimate"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .map(|x| format!("{} ({}, {})", x["status"], x["attempts"], x["ms"]))
                        .collect::<Vec<_>>()
                        .join(" / ")
                })
                .unwrap_or_default();
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} / {} ({}) | {} | {} |\n",
                r["backend"].as_str().unwrap_or(""),
                a["sent"],
                answers_str(&a["answers"], "sign-in "),
                answers_str(&a["answers"], "accept "),
                a["flood_seconds"],
                a["rss_start_mib"],
                a["rss_peak_mib"],
                a["rss_limit_mib"],
                legit,
                if r["passed"] == true {
                    "pass"
                } else {
                    "**FAIL**"
                },
            ));
        }
    }
    t
}
