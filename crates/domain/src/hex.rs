//! Lowercase hex, how every digest Tauros stores or sends is written (payload hashes, the audit
//! chain, fingerprints, ETags).

/// `bytes` as lowercase hex, two digits a byte: one allocation, for the answer (a digest written
/// with `format!("{b:02x}")` a byte at a time made 32 strings for a SHA-256; docs/
/// PERFORMANCE.md #28, "Part 12").
pub fn lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_written_as_format_writes_it() {
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower(&all), expected);
        assert_eq!(lower(&[]), "");
    }
}
