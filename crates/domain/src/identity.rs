//! Who the actors are and what their credentials look like; randomness is passed in.

use super::base62;
use super::error::{FieldError, echo};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

const BASE62: &str = base62::ALPHABET;
const API_KEY_PREFIX: &str = "tauros_";
const SESSION_PREFIX: &str = "tsess_";
const INVITATION_PREFIX: &str = "tinv_";
const DEVICE_PREFIX: &str = "tdev_";

/// Minimum length of a human's password, in characters.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password accepted; Argon2 cost grows with input, so unbounded input is a DoS vector.
pub const MAX_PASSWORD_CHARS: usize = 1024;
/// Longest device token a sign-in reads (one is 48 characters); longer is a 422.
pub const MAX_DEVICE_TOKEN_CHARS: usize = 128;
/// Longest email accepted (RFC 5321), refused before any password work or bookkeeping.
pub const MAX_EMAIL_CHARS: usize = 254;

/// A human's role, fixed when the human is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Manages agents and customers, may withdraw, never decides.
    Operator,
    /// Everything an operator does, plus decisions and inviting humans.
    Approver,
}

impl Role {
    /// Every role, in the order the API lists them.
    pub const ALL: [Role; 2] = [Role::Operator, Role::Approver];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::Approver => "approver",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "operator" => Some(Role::Operator),
            "approver" => Some(Role::Approver),
            _ => None,
        }
    }
}

/// Where a human's account stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserState {
    /// Invited; no password set yet.
    Invited,
    /// Has a password and may sign in.
    Active,
    /// Deactivated by an approver: no session, no sign-in, no invitation.
    Deactivated,
}

impl UserState {
    /// Every state, in the order the API lists them.
    pub const ALL: [UserState; 3] = [
        UserState::Invited,
        UserState::Active,
        UserState::Deactivated,
    ];

    /// From the account's facts: deactivation wins over everything.
    pub fn of(has_password: bool, deactivated: bool) -> UserState {
        match (deactivated, has_password) {
            (true, _) => UserState::Deactivated,
            (false, true) => UserState::Active,
            (false, false) => UserState::Invited,
        }
    }

    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            UserState::Invited => "invited",
            UserState::Active => "active",
            UserState::Deactivated => "deactivated",
        }
    }
}

/// What an agent's key may be used for.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Create, revise, submit and withdraw invoice proposals (the default).
    Invoicing,
    /// Post settlement events.
    Settlement,
}

impl Capability {
    /// Every capability, in the order the API lists them.
    pub const ALL: [Capability; 2] = [Capability::Invoicing, Capability::Settlement];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Invoicing => "invoicing",
            Capability::Settlement => "settlement",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Capability> {
        match s {
            "invoicing" => Some(Capability::Invoicing),
            "settlement" => Some(Capability::Settlement),
            _ => None,
        }
    }
}

/// The most entries `capabilities` may list when an agent is created (repeats are kept once).
pub const MAX_CAPABILITIES: usize = 8;

/// A sorted, duplicate-free set of capabilities; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities(Vec<Capability>);

impl Capabilities {
    /// The set a request asks for (empty: the default); `None`, errors pushed, when any is
    /// wrong. A list over [`MAX_CAPABILITIES`] is refused whole, before any entry is read.
    pub fn requested(sent: &[String], errors: &mut Vec<FieldError>) -> Option<Capabilities> {
        if sent.len() > MAX_CAPABILITIES {
            errors.push(FieldError::plain(
                "capabilities",
                "too_many_capabilities",
                format!(
                    "`capabilities` may list at most {MAX_CAPABILITIES} entries; send each of {} \
                     at most once",
                    known_capabilities()
                ),
            ));
            return None;
        }
        let mut known = Vec::with_capacity(sent.len());
        let mut ok = true;
        for (i, name) in sent.iter().enumerate() {
            match Capability::parse(name) {
                Some(cap) => known.push(cap),
                None => {
                    ok = false;
                    errors.push(FieldError::plain(
                        format!("capabilities[{i}]"),
                        "invalid_value",
                        format!(
                            "`{}` is not a capability; send one of {}",
                            echo(name),
                            known_capabilities()
                        ),
                    ));
                }
            }
        }
        if !ok {
            return None;
        }
        let caps = Capabilities::new(known);
        if caps.mixes_money_with_invoicing() {
            errors.push(FieldError::plain(
                "capabilities",
                "capabilities_incompatible",
                "a key never holds `settlement` together with `invoicing` (an agent that \
                 proposes invoices must not report their payments): send [\"invoicing\"] for \
                 this agent and create a separate agent with [\"settlement\"]",
            ));
            return None;
        }
        Some(caps)
    }

