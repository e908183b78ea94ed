//! Where deliveries may go. Checked at registration ([`check_url`]) and on every resolved address
//! at delivery ([`AllowList::vet`]), which connects only to the vetted addresses so DNS rebinding
//! cannot reach an internal one.

use crate::error::Coded;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::{Host, Url};

/// The longest URL an endpoint may have.
pub const MAX_URL_CHARS: usize = 2000;

/// The hosts deliveries may go to (`TAUROS_WEBHOOK_ALLOW_HOSTS`), even to private addresses:
/// that is what listing them is for. Empty: any host whose addresses are all public.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList(Vec<Pattern>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    /// A host name or an address, in its normal form.
    Exact(String),
    /// `*.example.com`: any name below `example.com` (stored as `.example.com`).
    Below(String),
}

impl AllowList {
    /// Parses a comma-separated list of host names, `*.`-prefixed domains and addresses (IPv6
    /// brackets optional); blank entries are ignored, a non-host is an error naming it.
    pub fn parse(list: &str) -> Result<AllowList, String> {
        let mut patterns = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let pattern = match entry.strip_prefix("*.") {
                Some(domain) => normal_host(domain)
                    .filter(|d| d.parse::<IpAddr>().is_err())
                    .map(|d| Pattern::Below(format!(".{d}"))),
                None => normal_host(entry).map(Pattern::Exact),
            };
            patterns.push(pattern.ok_or_else(|| {
                format!("{entry:?} is not a host name, a *.domain or an IP address")
            })?);
        }
        Ok(AllowList(patterns))
    }

    /// Whether no host is listed (any public host may be used).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `host` (as a URL names it, normalised by `host_of`) is listed.
    pub fn allows(&self, host: &str) -> bool {
        self.0.iter().any(|p| match p {
            Pattern::Exact(h) => h == host,
            Pattern::Below(suffix) => host.ends_with(suffix.as_str()),
        })
    }

    /// The addresses a delivery to `host` may connect to, given what it resolved to. An unlisted
    /// host with any internal address is refused as a whole (a rebinding attempt).
    pub fn vet(&self, host: &str, resolved: &[IpAddr]) -> Result<Vec<IpAddr>, AddressRefused> {
        if resolved.is_empty() {
            return Err(AddressRefused::NoAddress);
        }
        if self.allows(host) {
            return Ok(resolved.to_vec());
        }
        if !self.is_empty() {
            return Err(AddressRefused::NotListed);
        }
        match resolved.iter().find(|ip| !address_is_public(**ip)) {
            Some(ip) => Err(AddressRefused::Internal(*ip)),
            None => Ok(resolved.to_vec()),
        }
    }
}

/// Why a delivery may not connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressRefused {
    #[error("the host resolved to no address")]
    NoAddress,
    #[error("the host is not on the allow-list (TAUROS_WEBHOOK_ALLOW_HOSTS)")]
    NotListed,
    #[error("the host resolved to {0}, an internal address, and is not on the allow-list")]
    Internal(IpAddr),
}

/// A host lowercase without brackets or trailing dot, an address canonical; `None` if no host.
fn normal_host(text: &str) -> Option<String> {
    let text = text.trim_end_matches('.').to_ascii_lowercase();
    let unbracketed = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(&text);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    (!text.is_empty() && text.len() <= 253 && text.split('.').all(label_ok)).then_some(text)
}

/// The host of a parsed URL as [`AllowList::allows`] compares it.
fn host_of(host: &Host<&str>) -> String {
    match host {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    }
}

/// A URL deliveries may be sent to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookUrl {
    /// The URL in its normal form (WHATWG: lowercase host, canonical IPv4 spelling).
    pub url: String,
    /// Its host, as the allow-list and the resolver see it.
    pub host: String,
    /// The host when it is an address (nothing to resolve).
    pub address: Option<IpAddr>,
}

/// Why a URL cannot be registered (all answered 422 on `url`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("`url` must be at most 2000 characters")]
    TooLong,
    #[error("`url` is not an absolute URL such as https://hooks.example.com/tauros")]
    Invalid,
    #[error("`url` must use http or https, not {0}")]
    Scheme(String),
    #[error(
        "`url` must not carry a user name or password; authenticate the request by its \
         webhook-signature"
    )]
    Credentials,
    #[error(
        "`url` names {0}, an internal address (loopback, private, link-local, shared, \
         multicast or reserved); deliveries go to public addresses only unless the operator \
         allow-lists the host in TAUROS_WEBHOOK_ALLOW_HOSTS"
    )]
    Internal(String),
    #[error(
        "`url` names the host {0}, which is not on this server's allow-list of webhook hosts \
         (TAUROS_WEBHOOK_ALLOW_HOSTS)"
    )]
    NotListed(String),
}

