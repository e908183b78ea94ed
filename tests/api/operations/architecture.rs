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

/// The Rust files under `dir`, every level down.
fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|x| x == "rs") {
            found.push(path);
        }
    }
}

/// Unsafe code is denied in the workspace and forbidden in every library crate (a `forbid`
/// cannot be allowed again below it); the root package (the binary, its tests and the bench
/// programs) allows it on the one function that sets the allocator's arena limit
/// (docs/DECISIONS.md, "Two allocator arenas per core").
#[test]
fn unsafe_code_is_forbidden_in_every_library_crate_and_confined_in_the_binary() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["domain", "store", "app", "api", "peer"] {
        let path = root.join(format!("crates/{dir}/src/lib.rs"));
        let lib =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            lib.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]"),
            "{} must say #![forbid(unsafe_code)]",
            path.display()
        );
    }
    let mut files = Vec::new();
    for dir in ["src", "tests", "bench"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut allowed = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for line in text.lines().map(str::trim) {
            let attribute = line.strip_prefix("#![").or_else(|| line.strip_prefix("#["));
            if attribute.is_some_and(|a| a.starts_with("allow(") && a.contains("unsafe_code")) {
                let name = path.strip_prefix(root).unwrap_or(&path);
                allowed.push(name.display().to_string());
            }
        }
    }
    assert_eq!(
        allowed,
        vec!["src/allocator.rs".to_owned()],
        "only src/allocator.rs may allow unsafe code, once"
    );
}
