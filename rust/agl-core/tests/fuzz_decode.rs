//! A stable-Rust fuzz loop over the decoders: seeded mutations of small
//! valid WAV, FLAC, MP3, Ogg Vorbis and AAC/M4A files, each decoded with
//! [`decode_file`] (and, every other case, [`decode_many`] beside a good
//! file). A case passes when the call returns, `Ok` or `Err`, without a
//! panic escaping, within 20 s, under a 4 GiB address-space cap; an
//! allocation failure or a stack overflow ends the process, and then the
//! case being decoded is the file `current.*` in the scratch directory the
//! run names on stderr.
//!
//! `cargo test -p agl-core --test fuzz_decode` runs 300 cases from base
//! seed 1 (WAV seeds are written here; the others need `ffmpeg` and are
//! skipped with a message without it). `AGL_FUZZ_ITERS=100000
//! AGL_FUZZ_SEED=7` runs longer ones; `AGL_FUZZ_START=N` starts at case `N`
//! (to go on after a case that ended the process).

use std::fs;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agl_core::audio::{decode_file, decode_many, Channels, DecodeParams};
use agl_core::parallel::Cancel;
use agl_core::resample::Quality;

const DEFAULT_ITERS: u64 = 300;
const CASE_LIMIT: Duration = Duration::from_secs(20);
const MEMORY_CAP: u64 = 4 << 30;

/// Marsaglia's xorshift64: small, seedable, the same on every platform.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        let mut r = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for _ in 0..4 {
            r.next();
        }
        r
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

/// Write to the process's stderr directly: the test harness captures
/// `eprintln!`, and these lines matter most when the process dies.
fn say(msg: &str) {
    let mut e = std::io::stderr();
    let _ = writeln!(e, "fuzz_decode: {msg}");
    let _ = e.flush();
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {v:?}")),
        Err(_) => default,
    }
}

// ------------------------------------------------------------------ seeds

struct Seed {
    name: String,
    ext: &'static str,
    data: Vec<u8>,
    /// Offsets near the fields headers size things from.
    hot: Vec<usize>,
}

#[derive(Clone, Copy)]
enum Pcm {
    U8,
    I16,
    I24,
    F32,
}

