//! Reading a JSON body into a request type: syntax first, then every shape and value error at
//! once (docs/contract/api.md Errors, "One answer lists every mistake"; docs/DECISIONS.md, "A
//! body is read in three steps" and "Every mistake in one answer").
//!
//! 1. **Syntax.** The whole body is parsed before any member is typed (docs/contract/api.md
//!    Conventions); a repeated member, or a body that is not an object, is refused here.
//! 2. **Shape.** serde stops at the first error, so each error is recorded, the offending
//!    member taken out of the value, and deserialization run again until the value fits (at
//!    most [`MAX_ERRORS`] rounds, fewer for a large body: `REPARSE_BUDGET`). Members are
//!    `Option`s, so a removed one causes no new error; removed array elements are remembered,
//!    so later errors keep their original index.
//! 3. **Values.** What could be read is checked against the type's [`BodyRules`]; paths are
//!    mapped back to the body's indexes, and an error that only repeats a shape error is dropped.
//!
//! Client text in an answer (an unknown member's name, quoted values in a `detail`) is
//! shortened: a 1 MiB body could otherwise give a problem too large for the problem middleware
//! to read back, and the client would lose its `code` and `field`.

use super::problem::{ApiError, MAX_ERRORS};
use super::rules::{BodyRules, field_errors};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use tauros_app::FieldError;
use tauros_domain::error::{echo, missing};
use tauros_domain::input::FLOAT_NOT_ALLOWED;

/// Each shape error costs one more pass over the body, so a large body gets fewer passes: at
/// most this many bytes are deserialized again in all, and never fewer than 8 passes.
const REPARSE_BUDGET: usize = 4 * 1024 * 1024;

/// Longest `field` answered; only an unknown member's name (client text) can come near it.
const MAX_FIELD_CHARS: usize = 200;

/// Longest shape error `detail` answered, for client text left outside quotes.
const MAX_DETAIL_CHARS: usize = 1000;

/// Parses a JSON object body into `T`, reporting every shape and value error at once; a
/// [`BodyRules::READ_IN_ONE_PASS`] type is first tried in one pass.
pub fn parse_json<T: DeserializeOwned + BodyRules>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes = &*saturate_wide_integers(bytes);
    if T::READ_IN_ONE_PASS
        && let Some(body) = read_in_one_pass::<T>(bytes)
    {
        return Ok(body);
    }
    three_steps(bytes)
}

/// The three steps alone on a body as sent: what a one-pass read must agree with.
#[cfg(test)]
pub(crate) fn parse_in_three_steps<T: DeserializeOwned + BodyRules>(
    bytes: &[u8],
) -> Result<T, ApiError> {
    three_steps(&saturate_wide_integers(bytes))
}

/// The three steps of the module documentation, every mistake of the body in one answer.
fn three_steps<T: DeserializeOwned + BodyRules>(bytes: &[u8]) -> Result<T, ApiError> {
    parse_value(parse_syntax(bytes)?, bytes.len())
}

/// `bytes` as `T` in one pass, when they are an object that fits it and keeps its field rules.
pub(crate) fn read_in_one_pass<T: DeserializeOwned + BodyRules>(bytes: &[u8]) -> Option<T> {
    // serde would read an array as the struct (see `Object`): leave it to the three steps.
    let first = bytes
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    if *first != b'{' {
        return None;
    }
    let body: T = serde_json::from_slice(bytes).ok()?;
    body.field_rules().is_ok().then_some(body)
}

/// The largest integers serde_json reads as integers; it reads a literal beyond them as a float,
/// which it is not. Such a literal becomes the nearest of them, which every integer rule here
/// refuses as out of its range (an amount beyond 2^53, a negative amount, a count), so that an
/// integer too large is answered as an integer out of range, never as a float (docs/MONEY.md).
/// The body's own bytes are kept when it has none.
pub fn saturate_wide_integers(bytes: &[u8]) -> Cow<'_, [u8]> {
    let mut run = 0;
    let long_run = bytes.iter().any(|b| {
        run = if b.is_ascii_digit() { run + 1 } else { 0 };
        run >= 19
    });
    if !long_run {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(bytes.len());
                out.extend_from_slice(&bytes[start..i]);
            }
            b'-' | b'0'..=b'9' => {
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &bytes[start..i];
                let nearest = saturated(token);
                changed |= nearest.is_some();
                out.extend_from_slice(nearest.unwrap_or(token));
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(bytes)
    }
}

