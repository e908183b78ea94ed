"""Prints the benchmark table: Tauros figures next to the raw SQL bound of the same run."""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
raw = {(r["label"], r["concurrency"]): r for r in rows if r["kind"] == "raw"}
print(f"{'backend':9} {'scenario':14} {'c':>3} {'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
      f"{'p99.9 ms':>9} {'RSS MiB':>8} {'raw ops/s':>10} {'Tauros/raw':>10} {'errors':>6}")
for r in rows:
    if r["kind"] != "tauros":
        continue
    bound = raw.get((r["label"], r["concurrency"])) if r["backend"] == "postgres" else None
    ratio = f"{r['throughput'] / bound['throughput']:.2f}" if bound else "-"
    raw_tps = f"{bound['throughput']:.0f}" if bound else "-"
    print(f"{r['backend']:9} {r['label']:14} {r['concurrency']:>3} {r['throughput']:>9.0f} "
          f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['p999_ms']:>9.2f} "
          f"{r['rss_kib'] / 1024:>8.1f} {raw_tps:>10} {ratio:>10} {r['errors']:>6}")
