//! Header checks for AIFF and AIFF-C before symphonia's reader sees them.
//!
//! The reader turns the `COMM` chunk's 80-bit sample rate into an integer
//! time base and panics on a rate of 0; a channel count of 0 or a rate
//! outside `1..=MAX_SAMPLE_RATE` is refused here with a reason instead.

use crate::resample::MAX_SAMPLE_RATE;

/// Most channels an AIFF `COMM` chunk may declare (symphonia's channel
/// mask holds 32).
pub const MAX_CHANNELS: u16 = 32;

/// Whether `head` starts an AIFF or AIFF-C file.
pub fn is_aiff(head: &[u8]) -> bool {
    head.len() >= 12 && &head[..4] == b"FORM" && matches!(&head[8..12], b"AIFF" | b"AIFC")
}

/// The sample rate of an 80-bit IEEE 754 extended value (big-endian), if
/// it is a finite, non-negative number.
pub fn extended_rate(b: &[u8; 10]) -> Option<f64> {
    let se = u16::from_be_bytes([b[0], b[1]]);
    let mant = u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]);
    if se & 0x8000 != 0 || se == 0x7FFF {
        return None;
    }
    Some(mant as f64 * 2f64.powi(i32::from(se) - 16_383 - 63))
}

/// Check the `COMM` chunk of the AIFF file starting `head` (the first
/// bytes of the file). A file that is not AIFF, or whose `COMM` chunk lies
/// beyond `head`, passes: the reader reports what is missing.
///
/// # Errors
/// The reason the header cannot be decoded.
pub fn check(head: &[u8]) -> Result<(), String> {
    if !is_aiff(head) {
        return Ok(());
    }
    let mut pos = 12usize;
    while pos + 8 <= head.len() {
        let size = u32::from_be_bytes([head[pos + 4], head[pos + 5], head[pos + 6], head[pos + 7]]);
        if &head[pos..pos + 4] == b"COMM" {
            let Some(body) = head.get(pos + 8..pos + 26) else {
                return Ok(());
            };
            if size < 18 {
                return Err(format!("AIFF COMM chunk of {size} bytes (at least 18)"));
            }
            let ch = u16::from_be_bytes([body[0], body[1]]);
            if ch == 0 || ch > MAX_CHANNELS {
                return Err(format!(
                    "AIFF header declares {ch} channels (1 to {MAX_CHANNELS} supported)"
                ));
            }
            let rate: &[u8; 10] = body[8..18].try_into().expect("10 bytes");
            return match extended_rate(rate) {
                Some(r) if r >= 1.0 && r <= f64::from(MAX_SAMPLE_RATE) => Ok(()),
                Some(r) => Err(format!(
                    "AIFF header declares a sample rate of {r} Hz (1 to {MAX_SAMPLE_RATE} supported)"
                )),
                None => Err("AIFF header declares an invalid sample rate".into()),
            };
        }
        pos = pos
            .saturating_add(8)
            .saturating_add(size as usize + (size as usize & 1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aiff(ch: u16, rate: [u8; 10]) -> Vec<u8> {
        let mut b = b"FORM\0\0\0\x2eAIFFCOMM\0\0\0\x12".to_vec();
        b.extend_from_slice(&ch.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 10, 0, 16]);
        b.extend_from_slice(&rate);
        b
    }

    const R44K: [u8; 10] = [0x40, 0x0E, 0xAC, 0x44, 0, 0, 0, 0, 0, 0];

    #[test]
    fn rates_and_channels_are_bounded() {
        assert_eq!(extended_rate(&R44K), Some(44_100.0));
        assert!(check(&aiff(2, R44K)).is_ok());
        assert!(check(&aiff(0, R44K)).unwrap_err().contains("0 channels"));
        assert!(check(&aiff(33, R44K)).unwrap_err().contains("33 channels"));
        let mut zero = R44K;
        zero[2..].fill(0);
        assert!(check(&aiff(2, zero)).unwrap_err().contains("rate of 0"));
        let mut inf = R44K;
        inf[..2].copy_from_slice(&[0x7F, 0xFF]);
        assert!(check(&aiff(2, inf))
            .unwrap_err()
            .contains("invalid sample rate"));
        let mut neg = R44K;
        neg[0] |= 0x80;
        assert!(check(&aiff(2, neg)).is_err());
        assert!(check(b"RIFF\0\0\0\0WAVE").is_ok());
    }
}