/// The 64-bit integer nearest to a JSON integer literal that no 64-bit integer holds.
fn saturated(token: &[u8]) -> Option<&'static [u8]> {
    let text = std::str::from_utf8(token).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let integer = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'));
    if !integer || text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
        return None;
    }
    Some(if text.starts_with('-') {
        b"-9223372036854775808"
    } else {
        b"18446744073709551615"
    })
}

/// Steps 2 and 3 alone, for JSON parsed already (an MCP tool call's arguments, `size` bytes).
pub fn parse_value<T: DeserializeOwned + BodyRules>(
    value: Value,
    size: usize,
) -> Result<T, ApiError> {
    parse_value_also(value, size, Vec::new)
}

/// [`parse_value`], where a body refused anyway also lists `also()`: errors its type cannot see
/// (an MCP create without `idempotency_key`, which REST may send as a header instead).
pub fn parse_value_also<T: DeserializeOwned + BodyRules>(
    mut value: Value,
    size: usize,
    also: impl FnOnce() -> Vec<FieldError>,
) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "invalid_type",
            "the body must be a JSON object with the request's members",
        )
        .with_field("body"));
    }
    let mut removed = Removed::default();
    let mut found: Vec<ShapeError> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let max_errors = (REPARSE_BUDGET / size.max(1)).clamp(8, MAX_ERRORS);
    let mut parsed: Option<T> = None;
    loop {
        match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(body) => {
                parsed = Some(body);
                break;
            }
            Err(err) => {
                let message = message_of(err.inner());
                let mut path: Vec<Segment> = err.path().iter().filter_map(Segment::of).collect();
                // An unknown member's path may stop at the object that holds it.
                if let Some(name) = backticked(&message, "unknown field `")
                    && path.last() != Some(&Segment::Key(name.to_owned()))
                {
                    path.push(Segment::Key(name.to_owned()));
                }
                let error = shape_error(&render(&removed.original(&path)), &message);
                // A member taken out for its wrong type may then be reported missing (a
                // required MCP argument): its first error says it all. (Compared in full: two
                // long unknown names may share their shortened form.)
                if seen.contains(&error.field.field) {
                    break;
                }
                let stuck = found.len() + 1 >= max_errors || !removed.take(&mut value, &path);
                seen.push(error.field.field.clone());
                found.push(error.shortened());
                if stuck {
                    break;
                }
            }
        }
    }
    // Step 3, on what could be read. A body refused anyway also hears the rules the use case
    // would check (rules.rs), so that one answer lists every mistake.
    let mut values: Vec<FieldError> = Vec::new();
    if let Some(body) = &parsed {
        if let Err(errors) = body.field_rules() {
            values = field_errors(&errors);
        }
        if !found.is_empty() || !values.is_empty() {
            values.extend(body.completing_rules());
        }
    }
    if !found.is_empty() || !values.is_empty() {
        values.extend(also());
    }
    if found.is_empty()
        && values.is_empty()
        && let Some(body) = parsed
    {
        return Ok(body);
    }
    let shapes: Vec<Vec<Segment>> = seen.iter().map(|f| parse_path(f)).collect();
    let mut known: Vec<(String, &'static str)> = Vec::new();
    for mut error in values {
        let path = removed.original(&parse_path(&error.field));
        if shapes.iter().any(|shape| explained_by(&path, shape))
            || known.contains(&(render(&path), error.code))
        {
            continue;
        }
        let field = render(&path);
        if field != error.field {
            error.detail = error.detail.replace(&error.field, &field);
            error.field = field;
        }
        known.push((error.field.clone(), error.code));
        found.push(ShapeError {
            field: error,
            bad_request: false,
        });
    }
    Err(answer(found))
}