impl Coded for UrlError {
    fn code(&self) -> &'static str {
        match self {
            UrlError::TooLong => "too_long",
            UrlError::Invalid => "invalid_url",
            UrlError::Scheme(_) => "unsupported_scheme",
            UrlError::Credentials => "credentials_in_url",
            UrlError::Internal(_) => "internal_address",
            UrlError::NotListed(_) => "host_not_allowed",
        }
    }
}

/// Checks a URL at registration. A host name is not resolved here (what it resolves to can
/// change; [`AllowList::vet`] checks every address at delivery), but an address, and
/// `localhost` and names below it (RFC 6761: always loopback), must pass the policy now.
pub fn check_url(raw: &str, allow: &AllowList) -> Result<WebhookUrl, UrlError> {
    let (url, name, address) = parse_url(raw)?;
    if !allow.allows(&name) {
        if !allow.is_empty() {
            return Err(UrlError::NotListed(crate::error::echo(&name)));
        }
        let loopback_name = name == "localhost" || name.ends_with(".localhost");
        if loopback_name || address.is_some_and(|ip| !address_is_public(ip)) {
            return Err(UrlError::Internal(crate::error::echo(&name)));
        }
    }
    Ok(WebhookUrl {
        url: url.to_string(),
        host: name,
        address,
    })
}

/// The part of [`check_url`] that needs no policy: length, scheme, a host, no credentials.
pub fn check_url_form(raw: &str) -> Result<(), UrlError> {
    parse_url(raw).map(|_| ())
}

/// A URL's form: the URL, its host's name, and the host's address when it is one.
fn parse_url(raw: &str) -> Result<(Url, String, Option<IpAddr>), UrlError> {
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(UrlError::TooLong);
    }
    // Exactly as sent: `http://` or `https://` (any case) first. The WHATWG parser would also
    // take surrounding spaces and `http:host` spellings, which the OpenAPI pattern refuses.
    let head = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
    let url = Url::parse(raw).map_err(|_| UrlError::Invalid)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlError::Scheme(crate::error::echo(url.scheme())));
    }
    if !(head.starts_with("http://") || head.starts_with("https://")) {
        return Err(UrlError::Invalid);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials);
    }
    let host = url.host().ok_or(UrlError::Invalid)?;
    let name = host_of(&host);
    let address = match host {
        Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        Host::Domain(_) => None,
    };
    Ok((url, name, address))
}

/// Whether an address is on the public internet (in none of the ranges below); an IPv4 address
/// embedded in IPv6 (mapped, NAT64, 6to4) is judged as IPv4.
pub fn address_is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_is_public(v4),
        IpAddr::V6(v6) => v6_is_public(v6),
    }
}

fn v4_is_public(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let internal = a == 0 // "this network", 0.0.0.0 included
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && (c == 0 || c == 2)) // IETF assignments, TEST-NET-1
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224; // multicast, reserved, broadcast
    !internal
}

