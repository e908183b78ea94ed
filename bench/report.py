"""Prints the benchmark table: Tauros figures next to the raw SQL bounds of the same run.

Two bounds for PostgreSQL: `exact` is pgbench sending the statements Tauros sends for the same
request (bench/pg/<scenario>.sql); `1stmt` is the one-statement bound for reads (a primary-key
select for a GET, the lock-free read by key for a replay). A third bound is the stack's floor
(crates/bench/src/bin/floor.rs): the cheapest authenticated GET axum + sqlx can answer, run with the same client
and concurrency; `T/floor` compares a GET and a replay with it (a replay's floor is the GET floor:
its cheapest possible answer is a keyed read). The floor's own rows (scenario `floor`) show its
throughput, latency, peak RSS and CPU per request in Tauros's columns. CPU is per request, in µs:
the server's process (Tauros's or the floor's), and PostgreSQL's backends (SQLite runs inside
Tauros).
"""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
raw = {(r["label"], r["concurrency"]): r for r in rows if r["kind"] == "raw"}
floor = {(r["backend"], r.get("client", "loadgen"), r["concurrency"]): r for r in rows if r["kind"] == "floor"}


def num(v, fmt):
    width = int(fmt.split(".")[0])
    return format(v, fmt) if isinstance(v, (int, float)) else "-".rjust(width)


def ratio(r, label):
    bound = raw.get((label, r["concurrency"])) if r["backend"] == "postgres" else None
    return (f"{r['throughput'] / bound['throughput']:.2f}", f"{bound['throughput']:.0f}") if bound else ("-", "-")


def floor_ratio(r):
    if r["kind"] != "tauros" or r["label"] not in ("get", "replay"):
        return "-", "-"
    bound = floor.get((r["backend"], r.get("client", "loadgen"), r["concurrency"]))
    return (f"{r['throughput'] / bound['throughput']:.2f}", f"{bound['throughput']:.0f}") if bound else ("-", "-")


print(f"{'backend':9} {'scenario':14} {'client':8} {'c':>3} {'ops/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
      f"{'p99.9':>7} {'RSS MiB':>7} {'CPU µs':>7} {'DB µs':>6} {'exact/s':>8} {'T/exact':>7} "
      f"{'1stmt/s':>8} {'T/1stmt':>7} {'floor/s':>8} {'T/floor':>7} {'errors':>6} {'units/commit':>12}")
for r in rows:
    if r["kind"] not in ("tauros", "floor"):
        continue
    exact, exact_tps = ratio(r, r["label"]) if r["kind"] == "tauros" else ("-", "-")
    one, one_tps = ratio(r, r["label"] + "-1stmt") if r["kind"] == "tauros" else ("-", "-")
    fl, fl_tps = floor_ratio(r)
    print(f"{r['backend']:9} {r['label']:14} {r.get('client', 'loadgen'):8} {r['concurrency']:>3} "
          f"{r['throughput']:>8.0f} {num(r.get('p50_ms'), '7.2f')} {num(r.get('p99_ms'), '7.2f')} "
          f"{num(r.get('p999_ms'), '7.2f')} {r['rss_kib'] / 1024:>7.1f} "
          f"{num(r.get('server_cpu_us'), '7.0f')} {num(r.get('db_cpu_us'), '6.0f')} "
          f"{exact_tps:>8} {exact:>7} {one_tps:>8} {one:>7} {fl_tps:>8} {fl:>7} {r['errors']:>6} "
          f"{num(r.get('units_per_commit'), '12.1f')}")