/// Whether a value error at `path` only repeats a shape error at `shape`: it is about the same
/// member (or one inside it), or it says that a member is missing whose alternative in the
/// same object was taken out for its shape (`unit_amount` when `unit_amount_minor` was a float).
fn explained_by(path: &[Segment], shape: &[Segment]) -> bool {
    if path.starts_with(shape) {
        return true;
    }
    match (path.split_last(), shape.split_last()) {
        (Some((Segment::Key(name), parent)), Some((Segment::Key(refused), shape_parent))) => {
            parent == shape_parent && refused.starts_with(name.as_str())
        }
        _ => false,
    }
}

/// A rendered path (`lines[1].quantity`) back into its steps; member names hold no `.` or `[`.
fn parse_path(field: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    if field == "body" {
        return out;
    }
    for part in field.split('.') {
        let (key, indexes) = part
            .split_once('[')
            .map_or((part, ""), |(k, rest)| (k, rest));
        if !key.is_empty() {
            out.push(Segment::Key(key.to_owned()));
        }
        for index in indexes.split('[') {
            if let Ok(i) = index.trim_end_matches(']').parse::<usize>() {
                out.push(Segment::Index(i));
            }
        }
    }
    out
}

/// Step 1: the body as a JSON value, or 400 `invalid_json`.
fn parse_syntax(bytes: &[u8]) -> Result<Value, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue::deserialize_from(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            let full = shorten_quoted(&e.to_string());
            let detail = if e.classify() == serde_json::error::Category::Data {
                // Only a repeated member reaches here as data.
                format!("{full}; send each member once")
            } else {
                format!("the body is not valid JSON ({full}); send a JSON object")
            };
            ApiError::bad_request("invalid_json", detail)
        })?;
    Ok(value)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

impl Segment {
    fn of(segment: &serde_path_to_error::Segment) -> Option<Segment> {
        match segment {
            serde_path_to_error::Segment::Map { key } => Some(Segment::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
            _ => None,
        }
    }
}

/// The request's own name for a path: `lines[1].quantity`.
fn render(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) if out.is_empty() => out.push_str(key),
            Segment::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Array elements taken out so far, by the original path of their array, as original indexes.
#[derive(Default)]
struct Removed(Vec<(Vec<Segment>, Vec<usize>)>);

impl Removed {
    /// Maps a path in the current value back to the path in the body as sent.
    fn original(&self, path: &[Segment]) -> Vec<Segment> {
        let mut out: Vec<Segment> = Vec::with_capacity(path.len());
        for segment in path {
            let mapped = match segment {
                Segment::Index(current) => Segment::Index(self.original_index(&out, *current)),
                key => key.clone(),
            };
            out.push(mapped);
        }
        out
    }

    fn original_index(&self, array: &[Segment], current: usize) -> usize {
        let gone = self
            .0
            .iter()
            .find(|(path, _)| path == array)
            .map_or(&[][..], |(_, gone)| gone.as_slice());
        (0..)
            .filter(|i| !gone.contains(i))
            .nth(current)
            .unwrap_or(current)
    }

