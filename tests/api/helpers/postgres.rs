//! The PostgreSQL server the tests run on.
//!
//! With `TAUROS_TEST_POSTGRES_URL` set (as `scripts/test` does), every test database is created
//! on that server. Without it, the first test that needs PostgreSQL starts a throwaway cluster
//! for the whole test binary, as `scripts/pg-tmp` does: `initdb` into a temporary directory,
//! a random free loopback port, the unix socket inside that directory, fsync and durability
//! off; as the `postgres` user (through `runuser`) when the tests run as root, because `initdb`
//! and `pg_ctl` refuse root.
//!
//! Stopping it: libtest never runs the destructors of statics, and a test binary can also end
//! by a panic outside a test, a signal or a timeout. So the cluster is not stopped by anything
//! in this process: a small watchdog shell, started as soon as the cluster's directory exists,
//! polls this process's pid (passed explicitly, not `$PPID`) once a second and, once the process
//! is gone however it ended, stops the server (`pg_ctl stop -m immediate`) and removes the
//! directory.
//! The watchdog runs in its own process group with signals from a terminal ignored, so a
//! Ctrl-C that kills the tests does not kill it before it has cleaned up.

use sqlx::Connection;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The admin URL of the server every PostgreSQL test database is created on (its `postgres`
/// database); starts the throwaway cluster on first use when the variable is unset.
pub fn admin_url() -> &'static str {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    let url = URL.get_or_init(|| match std::env::var("TAUROS_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Ok(url),
        _ => start_throwaway(false).map(|(url, _)| url),
    });
    match url {
        Ok(url) => url,
        Err(why) => panic!("{why}"),
    }
}

/// The admin URL of a second throwaway cluster, started on first use, that speaks TLS with a
/// certificate for `localhost` signed by a test authority ([`second_server_certificate`]): the
/// other node of the formation tests (tests/api/operations/formation.rs).
pub fn second_admin_url() -> &'static str {
    &second_server().0
}

/// The certificate authority that signed [`second_admin_url`]'s server certificate (PEM).
pub fn second_server_certificate() -> PathBuf {
    second_server().1.join("ca.crt")
}

fn second_server() -> &'static (String, PathBuf) {
    static SERVER: OnceLock<Result<(String, PathBuf), String>> = OnceLock::new();
    match SERVER.get_or_init(|| start_throwaway(true)) {
        Ok(server) => server,
        Err(why) => panic!("{why}"),
    }
}

/// Creates a database with a fresh name on the test server; returns its URL and its name.
pub async fn create_database() -> (String, String) {
    create_database_on(admin_url()).await
}

/// Creates a database named `name` on the server of `admin`; returns its URL.
pub async fn create_named_database_on(admin: &str, name: &str) -> String {
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .expect("connect to the test PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
        .execute(&mut conn)
        .await
        .expect("create test database");
    let _ = conn.close().await;
    let base = admin.rsplit_once('/').map_or(admin, |(base, _)| base);
    format!("{base}/{name}")
}

async fn create_database_on(admin: &str) -> (String, String) {
    let name = format!("tauros_test_{}", uuid::Uuid::new_v4().simple());
    (create_named_database_on(admin, &name).await, name)
}

/// Drops a test database, from `Drop`: synchronously, on a thread of its own with its own
/// small runtime (the test's runtime may be shutting down, or this may run inside it, where
/// blocking on another future is not allowed). `with (force)` (PostgreSQL 13 or later) ends
/// the connections the test's server still holds. Never panics (it may run while a failed
/// test unwinds); a database it cannot drop is reported on stderr and left behind.
pub fn drop_database(name: &str) {
    let admin = admin_url().to_owned();
    let sql = format!("drop database if exists {name} with (force)");
    let dropped = std::thread::spawn(move || -> Result<(), String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&admin)
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            let _ = conn.close().await;
            Ok(())
        })
    })
    .join();
    match dropped {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("could not drop the test database {name}: {e}"),
        Err(_) => {
            eprintln!("could not drop the test database {name}: the dropping thread panicked");
        }
    }
}

