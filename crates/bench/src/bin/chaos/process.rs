//! Processes: the service (and its replicas), the peer, the webhook receiver. Every child is
//! written to `--pids` (so the script can end it by id) and killed when dropped.

use crate::args::Args;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn record_pid(args: &Args, pid: u32) {
    if args.pids.is_empty() {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.pids)
    {
        let _ = writeln!(f, "{pid}");
    }
}

pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) port: u16,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) child: Option<Child>,
    pub(crate) starts: u32,
    pub(crate) args: Args,
}

impl Server {
    pub(crate) fn new(args: &Args, name: &str, env: Vec<(String, String)>) -> Server {
        Server {
            name: name.to_owned(),
            port: free_port(),
            env,
            child: None,
            starts: 0,
            args: args.clone(),
        }
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts the process (the first start of the first replica seeds the demo).
    pub(crate) fn spawn(&mut self, demo: bool) {
        let log = format!("{}/{}-{}.log", self.args.work, self.args.label, self.name);
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut cmd = Command::new(&self.args.bin);
        cmd.arg("serve")
            .arg("--bind")
            .arg(format!("127.0.0.1:{}", self.port));
        if demo {
            cmd.arg("--demo");
        }
        cmd.env("DATABASE_URL", &self.args.db_url)
            .env("TAUROS_LOG", "warn")
            .env("TAUROS_RATE_LIMIT_PER_SECOND", "0")
            .env("TAUROS_SIGN_IN_FAILURES", "0")
            .env("TAUROS_SHUTDOWN_GRACE_SECONDS", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn tauros serve");
        record_pid(&self.args, child.id());
        self.child = Some(child);
        self.starts += 1;
    }

    /// Waits (bounded) until `/readyz` answers 200; false when it never does.
    pub(crate) async fn wait_ready(&mut self, client: &reqwest::Client, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                return false;
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.base())).send().await
                && r.status() == 200
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    pub(crate) async fn start(&mut self, client: &reqwest::Client, demo: bool) {
        for _ in 0..5 {
            self.spawn(demo);
            if self.wait_ready(client, Duration::from_secs(30)).await {
                return;
            }
            self.kill();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!(
            "{} did not start (see its log in {})",
            self.name, self.args.work
        );
    }

    /// SIGKILL (std's `Child::kill`), and reap it.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The running process's id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(crate) fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A helper child that prints its address on stdout (the peer, the webhook receiver).
pub(crate) struct Helper {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The reference peer (`tauros peer`) on loopback `port` (0: any) with its records in `db`,
/// forgetting keys after `retention` seconds when given.
pub(crate) fn peer_command(args: &Args, port: u16, db: &str, retention: Option<u64>) -> Command {
    let mut cmd = Command::new(&args.bin);
    cmd.arg("peer")
        .arg("--bind")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--database")
        .arg(db)
        .env("TAUROS_LOG", "warn");
    if let Some(r) = retention {
        cmd.arg("--key-retention-seconds").arg(r.to_string());
    }
    cmd
}

/// The webhook receiver (`scripts/webhook-receiver`) on loopback `port` (0: any).
pub(crate) fn spawn_receiver(args: &Args, port: u16) -> Helper {
    let mut cmd = Command::new("python3");
    cmd.arg(&args.receiver).arg(port.to_string());
    spawn_helper(args, cmd, "receiver")
}

pub(crate) fn spawn_helper(args: &Args, mut cmd: Command, marker: &str) -> Helper {
    use std::io::BufRead;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn helper");
    record_pid(args, child.id());
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let mut sent = false;
        while let Some(Ok(line)) = lines.next() {
            if !sent {
                let _ = tx.send(line);
                sent = true;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("helper printed its address");
    let at = line
        .find("http://")
        .unwrap_or_else(|| panic!("{marker}: {line}"));
    Helper {
        child,
        url: line[at..].trim().to_owned(),
    }
}
