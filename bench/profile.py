"""Groups `perf script -F ip,sym,dso` samples of Tauros's server by layer (scripts/bench --profile).

Each sample is charged to one layer: the innermost frame of its call chain (leaf first) whose
symbol names a layer below. Frames of no layer (the kernel, libc, malloc, core and alloc) are
skipped, so a system call or an allocation is charged to the Rust code that made it; a sample
with no such frame at all is "unattributed" (by where its leaf is: kernel, libc, other). Middleware layers nest (each one polls the rest of
the request inside it), so what a layer is charged is its own work, not what runs inside it.

--cpu-us is the server's CPU per request measured over the same window: each layer's share of
the samples times that figure is its CPU per request; "in kernel" is the part of a layer's
samples whose leaf is in the kernel (system calls, loopback TCP, wake-ups it caused). Prints one
table, then the top frames (leaf functions) of each layer.
"""
import argparse
import collections
import re
import sys

# (layer, substrings of a demangled symbol); the first layer that matches a frame wins.
LAYERS = [
    ("request id", ["client_request_id", "request_id::", "MakeRequestUuid", "uuid::v4", "getrandom"]),
    ("tracing", ["tower_http::trace", "tracing_core", "tracing_subscriber", "tracing::", "tauros_api::router::span"]),
    ("metrics", ["middleware::metrics", "tauros_api::metrics", "metrics_exporter_prometheus", "metrics::"]),
    ("rate limiter", ["governor", "tauros_app::limits", "rate_limit"]),
    ("headers (security, CORS, problem, panic, body limit/clock, durable)", [
        "security_headers", "problem_details", "durable_answers", "body_timeout", "tower_http::cors",
        "catch_panic", "CatchPanic", "tower_http::limit", "http_body_util::limited",
        "DefaultBodyLimit"]),
    ("auth / credential check", ["presented", "authenticat", "credential", "identity::", "base_x", "subtle::",
                                 "bearer", "http::extract"]),
    ("store (sqlx, PostgreSQL protocol)", ["tauros_store", "sqlx"]),
    ("JSON parsing, validation, re-seal (a replay's body; a GET's stored lines)", [
        "serde_json::de", "serde_json::read", "serde_path_to_error", "validator", "http::rules", "http::json",
        "StrictJson", "unicode_normalization", "tauros_domain::payload", "tauros_domain::lines"]),
    ("serialisation (serde_json)", ["serde_json", "serde::", "_serde::"]),
    ("view building (app, domain, money)", ["tauros_app", "tauros_domain", "rust_decimal"]),
    ("handler / routing (tauros_api, axum)", ["tauros_api", "axum", "matchit"]),
    ("tokio / hyper / tower", ["tokio", "hyper", "mio::", "tower::", "http::", "httparse", "bytes::",
                               "futures_util", "futures_core", "std::sys", "std::thread"]),
]


def short(sym):
    sym = re.sub(r"::h[0-9a-f]{16}$", "", sym)
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
    return sym if len(sym) <= 100 else sym[:97] + "..."


def samples(lines):
    chain = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if chain:
                yield chain
            chain = []
            continue
        m = re.match(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            chain.append((m.group(1), m.group(2)))
    if chain:
        yield chain


def layer_of(chain):
    for sym, _dso in chain:
        for name, needles in LAYERS:
            if any(n in sym for n in needles):
                return name
    # No layer frame: the call chain was cut (frame pointers end in libc, which has none).
    leaf_dso = chain[0][1]
    if "kernel" in leaf_dso:
        return "unattributed: kernel, caller lost"
    if "libc" in leaf_dso:
        return "unattributed: libc (malloc, memcpy), caller lost"
    return "unattributed: other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu-us", type=float, default=None, help="server CPU per request (µs)")
    ap.add_argument("--top", type=int, default=4)
    args = ap.parse_args()
    total = 0
    kernel = 0
    by_layer = collections.Counter()
    kernel_by_layer = collections.Counter()
    leaves = collections.defaultdict(collections.Counter)
    for chain in samples(sys.stdin):
        total += 1
        leaf_sym, leaf_dso = chain[0]
        if "kernel" in leaf_dso:
            kernel += 1
        layer = layer_of(chain)
        by_layer[layer] += 1
        if "kernel" in leaf_dso:
            kernel_by_layer[layer] += 1
        where = "[k] " if "kernel" in leaf_dso else ""
        leaves[layer][where + short(leaf_sym)] += 1
    if total == 0:
        print("no samples (was perf attached to the server?)")
        return
    per = args.cpu_us
    order = [name for name, _ in LAYERS] + [
        "unattributed: kernel, caller lost", "unattributed: libc (malloc, memcpy), caller lost", "unattributed: other"]
    w = max(len(name) for name in order)
    print(f"{total} samples; {100 * kernel / total:.1f} % of them in the kernel (charged to the caller's layer)")
    print(f"{'layer':{w}} {'samples':>8} {'share':>7} {'µs/req':>7} {'in kernel':>9}")
    for name in order:
        n = by_layer.get(name, 0)
        us = f"{per * n / total:7.1f}" if per is not None else "      -"
        k = f"{100 * kernel_by_layer.get(name, 0) / n:8.0f}%" if n else "        -"
        print(f"{name:{w}} {n:>8} {100 * n / total:>6.1f}% {us} {k}")
    if per is not None:
        print(f"{'total (the server CPU per request measured over the window)':{w}} {total:>8} {100.0:>6.1f}% {per:7.1f}")
    print()
    print("top frames (leaf functions) per layer, share of all samples:")
    for name in order:
        if not by_layer.get(name):
            continue
        print(f"  {name}")
        for sym, n in leaves[name].most_common(args.top):
            print(f"    {100 * n / total:5.1f}%  {sym}")


if __name__ == "__main__":
    main()
