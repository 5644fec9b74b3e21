//! The end padding of a Matroska/WebM stream.
//!
//! An Opus stream in Matroska marks the samples past its real end with a
//! `DiscardPadding` element (in nanoseconds) on its last block, which
//! symphonia's Matroska reader does not expose. This module walks the
//! file's top-level elements (sizes only, no payload read) to the last
//! cluster, reads that cluster (bounded) and returns the padding of its last
//! block, so the decoder can trim what ffmpeg and libopus trim.

use std::io::{Read, Seek, SeekFrom};

const SEGMENT: u32 = 0x1853_8067;
const CLUSTER: u32 = 0x1F43_B675;
const BLOCK_GROUP: u32 = 0xA0;
const SIMPLE_BLOCK: u32 = 0xA3;
const DISCARD_PADDING: u32 = 0x75A2;

/// Elements visited at most (a hostile file of tiny elements stays cheap).
const MAX_ELEMENTS: usize = 1 << 20;
/// Bytes of the last cluster read at most.
const MAX_CLUSTER: u64 = 16 << 20;

/// An element ID (1-4 bytes, marker bits kept) at the reader's position.
fn read_id<R: Read>(r: &mut R) -> Option<(u32, u64)> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b).ok()?;
    let len = b[0].leading_zeros() as usize + 1;
    if len > 4 {
        return None;
    }
    let mut id = b[0] as u32;
    for _ in 1..len {
        r.read_exact(&mut b).ok()?;
        id = (id << 8) | b[0] as u32;
    }
    Some((id, len as u64))
}

/// An element size (1-8 bytes); `Ok(None)` inside means "unknown size".
fn read_size<R: Read>(r: &mut R) -> Option<(Option<u64>, u64)> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b).ok()?;
    let len = b[0].leading_zeros() as usize + 1;
    if len > 8 {
        return None;
    }
    let mut v = (b[0] as u64) & (0xFF >> len);
    let mut all_ones = v == (0xFF >> len);
    for _ in 1..len {
        r.read_exact(&mut b).ok()?;
        v = (v << 8) | b[0] as u64;
        all_ones &= b[0] == 0xFF;
    }
    Some((if all_ones { None } else { Some(v) }, len as u64))
}

/// Position and size of the last cluster of the first segment.
fn last_cluster<R: Read + Seek>(r: &mut R, len: u64) -> Option<(u64, u64)> {
    let mut pos = 0u64;
    let mut seen = 0usize;
    let mut end = len;
    let mut last = None;
    while pos < end && seen < MAX_ELEMENTS {
        seen += 1;
        r.seek(SeekFrom::Start(pos)).ok()?;
        let (id, id_len) = read_id(r)?;
        let (size, size_len) = read_size(r)?;
        let body = pos + id_len + size_len;
        if id == SEGMENT {
            // enter the segment: its children follow
            end = size.map_or(len, |s| body.saturating_add(s).min(len));
            pos = body;
            continue;
        }
        let size = size?; // an element of unknown size ends the walk
        if id == CLUSTER {
            last = Some((body, size));
        }
        pos = body.checked_add(size)?;
    }
    last
}

/// `DiscardPadding` of the last block in `cluster` (its payload), in ns.
fn padding_in(cluster: &[u8]) -> Option<i64> {
    let mut r = std::io::Cursor::new(cluster);
    let mut padding = None;
    let n = cluster.len() as u64;
    let mut pos = 0u64;
    while pos < n {
        r.set_position(pos);
        let (id, id_len) = read_id(&mut r)?;
        let (size, size_len) = read_size(&mut r)?;
        let size = size?;
        let body = pos + id_len + size_len;
        let stop = body.checked_add(size)?.min(n);
        match id {
            SIMPLE_BLOCK => padding = None,
            BLOCK_GROUP => {
                padding = None;
                let mut q = body;
                while q < stop {
                    r.set_position(q);
                    let (cid, cid_len) = read_id(&mut r)?;
                    let (csize, csize_len) = read_size(&mut r)?;
                    let csize = csize?;
                    let cbody = q + cid_len + csize_len;
                    if cid == DISCARD_PADDING && (1..=8).contains(&csize) {
                        let bytes = cluster.get(cbody as usize..(cbody + csize) as usize)?;
                        // a signed big-endian integer
                        let mut v: i64 = if bytes[0] & 0x80 != 0 { -1 } else { 0 };
                        for &b in bytes {
                            v = (v << 8) | b as i64;
                        }
                        padding = Some(v);
                    }
                    q = cbody.checked_add(csize)?;
                }
            }
            _ => {}
        }
        pos = stop;
    }
    padding
}