fn wav(sr: u32, ch: u16, pcm: Pcm, extensible: bool, frames: usize) -> Vec<u8> {
    let (bits, tag): (u16, u16) = match pcm {
        Pcm::U8 => (8, 1),
        Pcm::I16 => (16, 1),
        Pcm::I24 => (24, 1),
        Pcm::F32 => (32, 3),
    };
    let block = ch as usize * bits as usize / 8;
    let mut body = Vec::with_capacity(frames * block);
    for i in 0..frames {
        for c in 0..ch {
            let t = i as f64 / sr as f64;
            let x = 0.5 * (2.0 * std::f64::consts::PI * 330.0 * (c + 1) as f64 * t).sin();
            match pcm {
                Pcm::U8 => body.push((128.0 + 127.0 * x) as u8),
                Pcm::I16 => body.extend_from_slice(&((x * 32767.0) as i16).to_le_bytes()),
                Pcm::I24 => body.extend_from_slice(&((x * 8_388_607.0) as i32).to_le_bytes()[..3]),
                Pcm::F32 => body.extend_from_slice(&(x as f32).to_le_bytes()),
            }
        }
    }
    let mut fmt = Vec::new();
    fmt.extend_from_slice(&(if extensible { 0xFFFE } else { tag }).to_le_bytes());
    fmt.extend_from_slice(&ch.to_le_bytes());
    fmt.extend_from_slice(&sr.to_le_bytes());
    fmt.extend_from_slice(&(sr * block as u32).to_le_bytes());
    fmt.extend_from_slice(&(block as u16).to_le_bytes());
    fmt.extend_from_slice(&bits.to_le_bytes());
    if extensible {
        fmt.extend_from_slice(&22u16.to_le_bytes());
        fmt.extend_from_slice(&bits.to_le_bytes());
        fmt.extend_from_slice(&((1u32 << ch) - 1).to_le_bytes());
        // KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT: the tag, then a fixed tail.
        fmt.extend_from_slice(&tag.to_le_bytes());
        fmt.extend_from_slice(&[
            0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
        ]);
    }
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&((4 + 8 + fmt.len() + 8 + body.len()) as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
    out.extend_from_slice(&fmt);
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Encode a short two-tone stereo clip with ffmpeg; `None` (and a message)
/// when ffmpeg or the encoder is missing.
fn ffmpeg_seed(dir: &Path, name: &str, ext: &str, args: &[&str]) -> Option<Vec<u8>> {
    let out = dir.join(format!("{name}.{ext}"));
    let res = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg("sine=frequency=440:sample_rate=44100:duration=0.3")
        .args([
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=660:sample_rate=44100:duration=0.3",
        ])
        .args(["-filter_complex", "[0:a][1:a]amerge=inputs=2", "-bitexact"])
        .args(args)
        .arg(&out)
        .output();
    match res {
        Ok(o) if o.status.success() => fs::read(&out).ok(),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            say(&format!("no {name} seed (ffmpeg failed: {})", err.trim()));
            None
        }
        Err(e) => {
            say(&format!("no {name} seed (ffmpeg is not available: {e})"));
            None
        }
    }
}

const TAGS: &[&[u8]] = &[
    b"RIFF", b"fmt ", b"data", b"fact", b"fLaC", b"OggS", b"vorbis", b"Xing", b"Info", b"LAME",
    b"ID3", b"moov", b"trak", b"mdhd", b"mvhd", b"hdlr", b"stsd", b"mp4a", b"esds", b"stts",
    b"stsc", b"stsz", b"stco", b"co64", b"ctts", b"elst", b"mdat",
];

/// Offsets around every tag (chunk ids, box types, capture patterns) and
/// MP3 frame syncs: where sizes, rates and counts live.
fn hot_offsets(d: &[u8]) -> Vec<usize> {
    let mut hot = Vec::new();
    for tag in TAGS {
        let mut i = 0;
        while let Some(k) = find(&d[i..], tag) {
            let at = i + k;
            for off in (at.saturating_sub(4)..at + 32).step_by(2) {
                if off < d.len() {
                    hot.push(off);
                }
            }
            i = at + 1;
        }
    }
    let syncs = (0..d.len().saturating_sub(1))
        .filter(|&i| d[i] == 0xFF && d[i + 1] & 0xE0 == 0xE0)
        .take(16);
    for i in syncs {
        hot.extend((i + 1..i + 4).filter(|&o| o < d.len()));
    }
    hot.sort_unstable();
    hot.dedup();
    hot
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn make_seeds(dir: &Path) -> Vec<Seed> {
    let mut seeds: Vec<(String, &'static str, Vec<u8>)> = vec![
        (
            "wav_i16_stereo".into(),
            "wav",
            wav(44100, 2, Pcm::I16, false, 13230),
        ),
        (
            "wav_i24_mono".into(),
            "wav",
            wav(22050, 1, Pcm::I24, false, 6615),
        ),
        (
            "wav_f32_stereo".into(),
            "wav",
            wav(48000, 2, Pcm::F32, false, 14400),
        ),
        (
            "wav_u8_mono".into(),
            "wav",
            wav(8000, 1, Pcm::U8, false, 2400),
        ),
        (
            "wavex_i16_3ch".into(),
            "wav",
            wav(16000, 3, Pcm::I16, true, 4800),
        ),
    ];
    for (name, ext, args) in [
        ("flac", "flac", &["-c:a", "flac"][..]),
        ("mp3", "mp3", &["-c:a", "libmp3lame", "-q:a", "4"][..]),
        ("ogg", "ogg", &["-c:a", "libvorbis"][..]),
        ("m4a", "m4a", &["-c:a", "aac", "-b:a", "96k"][..]),
    ] {
        if let Some(d) = ffmpeg_seed(dir, name, ext, args) {
            seeds.push((name.to_string(), ext, d));
        }
    }
    seeds
        .into_iter()
        .map(|(name, ext, data)| {
            let hot = hot_offsets(&data);
            Seed {
                name,
                ext,
                data,
                hot,
            }
        })
        .collect()
}

// --------------------------------------------------------------- mutators

const EDGES: &[u64] = &[
    0,
    1,
    2,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0xFFFF,
    0x00FF_FFFF,
    0x1000_0000,
    0x7FFF_FFFF,
    0xFFFF_FFFF,
    u64::MAX,
];

fn ogg_crc(page: &[u8]) -> u32 {
    let mut crc = 0u32;
    for &b in page {
        crc ^= (b as u32) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04C1_1DB7
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Recompute the CRC of every Ogg page, so mutations reach the parser
/// behind the checksum.
fn fix_ogg(d: &mut [u8]) {
    let mut i = 0;
    while let Some(k) = find(&d[i..], b"OggS") {
        let at = i + k;
        if at + 27 > d.len() {
            break;
        }
        let nseg = d[at + 26] as usize;
        let lace_end = (at + 27 + nseg).min(d.len());
        let body: usize = d[at + 27..lace_end].iter().map(|&b| b as usize).sum();
        let end = (lace_end + body).min(d.len());
        d[at + 22..at + 26].fill(0);
        let crc = ogg_crc(&d[at..end]);
        d[at + 22..at + 26].copy_from_slice(&crc.to_le_bytes());
        i = at + 4;
    }
}

/// Apply one mutation; returns its description.
fn mutate(rng: &mut XorShift, d: &mut Vec<u8>, hot: &[usize]) -> String {
    let pick = |rng: &mut XorShift, len: usize| -> usize {
        if !hot.is_empty() && rng.percent(70) {
            hot[rng.below(hot.len())].min(len.saturating_sub(1))
        } else {
            rng.below(len)
        }
    };
    if d.is_empty() {
        d.push(0);
    }
    match rng.below(8) {
        0..=2 => {
            let off = pick(rng, d.len());
            let width = [1usize, 2, 4, 8][rng.below(4)];
            let v = if rng.percent(80) {
                EDGES[rng.below(EDGES.len())]
            } else {
                rng.next()
            };
            let be = rng.percent(50);
            let bytes = if be {
                v.to_be_bytes()[8 - width..].to_vec()
            } else {
                v.to_le_bytes()[..width].to_vec()
            };
            let end = (off + width).min(d.len());
            d[off..end].copy_from_slice(&bytes[..end - off]);
            format!(
                "set{}{}@{off}={v:#x}",
                width * 8,
                if be { "be" } else { "le" }
            )
        }
        3 => {
            let off = pick(rng, d.len()).max(1);
            d.truncate(off);
            format!("truncate@{off}")
        }
        4 => {
            let n = 1 + rng.below(8);
            let mut offs = Vec::new();
            for _ in 0..n {
                let i = pick(rng, d.len());
                d[i] ^= 1 << rng.below(8);
                offs.push(i.to_string());
            }
            format!("bitflip@{}", offs.join(","))
        }
        5 => {
            let off = rng.below(d.len());
            let n = (1 + rng.below(64)).min(d.len() - off);
            let v = [0x00, 0xFF, 0x80, rng.next() as u8][rng.below(4)];
            d[off..off + n].fill(v);
            format!("byterun@{off}x{n}={v:#x}")
        }
        6 => {
            // Copy a stretch elsewhere (duplicated or shuffled chunks).
            let a = pick(rng, d.len());
            let n = (1 + rng.below(512)).min(d.len() - a);
            let piece = d[a..a + n].to_vec();
            let to = pick(rng, d.len() + 1).min(d.len());
            if rng.percent(50) {
                d.splice(to..to, piece);
                format!("dup@{a}+{n}->{to}")
            } else {
                d.drain(a..a + n);
                format!("delete@{a}+{n}")
            }
        }
        _ => {
            let at = pick(rng, d.len() + 1).min(d.len());
            let n = 1 + rng.below(32);
            let blob: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            d.splice(at..at, blob);
            format!("insert@{at}+{n}")
        }
    }
}

// ------------------------------------------------------------------- loop

fn params_for(k: usize) -> (DecodeParams, &'static str) {
    let mut p = DecodeParams::default();
    let label = match k {
        0 => "sr=32000",
        1 => {
            p.sr = None;
            "sr=None"
        }
        2 => {
            p.channels = Channels::Mono;
            p.sr = Some(16000);
            p.quality = Quality::Fast;
            p.max_duration = Some(0.05);
            "mono sr=16000 fast max_duration=0.05"
        }
        _ => {
            p.channels = Channels::Select(0);
            p.offset = 0.1;
            p.duration = Some(0.1);
            "channel=0 offset=0.1 duration=0.1"
        }
    };
    (p, label)
}

#[cfg(unix)]
fn cap_memory(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: bytes as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we pass and has no other effect
    // on this process's memory.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
    if rc != 0 {
        say("could not cap the address space; running without the cap");
    }
}

#[cfg(not(unix))]
fn cap_memory(_bytes: u64) {}

/// Kill the process when one case runs past [`CASE_LIMIT`], naming it.
fn watchdog(current: Arc<Mutex<(Instant, String)>>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let (since, what) = current.lock().unwrap().clone();
            if since.elapsed() > CASE_LIMIT {
                say(&format!("HANG: {what} ran past {CASE_LIMIT:?}"));
                std::process::exit(3);
            }
        }
    });
}

/// Decode the case at `path` alone: `Ok(None)` for a clean error,
/// `Ok(Some(problems))` for a decode (each problem a broken promise of the
/// result), `Err` for a panic.
fn decode_alone(
    path: &Path,
    params: &DecodeParams,
    cancel: &Cancel,
) -> Result<Option<Vec<String>>, String> {
    match catch_unwind(AssertUnwindSafe(|| decode_file(path, params, cancel))) {
        Err(_) => Err("a panic escaped decode_file".into()),
        Ok(Err(_)) => Ok(None),
        Ok(Ok(dec)) => {
            let mut problems = Vec::new();
            let n = dec.frames();
            if dec.channels.iter().any(|c| c.len() != n) {
                problems.push("channels of different lengths".into());
            }
            if params.sr.is_some_and(|sr| sr != dec.sr) {
                problems.push(format!("asked for {:?} Hz, got {}", params.sr, dec.sr));
            }
            Ok(Some(problems))
        }
    }
}

/// Decode the case at `path` in one batch after a good file: the batch
/// must not fail as a whole nor lose the good file.
fn decode_beside_good(
    good: &Path,
    path: &Path,
    params: &DecodeParams,
    cancel: &Cancel,
) -> Option<String> {
    let paths = [good, path];
    match catch_unwind(AssertUnwindSafe(|| {
        decode_many(&paths, params, Some(1), cancel)
    })) {
        Err(_) => Some("a panic escaped decode_many".into()),
        Ok(Err(e)) => Some(format!("decode_many failed as a whole: {e}")),
        Ok(Ok(v)) if v.len() != 2 || v[0].is_err() => Some("decode_many lost the good file".into()),
        Ok(Ok(_)) => None,
    }
}

#[test]
fn mutated_files_decode_or_fail_cleanly() {
    let iters = env_u64("AGL_FUZZ_ITERS", DEFAULT_ITERS);
    let base = env_u64("AGL_FUZZ_SEED", 1);
    // Resume after a case that ended the process.
    let start = env_u64("AGL_FUZZ_START", 0);
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let seeds = make_seeds(&dir); // ffmpeg runs before the cap
    let good = dir.join("good.wav");
    fs::write(&good, &seeds[0].data).unwrap();
    cap_memory(MEMORY_CAP);
    say(&format!(
        "{iters} cases from seed {base} over {} seeds; the case being decoded is {}/current.* \
         (the reproducer if this process dies)",
        seeds.len(),
        dir.display()
    ));
    let current = Arc::new(Mutex::new((Instant::now(), String::from("start-up"))));
    let stop = Arc::new(AtomicBool::new(false));
    watchdog(current.clone(), stop.clone());
    let cancel = Cancel::new();
    let mut failures = Vec::new();
    let (mut ok, mut err) = (0u64, 0u64);
    let mut last_path: Option<PathBuf> = None;
    for i in start..start + iters {
        let mut rng = XorShift::new(base.wrapping_mul(1_000_003).wrapping_add(i));
        let seed = &seeds[rng.below(seeds.len())];
        let mut d = seed.data.clone();
        let mut ops = Vec::new();
        for _ in 0..1 + rng.below(3) {
            ops.push(mutate(&mut rng, &mut d, &seed.hot));
        }
        if seed.ext == "ogg" && rng.percent(80) {
            fix_ogg(&mut d);
        }
        let (params, plabel) = params_for(rng.below(4));
        let what = format!(
            "case {base}/{i}: {} [{}] ({plabel})",
            seed.name,
            ops.join(" ")
        );
        let path = dir.join(format!("current.{}", seed.ext));
        if last_path.as_ref().is_some_and(|p| *p != path) {
            let _ = fs::remove_file(last_path.as_ref().unwrap());
        }
        fs::write(&path, &d).unwrap();
        last_path = Some(path.clone());
        fs::write(dir.join("current.txt"), &what).unwrap();
        *current.lock().unwrap() = (Instant::now(), what.clone());

        let mut fail = |why: String| {
            let keep = dir.join(format!("failed-{base}-{i}.{}", seed.ext));
            fs::write(&keep, &d).unwrap();
            failures.push(format!("{what}: {why} (saved as {})", keep.display()));
        };
        match decode_alone(&path, &params, &cancel) {
            Ok(None) => err += 1,
            Ok(Some(problems)) => {
                ok += 1;
                problems.into_iter().for_each(&mut fail);
            }
            Err(why) => fail(why),
        }
        if i % 2 == 0 {
            if let Some(why) = decode_beside_good(&good, &path, &params, &cancel) {
                fail(why);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    say(&format!(
        "{iters} cases: {ok} decoded, {err} errors, {} failures",
        failures.len()
    ));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn mutations_are_reproducible() {
    let seed = wav(8000, 1, Pcm::I16, false, 800);
    let hot = hot_offsets(&seed);
    assert!(
        hot.contains(&24),
        "the sample rate field of the fmt chunk is a hot offset"
    );
    let run = || {
        let mut rng = XorShift::new(42);
        let mut d = seed.clone();
        let ops: Vec<String> = (0..20).map(|_| mutate(&mut rng, &mut d, &hot)).collect();
        (d, ops)
    };
    let (a, ops_a) = run();
    let (b, ops_b) = run();
    assert_eq!(ops_a, ops_b);
    assert_eq!(a, b);
    assert_ne!(a, seed);
}

#[test]
fn ogg_crc_is_the_ogg_polynomial() {
    // Ogg's CRC is CRC-32/CKSUM without the final inversion: the standard
    // check value 0x765E7680 of "123456789", inverted.
    assert_eq!(ogg_crc(b"123456789"), 0x765E_7680 ^ 0xFFFF_FFFF);
}
