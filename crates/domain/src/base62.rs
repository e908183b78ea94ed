//! Reads a base-62 string of known byte length, as every request presenting an API key does:
//! `base_x` reads any length at a visible share of a GET's cost. This fills a fixed array and
//! answers exactly what `base_x::decode` answers (the tests compare the two).

/// The digits, in order: `0` is zero.
pub(crate) const ALPHABET: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// 62^5, the most a step multiplies by: under 2^32, so one 32-bit limb times it, plus a carry
/// under 2^32, fits 64 bits.
const STEP: u64 = 62 * 62 * 62 * 62 * 62;

/// The number's width in 32-bit limbs: 64 bytes, more than any string this reads can carry
/// (callers bound the length first; a longer number is refused, not cut).
const LIMBS: usize = 16;

/// `text` as exactly `N` bytes (`N` ≤ 64) as `base_x` reads it (a zero byte per leading `0`);
/// `None` for a non-digit or another length.
pub(crate) fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    const { assert!(N <= LIMBS * 4) };
    let leaders = text.bytes().take_while(|&b| b == b'0').count();
    // Limbs least significant first; `used` of them hold the number so far.
    let mut limbs = [0u32; LIMBS];
    let mut used = 0;
    let (mut chunk, mut scale) = (0u64, 1u64);
    for byte in text.bytes() {
        chunk = chunk * 62 + u64::from(digit(byte)?);
        scale *= 62;
        if scale == STEP {
            used = mul_add(&mut limbs, used, scale, chunk)?;
            (chunk, scale) = (0, 1);
        }
    }
    if scale > 1 {
        mul_add(&mut limbs, used, scale, chunk)?;
    }
    let mut all = [0u8; LIMBS * 4];
    for (i, limb) in limbs.iter().enumerate() {
        let end = all.len() - 4 * i;
        all[end - 4..end].copy_from_slice(&limb.to_be_bytes());
    }
    let significant = all.len() - all.iter().take_while(|&&b| b == 0).count();
    if leaders + significant != N {
        return None;
    }
    let mut out = [0u8; N];
    out[N - significant..].copy_from_slice(&all[all.len() - significant..]);
    Some(out)
}

fn digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'A'..=b'Z' => Some(byte - b'A' + 10),
        b'a'..=b'z' => Some(byte - b'a' + 36),
        _ => None,
    }
}

/// `limbs = limbs * mul + add`, where the first `used` limbs hold the number (the others are
/// zero): how many hold it now, or `None` if it outgrows the limbs.
fn mul_add(limbs: &mut [u32; LIMBS], used: usize, mul: u64, add: u64) -> Option<usize> {
    let mut carry = add;
    for limb in &mut limbs[..used] {
        let value = u64::from(*limb) * mul + carry;
        *limb = value as u32;
        carry = value >> 32;
    }
    if carry == 0 {
        return Some(used);
    }
    // The carry is under 2^32: one more limb holds it.
    *limbs.get_mut(used)? = carry as u32;
    Some(used + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `base_x` reads, at the length asked for.
    fn base_x<const N: usize>(text: &str) -> Option<[u8; N]> {
        base_x::decode(ALPHABET, text).ok()?.try_into().ok()
    }

    /// A string of digits (mostly), sometimes with a character that is not one.
    fn text(max: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                40 => prop::sample::select(ALPHABET.as_bytes()).prop_map(char::from),
                8 => Just('0'),
                1 => prop::sample::select(&['_', '-', '+', '/', '=', ' ', 'é'][..]),
            ],
            0..max,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    /// `N` bytes as `base_x` writes them, then perhaps a digit added, dropped or replaced.
    fn written<const N: usize>() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(any::<u8>(), N),
            0..N,
            0..6u8,
            any::<prop::sample::Index>(),
            prop::sample::select(ALPHABET.as_bytes()),
        )
            .prop_map(|(mut bytes, zeros, change, at, digit)| {
                bytes[..zeros % 3].fill(0);
                let mut text = base_x::encode(ALPHABET, &bytes);
                match change {
                    0 => text.insert(0, '0'),
                    1 => text.push(char::from(digit)),
                    2 => {
                        text.pop();
                    }
                    3 if !text.is_empty() => {
                        let i = at.index(text.len());
                        text.replace_range(i..=i, &char::from(digit).to_string());
                    }
                    _ => {}
                }
                text
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn reads_any_string_as_base_x_does(text in text(90)) {
            prop_assert_eq!(decode::<48>(&text), base_x::<48>(&text));
            prop_assert_eq!(decode::<4>(&text), base_x::<4>(&text));
            prop_assert_eq!(decode::<32>(&text), base_x::<32>(&text));
        }

        #[test]
        fn reads_written_keys_as_base_x_does(text in written::<48>()) {
            prop_assert_eq!(decode::<48>(&text), base_x::<48>(&text));
        }

        #[test]
        fn reads_written_checksums_as_base_x_does(text in written::<4>()) {
            prop_assert_eq!(decode::<4>(&text), base_x::<4>(&text));
        }
    }

    #[test]
    fn reads_the_edges_as_base_x_does() {
        let all_zero_48 = "0".repeat(48);
        let max_48 = base_x::encode(ALPHABET, &[0xff; 48]);
        for text in [
            "",
            "0",
            "00",
            "0000",
            "00001",
            "1",
            "zzzzzz",
            all_zero_48.as_str(),
            max_48.as_str(),
            &format!("0{max_48}"),
            &format!("{max_48}0"),
        ] {
            assert_eq!(decode::<48>(text), base_x::<48>(text), "{text}");
            assert_eq!(decode::<4>(text), base_x::<4>(text), "{text}");
        }
        assert_eq!(decode::<4>("0000"), Some([0; 4]));
        assert_eq!(decode::<48>(&max_48), Some([0xff; 48]));
        assert_eq!(decode::<48>(&format!("0{max_48}")), None);
    }
}