/// Nanoseconds of padding after the end of a Matroska/WebM stream (the
/// `DiscardPadding` of the last cluster's last block), when it has some.
/// Anything unreadable or unexpected gives `None`: nothing is trimmed.
pub fn end_padding_ns<R: Read + Seek>(r: &mut R, len: u64) -> Option<u64> {
    let (at, size) = last_cluster(r, len)?;
    if size > MAX_CLUSTER || at.checked_add(size)? > len {
        return None;
    }
    r.seek(SeekFrom::Start(at)).ok()?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(size as usize).ok()?;
    r.take(size).read_to_end(&mut buf).ok()?;
    padding_in(&buf).filter(|&v| v > 0).map(|v| v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(id: &[u8], body: &[u8]) -> Vec<u8> {
        let mut v = id.to_vec();
        v.push(0x80 | body.len() as u8); // one-byte size (tests keep bodies < 127)
        v.extend_from_slice(body);
        v
    }

    fn file(clusters: &[Vec<u8>]) -> Vec<u8> {
        let mut seg_body = element(&[0x15, 0x49, 0xA9, 0x66], &[0x00]); // Info
        for c in clusters {
            seg_body.extend(element(&[0x1F, 0x43, 0xB6, 0x75], c));
        }
        let mut f = element(&[0x1A, 0x45, 0xDF, 0xA3], &[0x42, 0x86, 0x81, 0x01]);
        f.extend_from_slice(&[0x18, 0x53, 0x80, 0x67]);
        f.push(0x01); // an 8-byte size
        f.extend_from_slice(&(seg_body.len() as u64).to_be_bytes()[1..]);
        f.extend(seg_body);
        f
    }

    #[test]
    fn padding_of_the_last_block_group() {
        let block = element(&[0xA1], &[0x81, 0, 0, 0]);
        let pad = element(&[0x75, 0xA2], &13_500_000i32.to_be_bytes());
        let group = element(&[0xA0], &[block.clone(), pad].concat());
        let first = element(&[0xA3], &[0x81, 0, 0, 0]);
        let f = file(&[first.clone(), [first.clone(), group.clone()].concat()]);
        let n = f.len() as u64;
        assert_eq!(
            end_padding_ns(&mut std::io::Cursor::new(f), n),
            Some(13_500_000)
        );
        // a simple block after the group: the padding is not at the end
        let f = file(&[[group, first].concat()]);
        let n = f.len() as u64;
        assert_eq!(end_padding_ns(&mut std::io::Cursor::new(f), n), None);
    }

    #[test]
    fn garbage_and_cut_files_give_none() {
        for bytes in [
            vec![],
            vec![0u8; 64],
            vec![0xFF; 64],
            vec![0x1A, 0x45, 0xDF],
        ] {
            let n = bytes.len() as u64;
            assert_eq!(end_padding_ns(&mut std::io::Cursor::new(bytes), n), None);
        }
        let block = element(&[0xA1], &[0x81, 0, 0, 0]);
        let pad = element(&[0x75, 0xA2], &[0x10]);
        let f = file(&[element(&[0xA0], &[block, pad].concat())]);
        for cut in 0..f.len() {
            let part = f[..cut].to_vec();
            let n = part.len() as u64;
            // never panics; a cut file may still name the padding it holds
            let _ = end_padding_ns(&mut std::io::Cursor::new(part), n);
        }
    }
}