/// The directory of `initdb` and `pg_ctl`: `pg_config --bindir`, else the newest
/// `/usr/lib/postgresql/*/bin`, else wherever `initdb` is on PATH.
fn find_bindir() -> Option<PathBuf> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_server(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry
                .file_name()
                .to_string_lossy()
                .split('.')
                .map(str::parse)
                .collect::<Result<Vec<u32>, _>>()
                .ok()?;
            let dir = entry.path().join("bin");
            has_server(&dir).then_some((version, dir))
        })
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|dir| has_server(dir))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// `program args…`, through `runuser -u postgres --` when running as root.
fn as_postgres(root: bool, program: &Path) -> Command {
    if root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// Runs `cmd` to completion; a failure to start names the whole command line (with `runuser`,
/// if that is what is missing).
fn output(cmd: &mut Command) -> Result<std::process::Output, String> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run {cmd:?}: {e}"))
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Starts a cluster (with `tls`, presenting a certificate for `localhost` signed by a test authority, kept
/// in its directory); returns its admin URL and its directory.
fn start_throwaway(tls: bool) -> Result<(String, PathBuf), String> {
    let bin = find_bindir().ok_or(
        "The PostgreSQL tests need a PostgreSQL server, and none was found: \
         TAUROS_TEST_POSTGRES_URL is not set, and neither `pg_config --bindir`, \
         /usr/lib/postgresql/*/bin nor PATH has `initdb` and `pg_ctl`. Install PostgreSQL's \
         server binaries (Debian/Ubuntu: `apt-get install postgresql`; Fedora: \
         `dnf install postgresql-server`; macOS: `brew install postgresql`), or set \
         TAUROS_TEST_POSTGRES_URL=postgres://user@host:port/db to a server you own (each test \
         creates and drops its own database on it).",
    )?;
    let root = running_as_root();
    // A short path: the unix socket lives in it, and socket paths are limited to ~100 bytes.
    let tmp = if Path::new("/tmp").is_dir() {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    let dir = tmp.join(format!(
        "tauros-pg.{}.{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    // From here on the watchdog owns the directory: whatever fails below, it is removed when
    // this process ends.
    watchdog(root, &bin, &dir)?;
    if root {
        let chown = Command::new("chown")
            .arg("postgres:")
            .arg(&dir)
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !chown.success() {
            return Err(format!(
                "the tests run as root, so the throwaway PostgreSQL runs as the `postgres` user \
                 (initdb refuses root), but `chown postgres: {}` failed: create a `postgres` \
                 user, run the tests as another user, or set TAUROS_TEST_POSTGRES_URL",
                dir.display()
            ));
        }
    }
    let data = dir.join("data");
    let initdb = output(
        as_postgres(root, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"])
            .args(["--no-sync", "--no-instructions"]),
    )?;
    if !initdb.status.success() {
        return Err(format!(
            "initdb failed:\n{}{}",
            String::from_utf8_lossy(&initdb.stdout),
            String::from_utf8_lossy(&initdb.stderr)
        ));
    }
    let mut tls_options = String::new();
    if tls {
        let (crt, key) = (dir.join("server.crt"), dir.join("server.key"));
        // A certificate authority and a server certificate for `localhost` signed by it (a
        // self-signed CA certificate is not a valid server certificate to rustls).
        let made = output(
            as_postgres(root, Path::new("sh"))
                .arg("-c")
                .arg(
                    "set -e; cd \"$1\"
                 openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 -subj /CN=tauros-test-ca \
                   -keyout ca.key -out ca.crt
                 openssl req -new -nodes -newkey rsa:2048 -subj /CN=localhost \
                   -addext subjectAltName=DNS:localhost -keyout server.key -out server.csr
                 openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
                   -days 2 -copy_extensions copyall -out server.crt
                 chmod 600 server.key",
                )
                .arg("sh")
                .arg(&dir),
        )?;
        if !made.status.success() {
            return Err(format!(
                "openssl could not make the test certificates: {}",
                String::from_utf8_lossy(&made.stderr)
            ));
        }
        tls_options = format!(
            " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            crt.display(),
            key.display()
        );
    }
    // The port is free when asked for, not necessarily when the server binds it: retry.
    let mut failures = String::new();
    for _ in 0..5 {
        let port = free_port()?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 \
             -c shared_buffers=128MB -F -c synchronous_commit=off -c full_page_writes=off{tls_options}",
            dir.display()
        );
        let started = output(
            as_postgres(root, &bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.join("server.log"))
                .args(["-w", "-s", "-o", &options, "start"]),
        )?;
        if started.status.success() {
            return Ok((
                format!("postgres://postgres@127.0.0.1:{port}/postgres"),
                dir,
            ));
        }
        failures.push_str(&String::from_utf8_lossy(&started.stderr));
        failures.push_str(&std::fs::read_to_string(dir.join("server.log")).unwrap_or_default());
    }
    Err(format!(
        "the throwaway PostgreSQL did not start:\n{failures}"
    ))
}

/// Starts the shell that stops the cluster in `dir` and removes `dir` once this process is
/// gone (see the module documentation for why this is not a destructor).
fn watchdog(root: bool, bin: &Path, dir: &Path) -> Result<(), String> {
    let mut stop = as_postgres(root, &bin.join("pg_ctl"));
    stop.arg("-D")
        .arg(dir.join("data"))
        .args(["-m", "immediate", "-s", "stop"]);
    let stop: Vec<_> = std::iter::once(stop.get_program())
        .chain(stop.get_args())
        .map(ToOwned::to_owned)
        .collect();
    Command::new("sh")
        .arg("-c")
        .arg(
            r#"trap '' HUP INT QUIT PIPE
pid=$1 dir=$2
shift 2
while kill -0 "$pid" 2>/dev/null; do sleep 1; done
"$@"
rm -rf "$dir""#,
        )
        .arg("tauros-test-postgres-watchdog")
        .arg(std::process::id().to_string())
        .arg(dir)
        .args(stop)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        // Not waited for: it outlives this process, by design.
        .map(drop)
        .map_err(|e| format!("start the PostgreSQL watchdog: {e}"))
}