    /// `settlement` together with `invoicing`: refused for new keys; a key stored like that
    /// before the rule is refused on settlement routes until it is split.
    pub fn mixes_money_with_invoicing(&self) -> bool {
        self.has(Capability::Settlement) && self.has(Capability::Invoicing)
    }

    /// Whether a human of `role` may grant these: only approvers grant `settlement` (money state).
    pub fn grantable_by(&self, role: Role) -> bool {
        role == Role::Approver || !self.has(Capability::Settlement)
    }

    /// Builds the set; an empty request means the default (`invoicing`).
    pub fn new(mut caps: Vec<Capability>) -> Capabilities {
        if caps.is_empty() {
            caps.push(Capability::Invoicing);
        }
        caps.sort();
        caps.dedup();
        Capabilities(caps)
    }

    /// Whether the set contains `cap`.
    pub fn has(&self, cap: Capability) -> bool {
        self.0.contains(&cap)
    }

    /// The capabilities in order.
    pub fn as_slice(&self) -> &[Capability] {
        &self.0
    }

    /// Storage form: names joined by commas.
    pub fn to_stored(&self) -> String {
        self.0
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Reads the storage form, ignoring names this version does not know.
    pub fn from_stored(s: &str) -> Capabilities {
        Capabilities::new(s.split(',').filter_map(Capability::parse).collect())
    }
}

fn known_capabilities() -> String {
    Capability::ALL.map(Capability::as_str).join(", ")
}

/// How the actor of an audited change is classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// A signed-in human.
    Human,
    /// An agent with an API key.
    Agent,
    /// Tauros itself (jobs, the command line).
    System,
}

impl ActorKind {
    /// Every kind of actor.
    pub const ALL: [ActorKind; 3] = [ActorKind::Human, ActorKind::Agent, ActorKind::System];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::Human => "human",
            ActorKind::Agent => "agent",
            ActorKind::System => "system",
        }
    }

    /// The kind of that stored name, if it is one.
    pub fn parse(s: &str) -> Option<ActorKind> {
        ActorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The entry point a command came through; set by Tauros, never by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interface {
    Api,
    Mcp,
    Ui,
    Cli,
    Job,
}

impl Interface {
    /// Every interface.
    pub const ALL: [Interface; 5] = [
        Interface::Api,
        Interface::Mcp,
        Interface::Ui,
        Interface::Cli,
        Interface::Job,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Api => "api",
            Interface::Mcp => "mcp",
            Interface::Ui => "ui",
            Interface::Cli => "cli",
            Interface::Job => "job",
        }
    }

    /// The interface of that stored name, if it is one.
    pub fn parse(s: &str) -> Option<Interface> {
        Interface::ALL.into_iter().find(|i| i.as_str() == s)
    }
}

/// The secret half of an API key: the 16-byte key id and 32 random bytes.
#[derive(Clone)]
pub struct ApiKey {
    raw: [u8; 48],
}

impl ApiKey {
    /// Assembles a key from its id and 32 random bytes.
    pub fn new(id: Uuid, secret: [u8; 32]) -> ApiKey {
        let mut raw = [0u8; 48];
        raw[..16].copy_from_slice(id.as_bytes());
        raw[16..].copy_from_slice(&secret);
        ApiKey { raw }
    }

    /// The key id embedded in the key (the primary key of its row).
    pub fn id(&self) -> Uuid {
        let mut id = [0u8; 16];
        id.copy_from_slice(&self.raw[..16]);
        Uuid::from_bytes(id)
    }

    /// SHA-256 of the raw 48 bytes: the only form that is stored.
    pub fn hash(&self) -> [u8; 32] {
        Sha256::digest(self.raw).into()
    }

    /// `tauros_` + base62(id ‖ secret) + `_` + base62(crc32): what the agent sends.
    pub fn encode(&self) -> String {
        let check = crc32fast::hash(&self.raw).to_be_bytes();
        format!(
            "{API_KEY_PREFIX}{}_{}",
            base_x::encode(BASE62, &self.raw),
            base_x::encode(BASE62, &check)
        )
    }

    /// Parses a presented key; the checksum refuses a typo without touching the database.
    pub fn parse(s: &str) -> Option<ApiKey> {
        let rest = s.strip_prefix(API_KEY_PREFIX)?;
        let (body, check) = rest.split_once('_')?;
        if body.len() > 80 || check.len() > 8 {
            return None;
        }
        let raw: [u8; 48] = base62::decode(body)?;
        let check: [u8; 4] = base62::decode(check)?;
        if check != crc32fast::hash(&raw).to_be_bytes() {
            return None;
        }
        Some(ApiKey { raw })
    }

    /// Compares this key's hash with a stored one in constant time.
    pub fn matches(&self, stored_hash: &[u8]) -> bool {
        bool::from(self.hash().as_slice().ct_eq(stored_hash))
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({}, <redacted>)", self.id())
    }
}