    /// Takes the member at `path` (current indexes) out of `value`; false when there is none.
    fn take(&mut self, value: &mut Value, path: &[Segment]) -> bool {
        let Some((last, parent)) = path.split_last() else {
            return false;
        };
        let mut node = &mut *value;
        for segment in parent {
            node = match (segment, node) {
                (Segment::Key(k), Value::Object(map)) => match map.get_mut(k) {
                    Some(next) => next,
                    None => return false,
                },
                (Segment::Index(i), Value::Array(items)) => match items.get_mut(*i) {
                    Some(next) => next,
                    None => return false,
                },
                _ => return false,
            };
        }
        match (last, node) {
            (Segment::Key(k), Value::Object(map)) => map.remove(k).is_some(),
            (Segment::Index(i), Value::Array(items)) if *i < items.len() => {
                items.remove(*i);
                let array = self.original(parent);
                let original = self.original_index(&array, *i);
                match self.0.iter_mut().find(|(p, _)| *p == array) {
                    Some((_, gone)) => gone.push(original),
                    None => self.0.push((array, vec![original])),
                }
                true
            }
            _ => false,
        }
    }
}

/// One shape error: the field error, and whether it is a 400 (else a 422).
struct ShapeError {
    field: FieldError,
    bad_request: bool,
}

impl ShapeError {
    /// The error as answered: client text in its field and detail shortened.
    fn shortened(mut self) -> ShapeError {
        self.field.field = clip(&self.field.field, MAX_FIELD_CHARS);
        self.field.detail = clip(&shorten_quoted(&self.field.detail), MAX_DETAIL_CHARS);
        self
    }
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A sentence with every `` `…` `` and `"…"` span in it (a member's name, a value as serde
/// quotes it, with `\"` escapes) shortened by [`echo`]. An unclosed span runs to the end.
fn shorten_quoted(sentence: &str) -> String {
    let mut out = String::with_capacity(sentence.len().min(4096));
    let mut rest = sentence;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = rest.as_bytes()[open] as char;
        out.push_str(&rest[..=open]);
        let inside = &rest[open + 1..];
        let mut escaped = false;
        let close = inside.char_indices().find_map(|(i, c)| {
            let closes = c == quote && !(quote == '"' && escaped);
            escaped = quote == '"' && c == '\\' && !escaped;
            closes.then_some(i)
        });
        match close {
            Some(close) => {
                out.push_str(&echo(&inside[..close]));
                out.push(quote);
                rest = &inside[close + 1..];
            }
            None => {
                out.push_str(&echo(inside));
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// serde's sentence without its " at line … column …" suffix.
fn message_of(err: &serde_json::Error) -> String {
    let full = err.to_string();
    full.rsplit_once(" at line ")
        .map_or(full.as_str(), |(m, _)| m)
        .to_owned()
}

fn shape_error(at: &str, message: &str) -> ShapeError {
    let field = if at.is_empty() { "body" } else { at };
    let error = |code: &'static str, detail: String, bad_request: bool| ShapeError {
        field: FieldError::plain(field, code, detail),
        bad_request,
    };
    if let Some(rest) = message.strip_prefix(FLOAT_NOT_ALLOWED) {
        let why = rest.trim_start_matches(':').trim();
        return error("float_not_allowed", format!("`{field}`: {why}"), true);
    }
    if backticked(message, "unknown field `").is_some() {
        return error(
            "unknown_field",
            format!("`{field}` is not a field of this request; remove it ({message})"),
            true,
        );
    }
    if let Some(name) = backticked(message, "missing field `") {
        let field = join(field, name);
        return ShapeError {
            field: missing(&field),
            bad_request: false,
        };
    }
    if message.starts_with("unknown variant") || message.starts_with("invalid value") {
        return error("invalid_value", message.to_owned(), false);
    }
    error("invalid_type", format!("`{field}`: {message}"), true)
}

/// The answer: a 400 led by the first shape error, else a 422; `errors[]` lists them all.
fn answer(found: Vec<ShapeError>) -> ApiError {
    let first_400 = found.iter().position(|e| e.bad_request);
    let errors: Vec<FieldError> = found.into_iter().map(|e| e.field).collect();
    match first_400 {
        None => ApiError::validation(errors),
        Some(i) => {
            let first = &errors[i];
            let detail = if errors.len() == 1 {
                first.detail.clone()
            } else {
                format!(
                    "{} ({} problems in this body; `errors` lists every one)",
                    first.detail,
                    errors.len()
                )
            };
            ApiError::bad_request(first.code, detail)
                .with_field(first.field.clone())
                .with_errors(errors)
        }
    }
}

fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(name, _)| name)
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() || path == "body" {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// A nested struct that must arrive as a JSON object: serde's derive also reads an array as
/// the struct's members in order (`["a", "1", "400"]` as a line), which a request never means.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        T::deserialize(StructAsMap(de)).map(Object)
    }
}

impl<T: validator::Validate> validator::Validate for Object<T> {
    fn validate(&self) -> Result<(), validator::ValidationErrors> {
        self.0.validate()
    }
}

/// Passes everything through, except that a struct is read only from a map.
struct StructAsMap<D>(D);

macro_rules! forward {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for StructAsMap<D> {
    type Error = D::Error;

    forward!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A JSON value whose objects may not repeat a member.
struct StrictValue;

impl StrictValue {
    fn deserialize_from<'de, D: Deserializer<'de>>(de: D) -> Result<Value, D::Error> {
        de.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // Finite by construction: JSON has no NaN or infinity.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the member `{key}` appears twice"
                )));
            }
            let value = map.next_value_seed(Seed)?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

struct Seed;

impl<'de> de::DeserializeSeed<'de> for Seed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(StrictVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, validator::Validate)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        name: Option<String>,
        count: Option<u32>,
        items: Option<Vec<Object<Item>>>,
    }