fn v6_is_public(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_is_public(v4);
    }
    let s = ip.segments();
    let o = ip.octets();
    let embedded = |at: usize| Ipv4Addr::new(o[at], o[at + 1], o[at + 2], o[at + 3]);
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway connects to.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_is_public(embedded(12));
    }
    if s[0] == 0x2002 {
        return v4_is_public(embedded(2));
    }
    let internal = s[..6] == [0; 6] // unspecified, loopback, IPv4-compatible
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00 // multicast
        || (s[0] == 0x64 && s[1] == 0xff9b) // local-use NAT64 (64:ff9b:1::/48)
        || (s[0] == 0x2001 && s[1] == 0) // Teredo
        || (s[0] == 0x2001 && s[1] == 0xdb8) // documentation
        || s[..4] == [0x100, 0, 0, 0]; // discard-only
    !internal
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn internal_ranges_are_refused_and_public_ones_pass() {
        for internal in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:c0a8:101::1",
            "2001::1",
            "2001:db8::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "100::1",
        ] {
            assert!(!address_is_public(ip(internal)), "{internal}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(address_is_public(ip(public)), "{public}");
        }
    }

    #[test]
    fn registration_checks_scheme_credentials_and_literal_addresses() {
        let open = AllowList::default();
        let ok = check_url("https://Hooks.Example.COM:8443/tauros?x=1", &open).unwrap();
        assert_eq!(ok.url, "https://hooks.example.com:8443/tauros?x=1");
        assert_eq!(ok.host, "hooks.example.com");
        assert_eq!(ok.address, None);
        let code = |raw: &str, allow: &AllowList| check_url(raw, allow).unwrap_err().code();
        assert_eq!(code("ftp://example.com/", &open), "unsupported_scheme");
        assert_eq!(code("file:///etc/passwd", &open), "unsupported_scheme");
        assert_eq!(code("not a url", &open), "invalid_url");
        assert_eq!(code("/relative", &open), "invalid_url");
        assert_eq!(code(" https://example.com/", &open), "invalid_url");
        assert_eq!(code("https:example.com", &open), "invalid_url");
        assert_eq!(code("https:/example.com", &open), "invalid_url");
        assert!(check_url("HTTPS://example.com/", &open).is_ok());
        assert_eq!(
            code("https://user:pw@example.com/", &open),
            "credentials_in_url"
        );
        assert_eq!(
            code(&format!("https://e.com/{}", "a".repeat(2000)), &open),
            "too_long"
        );
        for internal in [
            "http://127.0.0.1:8080/",
            "http://localhost/",
            "http://api.localhost/",
            "http://10.1.2.3/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:192.168.0.1]/",
            // WHATWG spellings of 127.0.0.1 are normalised before the check.
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0/",
        ] {
            assert_eq!(code(internal, &open), "internal_address", "{internal}");
        }
    }

    #[test]
    fn an_allow_list_admits_its_hosts_only() {
        let allow =
            AllowList::parse(" 127.0.0.1, [::1],*.internal.example ,Hooks.Example.com.,").unwrap();
        assert!(check_url("http://127.0.0.1:9000/in", &allow).is_ok());
        assert!(check_url("http://[::1]:9000/in", &allow).is_ok());
        assert!(check_url("https://a.b.internal.example/", &allow).is_ok());
        assert!(check_url("https://hooks.example.com/", &allow).is_ok());
        let refused = check_url("https://internal.example/", &allow).unwrap_err();
        assert_eq!(refused.code(), "host_not_allowed");
        assert_eq!(
            check_url("https://example.org/", &allow)
                .unwrap_err()
                .code(),
            "host_not_allowed"
        );
        assert_eq!(
            check_url("http://127.0.0.2/", &allow).unwrap_err().code(),
            "host_not_allowed"
        );
        assert!(AllowList::parse("exa mple.com").is_err());
        assert!(AllowList::parse("http://x.com").is_err());
        assert!(AllowList::parse("*.10.0.0.1").is_err());
        assert!(AllowList::parse("").unwrap().is_empty());
    }

    #[test]
    fn delivery_vets_every_resolved_address() {
        let open = AllowList::default();
        let public = [ip("93.184.216.34"), ip("2606:2800:220:1::1")];
        assert_eq!(open.vet("example.com", &public).unwrap(), public);
        // One internal address among public ones refuses the host (a rebinding attempt).
        let mixed = [ip("93.184.216.34"), ip("10.0.0.5")];
        assert_eq!(
            open.vet("example.com", &mixed),
            Err(AddressRefused::Internal(ip("10.0.0.5")))
        );
        assert_eq!(open.vet("example.com", &[]), Err(AddressRefused::NoAddress));
        let allow = AllowList::parse("localhost").unwrap();
        assert_eq!(
            allow.vet("localhost", &[ip("127.0.0.1")]).unwrap(),
            [ip("127.0.0.1")]
        );
        assert_eq!(
            allow.vet("example.com", &public),
            Err(AddressRefused::NotListed)
        );
    }

    proptest! {
        /// Whatever the bits, an IPv4 address and its IPv4-mapped IPv6 form get one answer.
        #[test]
        fn mapped_addresses_are_judged_as_ipv4(bits: u32) {
            let v4 = Ipv4Addr::from(bits);
            prop_assert_eq!(
                address_is_public(IpAddr::V4(v4)),
                address_is_public(IpAddr::V6(v4.to_ipv6_mapped()))
            );
        }

        /// Every private, loopback and link-local IPv4 address std knows is refused.
        #[test]
        fn std_internal_ipv4_is_refused(bits: u32) {
            let v4 = Ipv4Addr::from(bits);
            if v4.is_private() || v4.is_loopback() || v4.is_link_local() || v4.is_multicast()
                || v4.is_broadcast() || v4.is_unspecified() || v4.is_documentation()
            {
                prop_assert!(!address_is_public(IpAddr::V4(v4)));
            }
        }
    }
}
