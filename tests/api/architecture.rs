//! The layers are crates, and each crate's manifest says what it may use (docs/ARCHITECTURE.md).
//! The compiler refuses an import of a crate that is not a dependency; this test refuses the
//! dependency itself, so a wrong-way arrow cannot be added by editing a Cargo.toml either.
//! Needs no database: runs once.

use std::collections::BTreeSet;

/// The names under `[dependencies]` (not dev- or build-dependencies) of `crates/<dir>`.
fn dependencies(dir: &str) -> BTreeSet<String> {
    let path = format!("{}/crates/{dir}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut names = BTreeSet::new();
    let mut in_dependencies = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line
            .split(['=', '.', ' '])
            .next()
            .unwrap_or_default()
            .trim();
        names.insert(name.to_owned());
    }
    assert!(!names.is_empty(), "{path} lists no [dependencies]");
    names
}

fn tauros_crates(deps: &BTreeSet<String>) -> BTreeSet<&str> {
    deps.iter()
        .map(String::as_str)
        .filter(|d| d.starts_with("tauros"))
        .collect()
}

fn assert_none_of(dir: &str, deps: &BTreeSet<String>, forbidden: &[&str]) {
    let found: Vec<&&str> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
    assert!(
        found.is_empty(),
        "crates/{dir} must not depend on {found:?} (docs/ARCHITECTURE.md, Crates)"
    );
}

/// What talks to the outside world: a database, the network, a runtime, HTTP or its schemas.
const IO: &[&str] = &[
    "sqlx",
    "tokio",
    "axum",
    "hyper",
    "hyper-util",
    "reqwest",
    "tower",
    "tower-http",
    "utoipa",
    "rmcp",
    "async-trait",
    "tracing",
    "metrics",
];

/// Serving HTTP and MCP: the API crate's business only. (The application's views derive their
/// OpenAPI schemas, so `utoipa` is allowed there, and only there below the API.)
const SERVING: &[&str] = &[
    "axum",
    "hyper",
    "hyper-util",
    "tower",
    "tower-http",
    "utoipa-axum",
    "rmcp",
];

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let domain = dependencies("domain");
    assert_none_of("domain", &domain, IO);
    assert_eq!(
        tauros_crates(&domain),
        BTreeSet::new(),
        "the domain is the ground floor"
    );

    let store = dependencies("store");
    assert_none_of("store", &store, SERVING);
    assert_none_of("store", &store, &["utoipa"]);
    assert_eq!(tauros_crates(&store), BTreeSet::from(["tauros-domain"]));

    let app = dependencies("app");
    assert_none_of("app", &app, SERVING);
    assert_eq!(
        tauros_crates(&app),
        BTreeSet::from(["tauros-domain", "tauros-store"])
    );

    // The API reaches the database only through the application.
    let api = dependencies("api");
    assert_none_of("api", &api, &["sqlx"]);
    assert_eq!(
        tauros_crates(&api),
        BTreeSet::from(["tauros-app", "tauros-domain"])
    );

    // The reference peer shares nothing with the service but the wire format.
    let peer = dependencies("peer");
    assert_eq!(tauros_crates(&peer), BTreeSet::new());
}

/// Unsafe code is denied in the workspace and forbidden in every library crate (a `forbid`
/// cannot be allowed again below it); the binary allows it on the one function that sets the
/// allocator's arena limit (docs/DECISIONS.md, "Two allocator arenas per core").
#[test]
fn unsafe_code_is_forbidden_in_every_library_crate_and_confined_in_the_binary() {
    let root = env!("CARGO_MANIFEST_DIR");
    for dir in ["domain", "store", "app", "api", "peer"] {
        let path = format!("{root}/crates/{dir}/src/lib.rs");
        let lib = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            lib.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]"),
            "{path} must say #![forbid(unsafe_code)]"
        );
    }
    let src = format!("{root}/src");
    let mut allowed = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap_or_else(|e| panic!("{src}: {e}")) {
        let path = entry.map(|e| e.path()).unwrap_or_default();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let n = text.matches("allow(unsafe_code)").count();
        if n > 0 {
            allowed.push((
                path.file_name().map(|f| f.to_string_lossy().into_owned()),
                n,
            ));
        }
    }
    assert_eq!(
        allowed,
        vec![(Some("allocator.rs".to_owned()), 1)],
        "only src/allocator.rs may allow unsafe code, once"
    );
}
