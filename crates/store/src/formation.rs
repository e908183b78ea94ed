//! Following a PostgreSQL high-availability formation (docs/OPERATIONS.md, "A formation"): a
//! multi-host URL (`target_session_attrs=read-write`, as libpq reads it) split into one
//! [`PgConnectOptions`] per host, since sqlx takes one; the writable host is found, and every
//! later connection whose session is read-only is refused, so no write runs on a standby.

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use std::str::FromStr;
use std::time::Duration;

/// The hosts of a `DATABASE_URL`, in the URL's order, each with the URL's other settings.
#[derive(Clone, Debug)]
pub(crate) struct Hosts {
    nodes: Vec<Node>,
}

/// One host of the URL.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) options: PgConnectOptions,
    /// `host:port`, for logs and errors (never the URL: it may carry a password).
    pub(crate) name: String,
}

/// Why a `DATABASE_URL` cannot be followed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UrlError {
    #[error(
        "DATABASE_URL must look like postgres://[user[:password]@]host[:port][,host[:port]…][/database][?parameters]"
    )]
    Shape,
    #[error("DATABASE_URL names an empty host (two commas in a row, or a trailing comma)")]
    EmptyHost,
    #[error(
        "DATABASE_URL has target_session_attrs={0}: Tauros writes, so it only ever connects to the \
         host that accepts writes; send target_session_attrs=read-write or leave it out"
    )]
    SessionAttrs(String),
    #[error("DATABASE_URL's host {host} cannot be read: {reason}")]
    Host { host: String, reason: String },
}

impl Hosts {
    /// Splits a (possibly multi-host) PostgreSQL URL.
    pub(crate) fn parse(url: &str) -> Result<Hosts, UrlError> {
        let (scheme, rest) = url.split_once("://").ok_or(UrlError::Shape)?;
        let (head, query) = match rest.split_once('?') {
            Some((head, query)) => (head, Some(query)),
            None => (rest, None),
        };
        let (authority, path) = match head.find('/') {
            Some(at) => head.split_at(at),
            None => (head, ""),
        };
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        let mut kept = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key == "target_session_attrs" {
                if !matches!(value, "read-write" | "primary") {
                    return Err(UrlError::SessionAttrs(value.to_owned()));
                }
            } else {
                kept.push(pair);
            }
        }
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let mut nodes = Vec::new();
        for host in hosts.split(',') {
            if host.is_empty() {
                return Err(UrlError::EmptyHost);
            }
            let single = format!("{scheme}://{userinfo}{host}{path}{query}");
            let options = PgConnectOptions::from_str(&single).map_err(|e| UrlError::Host {
                host: host.to_owned(),
                // sqlx's message names the part it could not read, never the password.
                reason: e.to_string(),
            })?;
            let name = format!("{}:{}", options.get_host(), options.get_port());
            nodes.push(Node { options, name });
        }
        Ok(Hosts { nodes })
    }

    /// Every host, with `apply` run on each one's options.
    pub(crate) fn map(self, apply: impl Fn(PgConnectOptions) -> PgConnectOptions) -> Hosts {
        Hosts {
            nodes: self
                .nodes
                .into_iter()
                .map(|node| Node {
                    options: apply(node.options),
                    name: node.name,
                })
                .collect(),
        }
    }

    pub(crate) fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The first host, in URL order, that accepts writes within `timeout`; else each answer.
    pub(crate) async fn writable(&self, timeout: Duration) -> Result<usize, Vec<String>> {
        let mut tried = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            let answer =
                tokio::time::timeout(timeout, PgConnection::connect_with(&node.options)).await;
            let why = match answer {
                Err(_) => format!("{}: no answer within {timeout:?}", node.name),
                Ok(Err(e)) => format!("{}: {e}", node.name),
                Ok(Ok(mut conn)) => {
                    let verdict = accepts_writes(&mut conn).await;
                    let _ = conn.close().await;
                    match verdict {
                        Ok(true) => return Ok(index),
                        Ok(false) => format!("{}: read-only (a standby)", node.name),
                        Err(e) => format!("{}: {e}", node.name),
                    }
                }
            };
            tried.push(why);
        }
        Err(tried)
    }
}

/// Whether this session may write: what libpq's `target_session_attrs=read-write` asks.
pub(crate) async fn accepts_writes(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let (read_only,): (String,) = sqlx::query_as("show transaction_read_only")
        .fetch_one(conn)
        .await?;
    Ok(read_only == "off")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::postgres::PgSslMode;

    fn names(url: &str) -> Vec<String> {
        Hosts::parse(url)
            .expect("parses")
            .nodes
            .into_iter()
            .map(|n| n.name)
            .collect()
    }

    #[test]
    fn a_formation_url_gives_every_host_in_order_with_the_same_settings() {
        let hosts = Hosts::parse(
            "postgres://app:s%40cret@10.0.0.1:5433,db2.internal:6000,[::1]:5434/tauros\
             ?target_session_attrs=read-write&sslmode=require&application_name=x",
        )
        .expect("parses");
        let names: Vec<_> = hosts.nodes.iter().map(|n| n.name.clone()).collect();
        assert_eq!(names, ["10.0.0.1:5433", "db2.internal:6000", "[::1]:5434"]);
        for node in &hosts.nodes {
            assert_eq!(node.options.get_username(), "app");
            assert_eq!(node.options.get_database(), Some("tauros"));
            assert!(matches!(node.options.get_ssl_mode(), PgSslMode::Require));
        }
    }

    #[test]
    fn a_single_host_url_is_one_host_and_default_ports_are_filled_in() {
        assert_eq!(names("postgres://u@localhost/db"), ["localhost:5432"]);
        assert_eq!(names("postgresql://h1,h2:7/db"), ["h1:5432", "h2:7"]);
    }

    #[test]
    fn session_attrs_other_than_read_write_are_refused_with_what_to_send() {
        let err = Hosts::parse("postgres://h1,h2/db?target_session_attrs=standby")
            .expect_err("a standby is never what Tauros wants");
        assert!(
            err.to_string().contains("target_session_attrs=read-write"),
            "{err}"
        );
        assert!(Hosts::parse("postgres://h1,h2/db?target_session_attrs=primary").is_ok());
    }

    #[test]
    fn empty_hosts_and_shapeless_urls_are_refused_without_echoing_the_password() {
        let err = Hosts::parse("postgres://u:hunter2@h1,,h2/db").expect_err("empty host");
        assert!(matches!(err, UrlError::EmptyHost));
        let err = Hosts::parse("h1,h2/db").expect_err("no scheme");
        assert!(matches!(err, UrlError::Shape));
        let err = Hosts::parse("postgres://u:hunter2@h1:notaport/db").expect_err("bad port");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