/// What a bearer credential claims to be, decided by its prefix alone.
#[derive(Debug)]
pub enum Credential {
    ApiKey(ApiKey),
    /// A human session token (only its hash is ever compared).
    Session([u8; 32]),
}

impl Credential {
    /// Classifies a presented bearer token; `None` when it is neither kind.
    pub fn parse(token: &str) -> Option<Credential> {
        if token.starts_with(API_KEY_PREFIX) {
            return ApiKey::parse(token).map(Credential::ApiKey);
        }
        opaque_hash(SESSION_PREFIX, token).map(Credential::Session)
    }
}

/// A freshly minted opaque token (session, invitation or device) and the hash that is stored.
pub struct OpaqueToken {
    /// The token handed to the human, once.
    pub token: String,
    /// SHA-256 of the token: the only form that is stored.
    pub hash: [u8; 32],
}

/// Mints a session token from 32 random bytes.
pub fn session_token(random: [u8; 32]) -> OpaqueToken {
    opaque(SESSION_PREFIX, random)
}

/// Mints an invitation token from 32 random bytes.
pub fn invitation_token(random: [u8; 32]) -> OpaqueToken {
    opaque(INVITATION_PREFIX, random)
}

/// Hashes a presented invitation token; `None` if it is not one.
pub fn invitation_hash(token: &str) -> Option<[u8; 32]> {
    opaque_hash(INVITATION_PREFIX, token)
}

/// Mints a device token (what a browser keeps to be known at its next sign-in) from 32 random
/// bytes.
pub fn device_token(random: [u8; 32]) -> OpaqueToken {
    opaque(DEVICE_PREFIX, random)
}

/// Hashes a presented device token; `None` if it is not one.
pub fn device_hash(token: &str) -> Option<[u8; 32]> {
    opaque_hash(DEVICE_PREFIX, token)
}

/// The stored hash of an opaque token `prefix` + 1 to 64 ASCII letters and digits; `None` if
/// `token` is not of that form.
fn opaque_hash(prefix: &str, token: &str) -> Option<[u8; 32]> {
    let rest = token.strip_prefix(prefix)?;
    if rest.is_empty() || rest.len() > 64 || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    Some(token_hash(token))
}

fn opaque(prefix: &str, random: [u8; 32]) -> OpaqueToken {
    let token = format!("{prefix}{}", base_x::encode(BASE62, &random));
    let hash = token_hash(&token);
    OpaqueToken { token, hash }
}

fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A normalized email's SHA-256, so a record keyed by emails costs the same whatever the email.
pub fn email_digest(normalized: &str) -> [u8; 32] {
    Sha256::digest(normalized.as_bytes()).into()
}

/// Normalizes an email for uniqueness and sign-in: trimmed and lowercased.
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

/// Checks an email's shape (1–254 chars, exactly one `@` with text on both sides, no spaces).
pub fn email_is_valid(email: &str) -> bool {
    let len = email.chars().count();
    if len == 0
        || len > MAX_EMAIL_CHARS
        || email.chars().any(char::is_whitespace)
        || crate::text::unclean(email, crate::text::Lines::One).is_some()
    {
        return false;
    }
    match email.split_once('@') {
        Some((local, domain)) => !local.is_empty() && !domain.is_empty() && !domain.contains('@'),
        None => false,
    }
}