    #[derive(Debug, Deserialize, validator::Validate)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        label: Option<String>,
    }

    crate::body_rules!(Body);

    fn problem(body: &str) -> serde_json::Value {
        let err = parse_json::<Body>(body.as_bytes()).unwrap_err();
        serde_json::to_value(err.problem()).unwrap()
    }

    fn fields(problem: &serde_json::Value) -> Vec<(String, String)> {
        problem["errors"]
            .as_array()
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| {
                        (
                            e["field"].as_str().unwrap().to_owned(),
                            e["code"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn syntax_is_decided_before_any_member_is_typed() {
        let p = problem(r#"{"name": 5, "items": ["#);
        assert_eq!(p["code"], "invalid_json");
        assert_eq!(p["status"], 400);
    }

    #[test]
    fn a_repeated_member_is_refused() {
        let p = problem(r#"{"name": "a", "name": "b"}"#);
        assert_eq!(p["code"], "invalid_json");
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("`name` appears twice")
        );
    }

    #[test]
    fn every_shape_error_is_listed_with_its_original_index() {
        let p = problem(
            r#"{"name": 5, "count": "x", "extra": 1,
                "items": [{"label": 1}, {"label": "ok"}, {"label": 2, "nope": 0}]}"#,
        );
        assert_eq!(p["code"], "invalid_type");
        assert_eq!(p["field"], "count");
        assert_eq!(
            fields(&p),
            [
                ("count".to_owned(), "invalid_type".to_owned()),
                ("extra".to_owned(), "unknown_field".to_owned()),
                ("items[0].label".to_owned(), "invalid_type".to_owned()),
                ("items[2].label".to_owned(), "invalid_type".to_owned()),
                ("items[2].nope".to_owned(), "unknown_field".to_owned()),
                ("name".to_owned(), "invalid_type".to_owned()),
            ]
        );
    }

    #[test]
    fn elements_of_the_wrong_type_keep_later_indexes_right() {
        let p = problem(r#"{"items": [1, {"label": "ok"}, true, {"label": 3}]}"#);
        assert_eq!(
            fields(&p),
            [
                ("items[0]".to_owned(), "invalid_type".to_owned()),
                ("items[2]".to_owned(), "invalid_type".to_owned()),
                ("items[3].label".to_owned(), "invalid_type".to_owned()),
            ]
        );
    }

    #[test]
    fn a_nested_struct_sent_as_an_array_is_a_type_error() {
        let p = problem(r#"{"items": [["a"], {"label": "ok"}]}"#);
        assert_eq!(p["code"], "invalid_type");
        assert_eq!(p["field"], "items[0]");
        assert_eq!(fields(&p).len(), 1);
    }

    #[test]
    fn a_body_that_is_not_an_object_is_one_type_error() {
        let p = problem("[1, 2]");
        assert_eq!(p["code"], "invalid_type");
        assert_eq!(p["field"], "body");
    }

    #[test]
    fn a_valid_body_parses() {
        let body: Body = parse_json(br#"{"name": "a", "items": [{"label": "b"}]}"#).unwrap();
        assert_eq!(body.name.as_deref(), Some("a"));
        let items = body.items.unwrap();
        assert_eq!(items[0].0.label.as_deref(), Some("b"));
    }

    #[test]
    fn client_text_in_an_answer_is_shortened() {
        let long = "k".repeat(10_000);
        let p = problem(&format!(
            r#"{{"{long}": 1, "name": "{long}", "count": "{long}"}}"#
        ));
        let text = p.to_string();
        assert!(text.len() < 4_000, "{} bytes", text.len());
        assert_eq!(
            fields(&p)
                .iter()
                .map(|(f, c)| (f.chars().count(), c.as_str()))
                .collect::<Vec<_>>(),
            [(5, "invalid_type"), (MAX_FIELD_CHARS + 1, "unknown_field")]
        );
        assert!(p["errors"][1]["field"].as_str().unwrap().starts_with("kkk"));
        assert!(p["errors"][1]["field"].as_str().unwrap().ends_with('…'));
        let detail = p["errors"][0]["detail"].as_str().unwrap();
        assert!(detail.contains("expected u32"), "{detail}");
        assert!(detail.contains("kkk…"), "{detail}");
        // Escaped quotes inside a value do not end its span early.
        let tricky = format!(r#"{{"count": "a\"{long}"}}"#);
        let p = problem(&tricky);
        assert!(p.to_string().len() < 1_000);
        assert!(p["detail"].as_str().unwrap().contains("expected u32"));
    }

    #[test]
    fn shortening_keeps_short_text_and_cuts_long_spans() {
        assert_eq!(
            shorten_quoted("unknown field `x`, expected `y`"),
            "unknown field `x`, expected `y`"
        );
        let long = "v".repeat(100);
        assert_eq!(
            shorten_quoted(&format!(
                "invalid type: string \"{long}\", expected a boolean"
            )),
            format!(
                "invalid type: string \"{}…\", expected a boolean",
                "v".repeat(40)
            )
        );
        assert_eq!(
            shorten_quoted(&format!("open `{long}")),
            format!("open `{}…", "v".repeat(40))
        );
    }

    // `nested` calls `validate` on the member, so the trait must be in scope.
    use validator::Validate;

    #[derive(Debug, Deserialize, Validate)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Ruled {
        #[validate(required)]
        name: Option<String>,
        #[validate(nested)]
        items: Option<Vec<Object<RuledItem>>>,
    }

    #[derive(Debug, Deserialize, validator::Validate)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct RuledItem {
        #[validate(length(max = 3))]
        label: Option<String>,
    }

    crate::body_rules!(Ruled, RuledItem);

    fn ruled(body: &str) -> serde_json::Value {
        let err = parse_json::<Ruled>(body.as_bytes()).unwrap_err();
        serde_json::to_value(err.problem()).unwrap()
    }

    #[test]
    fn value_errors_come_with_shape_errors_at_the_bodys_own_indexes() {
        // items[0] is taken out for its type; the value error of what was items[2] (index 1
        // once it is gone) keeps its index in the body as sent.
        let p = ruled(r#"{"items": [1, {"label": "ok"}, {"label": "toolong"}]}"#);
        assert_eq!(p["status"], 400);
        assert_eq!(p["code"], "invalid_type");
        assert_eq!(
            fields(&p),
            [
                ("items[0]".to_owned(), "invalid_type".to_owned()),
                ("items[2].label".to_owned(), "invalid_length".to_owned()),
                ("name".to_owned(), "required".to_owned()),
            ]
        );
    }

    #[test]
    fn value_errors_alone_are_a_422_and_a_refused_member_is_not_reported_missing() {
        let p = ruled(r#"{"items": [{"label": "toolong"}]}"#);
        assert_eq!(p["status"], 422);
        assert_eq!(p["code"], "validation_failed");
        assert_eq!(
            fields(&p),
            [
                ("items[0].label".to_owned(), "invalid_length".to_owned()),
                ("name".to_owned(), "required".to_owned()),
            ]
        );
        let p = ruled(r#"{"name": 5}"#);
        assert_eq!(fields(&p), [("name".to_owned(), "invalid_type".to_owned())]);
    }

    #[test]
    fn a_value_error_repeating_a_shape_error_is_dropped() {
        let lines = |path: &str| parse_path(path);
        assert!(explained_by(
            &lines("lines[0].unit_amount"),
            &lines("lines[0].unit_amount")
        ));
        assert!(explained_by(
            &lines("lines[0].unit_amount"),
            &lines("lines[0].unit_amount_minor")
        ));
        assert!(explained_by(
            &lines("lines[1].quantity"),
            &lines("lines[1]")
        ));
        assert!(!explained_by(
            &lines("lines[1].unit_amount"),
            &lines("lines[0].unit_amount_minor")
        ));
        assert!(!explained_by(&lines("lines"), &lines("lines[0].quantity")));
        assert_eq!(render(&lines("lines[12].quantity")), "lines[12].quantity");
        assert_eq!(render(&lines("body")), "");
    }

    #[test]
    fn the_list_is_bounded() {
        let items: Vec<String> = (0..300).map(|_| "1".to_owned()).collect();
        let p = problem(&format!(r#"{{"items": [{}]}}"#, items.join(",")));
        assert_eq!(p["errors"].as_array().unwrap().len(), MAX_ERRORS);
    }

    #[test]
    fn an_integer_beyond_64_bits_becomes_the_nearest_64_bit_one_and_nothing_else_changes() {
        let saturated = |text: &str| {
            String::from_utf8(saturate_wide_integers(text.as_bytes()).into_owned()).unwrap()
        };
        assert!(matches!(
            saturate_wide_integers(br#"{"a": 18446744073709551615}"#),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            saturated(r#"{"a":100000000000000000000,"b":[-100000000000000000000, 1]}"#),
            r#"{"a":18446744073709551615,"b":[-9223372036854775808, 1]}"#
        );
        for kept in [
            r#"{"a":"100000000000000000000"}"#,
            r#"{"a":"\"100000000000000000000"}"#,
            r#"{"100000000000000000000":1}"#,
            r#"{"a":100000000000000000000.0,"b":1e20,"c":18446744073709551615}"#,
            r#"{"a":-9223372036854775808,"b":00000000000000000000001}"#,
        ] {
            assert_eq!(saturated(kept), kept);
        }
    }

    #[derive(Debug, Deserialize, validator::Validate)]
    #[serde(deny_unknown_fields)]
    struct Priced {
        amount_minor: Option<tauros_domain::input::MinorAmountInput>,
    }

    crate::body_rules!(Priced);

    proptest::proptest! {
        /// An amount of any size, as a JSON integer or as digits: exact up to its bound (2^53 for
        /// an integer, 2^127 - 1 for digits), `amount_out_of_range` beyond it, never a float.
        #[test]
        fn an_amount_is_exact_up_to_its_bound_and_out_of_range_beyond(
            digits in "[1-9][0-9]{15,40}",
            as_text: bool,
        ) {
            use tauros_domain::money::{MAX_JSON_INTEGER, MoneyError};
            let body = if as_text {
                format!(r#"{{"amount_minor": "{digits}"}}"#)
            } else {
                format!(r#"{{"amount_minor": {digits}}}"#)
            };
            let read = parse_json::<Priced>(body.as_bytes()).map_err(|e| e.problem().detail);
            let minor = read.unwrap().amount_minor.unwrap().to_minor();
            match (digits.parse::<i128>(), as_text) {
                (Ok(n), false) if n <= MAX_JSON_INTEGER => proptest::prop_assert_eq!(minor.unwrap().get(), n),
                (_, false) => proptest::prop_assert_eq!(minor, Err(MoneyError::BeyondJsonInteger)),
                (Ok(n), true) => proptest::prop_assert_eq!(minor.unwrap().get(), n),
                (Err(_), true) => proptest::prop_assert_eq!(minor, Err(MoneyError::OutOfRange)),
            }
        }
    }
}