/// Checks a new password's length in characters.
pub fn password_is_acceptable(password: &str) -> bool {
    let n = password.chars().count();
    (MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Responses serialize these enums: their JSON names must be the stored ones.
    #[test]
    fn actor_kind_and_interface_serialize_as_their_stored_names() {
        for kind in ActorKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
            assert_eq!(ActorKind::parse(kind.as_str()), Some(kind));
        }
        for via in Interface::ALL {
            assert_eq!(serde_json::to_value(via).unwrap(), via.as_str());
            assert_eq!(Interface::parse(via.as_str()), Some(via));
        }
        assert_eq!(ActorKind::parse("robot"), None);
        assert_eq!(Interface::parse("API"), None);
    }

    #[test]
    fn settlement_is_never_granted_with_invoicing_nor_by_an_operator() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut errors = Vec::new();
        let both = Capabilities::requested(&names(&["invoicing", "settlement"]), &mut errors);
        assert!(both.is_none());
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "capabilities");
        let stored = Capabilities::from_stored("invoicing,settlement");
        assert!(stored.mixes_money_with_invoicing());
        let settlement = Capabilities::new(vec![Capability::Settlement]);
        assert!(!settlement.mixes_money_with_invoicing());
        assert!(settlement.grantable_by(Role::Approver));
        assert!(!settlement.grantable_by(Role::Operator));
        let invoicing = Capabilities::new(vec![]);
        assert!(invoicing.grantable_by(Role::Operator));
    }

    #[test]
    fn a_capability_list_is_bounded_before_its_entries_are_read() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut errors = Vec::new();
        let set = Capabilities::requested(
            &names(&["settlement", "settlement", "settlement"]),
            &mut errors,
        );
        assert_eq!(set.unwrap().to_stored(), "settlement");
        assert!(errors.is_empty());
        assert_eq!(
            Capabilities::requested(&[], &mut errors)
                .unwrap()
                .to_stored(),
            "invoicing"
        );

        // Nine unknown entries: one error for the list, none for its entries.
        let too_many = vec!["root".to_owned(); MAX_CAPABILITIES + 1];
        assert!(Capabilities::requested(&too_many, &mut errors).is_none());
        assert_eq!(errors.len(), 1);
        assert_eq!(
            (errors[0].field.as_str(), errors[0].code),
            ("capabilities", "too_many_capabilities")
        );

        let mut errors = Vec::new();
        assert!(Capabilities::requested(&names(&["invoicing", "root"]), &mut errors).is_none());
        assert_eq!(
            (errors[0].field.as_str(), errors[0].code),
            ("capabilities[1]", "invalid_value")
        );
    }

    /// `ALL` lists every variant once (the API document's enums are built from it): the
    /// matches fail to compile when a variant is added, as a reminder to add it to `ALL` too.
    #[test]
    fn all_lists_every_variant_once() {
        fn distinct(names: &[&str]) -> usize {
            names
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        }
        let role = |r: Role| match r {
            Role::Operator | Role::Approver => r.as_str(),
        };
        let roles = Role::ALL.map(role);
        assert_eq!(distinct(&roles), 2);
        assert!(
            Role::ALL
                .iter()
                .all(|r| Role::parse(r.as_str()) == Some(*r))
        );
        let capability = |c: Capability| match c {
            Capability::Invoicing | Capability::Settlement => c.as_str(),
        };
        assert_eq!(distinct(&Capability::ALL.map(capability)), 2);
        assert!(
            Capability::ALL
                .iter()
                .all(|c| Capability::parse(c.as_str()) == Some(*c))
        );
        let kind = |k: ActorKind| match k {
            ActorKind::Human | ActorKind::Agent | ActorKind::System => k.as_str(),
        };
        assert_eq!(distinct(&ActorKind::ALL.map(kind)), 3);
        let interface = |i: Interface| match i {
            Interface::Api | Interface::Mcp | Interface::Ui | Interface::Cli | Interface::Job => {
                i.as_str()
            }
        };
        assert_eq!(distinct(&Interface::ALL.map(interface)), 5);
    }

    #[test]
    fn api_key_round_trips_and_detects_typos() {
        let key = ApiKey::new(Uuid::now_v7(), [7u8; 32]);
        let s = key.encode();
        assert!(s.starts_with("tauros_"));
        let parsed = ApiKey::parse(&s).expect("parses");
        assert_eq!(parsed.id(), key.id());
        assert!(parsed.matches(&key.hash()));
        // Change one character of the body: the checksum refuses it.
        let mut chars: Vec<char> = s.chars().collect();
        chars[10] = if chars[10] == 'a' { 'b' } else { 'a' };
        let typo: String = chars.into_iter().collect();
        assert!(ApiKey::parse(&typo).is_none());
    }

    #[test]
    fn api_key_with_leading_zero_bytes_round_trips() {
        let key = ApiKey::new(Uuid::nil(), [0u8; 32]);
        let parsed = ApiKey::parse(&key.encode()).expect("parses");
        assert_eq!(parsed.hash(), key.hash());
    }

    #[test]
    fn credentials_are_classified_by_prefix() {
        let key = ApiKey::new(Uuid::now_v7(), [1u8; 32]).encode();
        assert!(matches!(
            Credential::parse(&key),
            Some(Credential::ApiKey(_))
        ));
        let session = session_token([2u8; 32]).token;
        assert!(matches!(
            Credential::parse(&session),
            Some(Credential::Session(_))
        ));
        assert!(Credential::parse("garbage").is_none());
        assert!(Credential::parse("tauros_abc_def").is_none());
        assert!(Credential::parse("tsess_").is_none());
    }

    #[test]
    fn capabilities_default_to_invoicing_and_round_trip() {
        let caps = Capabilities::new(vec![]);
        assert!(caps.has(Capability::Invoicing));
        let both = Capabilities::new(vec![Capability::Settlement, Capability::Invoicing]);
        assert_eq!(Capabilities::from_stored(&both.to_stored()), both);
    }

    #[test]
    fn emails_and_passwords_are_checked() {
        assert!(email_is_valid("a@b.example"));
        assert!(!email_is_valid("a b@c"));
        assert!(!email_is_valid("a@b@c"));
        assert!(!email_is_valid("@b"));
        assert!(!password_is_acceptable("short"));
        assert!(password_is_acceptable("twelve chars"));
    }
}
