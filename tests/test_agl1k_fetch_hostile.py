"""``agl-fast agl1k fetch`` and ``resolve_audio`` against a hostile server,
hostile manifests and a hostile output folder: planted symbolic links,
redirects to addresses a download must not reach, a manifest that lies about
durations, cells and encodings, over-long URLs, files changed behind the
fetch manifest. Each ends in a typed error or a correct result, with nothing
written outside the output folder."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from ipaddress import ip_address as ip
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from agl_fast import manifest
from agl_fast._internal.safe_files import create_new
from agl_fast.cli import main
from agl_fast.dataset import FetchRecord, Ledger, read_ledger
from agl_fast.dataset.fetch import CHECK_RATE, max_seconds
from agl_fast.dataset.items import mp3seconds_problem
from agl_fast.dataset.redirects import RedirectGuard, RedirectRefused, address_kind, refusal
from agl_fast.exceptions import ParameterError, UnsafePathError
from test_agl1k_fetch import FAST, Archive, make_mp3, sha, write_csv


@pytest.fixture
def server() -> Iterator[Archive]:
    a = Archive()
    a.start()
    yield a
    a.stop()


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_mp3(tmp_path_factory.mktemp("clip") / "c.mp3", 1.0, 440.0)


def base(a: Archive) -> str:
    return f"http://127.0.0.1:{a.httpd.server_address[1]}"


def run(url: str, csv_path: Path, out: Path, *extra: str) -> int:
    return main(["agl1k", "fetch", str(csv_path), "--out", str(out), "--base-url", url,
                 *FAST, *extra])  # fmt: skip


def tree(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (links not followed) and its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# --- item 2: files stay inside their folder -----------------------------------


def test_planted_links_at_temporary_names_are_not_written_through(
    server: Archive, clip: bytes, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_bytes(b"precious")
    server.files["/k_ok/a.mp3"] = clip
    csv_path = write_csv(tmp_path / "m.csv", [("k_ok", "a.mp3", 1.0), ("k_gone", "b.mp3", 1.0)])
    out = tmp_path / "out"
    out.mkdir()
    (out / ".fetch_summary.json.tmp").symlink_to(victim)
    (out / ".k_ok.mp3.part").symlink_to(outside / "written_ok.bin")  # dangling
    (out / ".k_gone.mp3.part").symlink_to(outside / "written_failed.bin")  # dangling
    before = tree(outside)
    assert run(base(server), csv_path, out) == 1  # k_gone is a 404
    assert tree(outside) == before  # nothing written or created outside
    stored = out / "k_ok.mp3"
    assert not stored.is_symlink() and stored.read_bytes() == clip
    led = read_ledger(out)
    assert led["k_ok"].status == "ok" and led["k_ok"].sha256 == sha(clip)
    assert led["k_gone"].error_type == "http_404" and not os.path.lexists(out / "k_gone.mp3")
    summary = out / "fetch_summary.json"
    assert not summary.is_symlink() and json.loads(summary.read_text())["fetched"] == 1
    assert not [p for p in out.iterdir() if p.name.endswith((".part", ".tmp"))]


def test_create_new_replaces_a_link_planted_at_its_name(tmp_path: Path) -> None:
    """The race a scan cannot see: a link planted after the start."""
    target = tmp_path / "target"
    target.write_bytes(b"precious")
    name = tmp_path / ".k.mp3.part"
    for link_to in (target, tmp_path / "absent"):
        name.symlink_to(link_to)
        with os.fdopen(create_new(name), "wb") as fh:
            fh.write(b"download")
        assert not name.is_symlink() and name.read_bytes() == b"download"
        assert target.read_bytes() == b"precious" and not (tmp_path / "absent").exists()
        name.unlink()


def test_links_leading_outside_the_output_stop_the_fetch(
    server: Archive, clip: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.mp3").write_bytes(clip)
    server.files["/k/a.mp3"] = clip
    csv_path = write_csv(tmp_path / "m.csv", [("k", "a.mp3", 1.0)])
    # a stored clip that is a link to a file outside, vouched for by a forged line
    out = tmp_path / "out"
    out.mkdir()
    (out / "k.mp3").symlink_to(outside / "x.mp3")
    rec = FetchRecord(key="k", mp3name="a.mp3", url="u", status="ok", path="k.mp3",
                      bytes=len(clip), sha256=sha(clip))  # fmt: skip
    (out / "fetch.jsonl").write_text(rec.to_json() + "\n")
    assert run(base(server), csv_path, out) == 2
    err = capsys.readouterr().err
    assert "symlink(s) leading outside it" in err and "k.mp3 ->" in err
    assert server.requests("/k/a.mp3") == 0
    # deeper in the tree too; a link that stays inside is fine
    (out / "k.mp3").unlink()
    (out / "sub").mkdir()
    (out / "sub" / "up").symlink_to(tmp_path)
    assert run(base(server), csv_path, out) == 2
    (out / "sub" / "up").unlink()
    (out / "sub" / "in").symlink_to(out / "fetch.jsonl")
    assert run(base(server), csv_path, out) == 0
    assert (out / "k.mp3").read_bytes() == clip and not (out / "k.mp3").is_symlink()
    # the manifest itself a link: refused, its target untouched
    out2 = tmp_path / "out2"
    out2.mkdir()
    (outside / "log").write_text("precious")
    (out2 / "fetch.jsonl").symlink_to(outside / "log")
    with pytest.raises(UnsafePathError, match="is a symlink"):
        Ledger(out2)
    assert run(base(server), csv_path, out2) == 2
    assert (outside / "log").read_text() == "precious"


# --- item 3: redirects only where a download may go -----------------------------


@pytest.mark.parametrize(
    ("base_addr", "target", "refused"),
    [
        ("93.184.215.14", "127.0.0.1", "loopback"),  # a public base: no loopback
        ("93.184.215.14", "169.254.169.254", "link-local"),
        ("93.184.215.14", "10.1.2.3", "private"),
        ("93.184.215.14", "192.168.0.1", "private"),
        ("93.184.215.14", "100.64.0.1", "private"),  # carrier-grade NAT
        ("93.184.215.14", "224.0.0.1", "multicast"),
        ("93.184.215.14", "0.0.0.0", "unspecified"),
        ("93.184.215.14", "::1", "loopback"),
        ("93.184.215.14", "::ffff:169.254.169.254", "link-local"),  # IPv4-mapped
        ("93.184.215.14", "::ffff:127.0.0.1", "loopback"),
        ("93.184.215.14", "2002:a9fe:a9fe::1", "link-local"),  # 6to4
        ("93.184.215.14", "64:ff9b::a9fe:a9fe", "link-local"),  # NAT64
        ("93.184.215.14", "fe80::1", "link-local"),
        ("93.184.215.14", "fd00::1", "private"),
        ("93.184.215.14", "ff02::1", "multicast"),
        ("127.0.0.1", "169.254.169.254", "link-local"),  # a loopback base: loopback only
        ("127.0.0.1", "10.0.0.1", "private"),
        ("93.184.215.14", "207.241.224.2", None),  # public to public: the archive's mirrors
        ("93.184.215.14", "2606:4700::1111", None),
        ("127.0.0.1", "127.0.0.1", None),
        ("127.0.0.1", "::1", None),
        ("10.0.0.5", "10.0.0.6", None),  # a mirror inside a private network
    ],
)
def test_redirect_rule_on_resolved_addresses(
    base_addr: str, target: str, refused: str | None
) -> None:
    why = refusal([ip(base_addr)], ip(target))
    if refused is None:
        assert why is None
    else:
        assert why is not None and why.startswith(f"{ip(target)} is ")
        assert address_kind(ip(target)) == refused


def test_guard_refuses_loopback_from_a_public_base_before_connecting() -> None:
    guard = RedirectGuard("http://93.184.215.14/download")

    async def check(url: str) -> None:
        await guard(httpx.Request("GET", url))

    asyncio.run(check("http://93.184.215.14/download/k/a.mp3"))  # the base's host
    for url in ("http://127.0.0.1:9/x", "http://localhost/x", "http://2130706433/x",
                "http://0x7f000001/x", "http://127.1/x", "http://[::1]/x"):  # fmt: skip
        with pytest.raises(RedirectRefused, match="loopback address"):
            asyncio.run(check(url))


def test_guard_refuses_an_answer_from_a_forbidden_peer(server: Archive, clip: bytes) -> None:
    """A name checked public that connects elsewhere (DNS rebinding): the
    answer's own peer address is checked before its body is read."""
    server.files["/files/a.mp3"] = clip
    guard = RedirectGuard("http://93.184.215.14/download")

    async def get() -> None:
        hooks = {"response": [guard.check_peer]}
        async with httpx.AsyncClient(event_hooks=hooks) as client:
            await client.get(f"{base(server)}/files/a.mp3")

    with pytest.raises(RedirectRefused, match=r"127\.0\.0\.1 is a loopback address"):
        asyncio.run(get())
    loopback = RedirectGuard(base(server))

    async def get_ok() -> bytes:
        hooks = {"response": [loopback.check_peer]}
        async with httpx.AsyncClient(event_hooks=hooks) as client:
            return (
                await client.get(f"http://localhost:{server.httpd.server_address[1]}/files/a.mp3")
            ).content

    assert asyncio.run(get_ok()) == clip


class _Connects:
    """Addresses the process tries to connect to (an audit hook, installed once)."""

    seen: list[str] = []  # noqa: RUF012
    installed = False

    @classmethod
    def start(cls) -> list[str]:
        if not cls.installed:

            def hook(event: str, args: tuple[Any, ...]) -> None:
                if event == "socket.connect" and isinstance(args[1], tuple):
                    cls.seen.append(str(args[1][0]))

            sys.addaudithook(hook)
            cls.installed = True
        cls.seen.clear()
        return cls.seen


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "//169.254.169.254/latest/meta-data/",
        "http://2852039166/latest/meta-data/",  # decimal
        "http://0xa9fea9fe/latest/meta-data/",  # hex
        "http://169.254.43518/latest/meta-data/",  # short form
        "http://0251.0376.0251.0376/latest/meta-data/",  # octal (an invalid URL to httpx)
        "http://[::ffff:169.254.169.254]/latest/meta-data/",  # IPv4-mapped IPv6
        "http://10.0.0.1/x.mp3",
        "http://224.0.0.1/x.mp3",
        "http://0/x.mp3",
    ],
)
def test_redirects_to_forbidden_addresses_fail_typed_without_a_connection(
    server: Archive, clip: bytes, tmp_path: Path, location: str
) -> None:
    server.always["/k/a.mp3"] = f"redirect:{location}"
    csv_path = write_csv(tmp_path / "m.csv", [("k", "a.mp3", 1.0)])
    out = tmp_path / "out"
    connects = _Connects.start()
    assert run(base(server), csv_path, out, "--retries", "3") == 1
    rec = read_ledger(out)["k"]
    assert rec.error_type == "redirect_refused", rec
    assert rec.attempts == 1  # not retried
    assert "refused a redirect" in str(rec.reason)
    assert server.requests("/k/a.mp3") == 1
    assert set(connects) <= {"127.0.0.1"}, connects
    assert not os.path.lexists(out / "k.mp3")


def test_redirects_to_loopback_and_public_shape_are_followed(
    server: Archive, clip: bytes, tmp_path: Path
) -> None:
    port = server.httpd.server_address[1]
    server.files["/files/a.mp3"] = clip
    server.always["/k/a.mp3"] = f"redirect:http://localhost:{port}/files/a.mp3"
    csv_path = write_csv(tmp_path / "m.csv", [("k", "a.mp3", 1.0)])
    out = tmp_path / "out"
    assert run(base(server), csv_path, out) == 0
    rec = read_ledger(out)["k"]
    assert rec.status == "ok" and rec.final_url == f"http://localhost:{port}/files/a.mp3"


# --- item 4: memory bounded by what the bytes can hold -----------------------------


def test_mp3seconds_is_checked_per_row_and_never_caps_the_decode(
    server: Archive, clip: bytes, tmp_path: Path
) -> None:
    rows = [("k_huge", "a.mp3", 1e300), ("k_neg", "a.mp3", -3.0), ("k_zero", "a.mp3", 0.0)]
    for key, _, _ in rows:
        server.files[f"/{key}/a.mp3"] = clip
    csv_path = write_csv(tmp_path / "m.csv", rows)
    out = tmp_path / "out"
    assert run(base(server), csv_path, out) == 0  # every file is valid audio
    led = read_ledger(out)
    assert all(r.status == "ok" and r.seconds == pytest.approx(1.0, abs=0.06)
               for r in led.values())  # fmt: skip
    assert led["k_huge"].duration_ok is False and led["k_huge"].mp3seconds == 1e300
    assert led["k_neg"].duration_ok is None and led["k_neg"].mp3seconds is None
    assert led["k_zero"].duration_ok is False
    summary = json.loads((out / "fetch_summary.json").read_text())
    assert summary["bad_mp3seconds"] == ["k_neg"]
    assert sorted(summary["duration_mismatch"]) == ["k_huge", "k_zero"]
    for bad in ("nan", "inf", -1, "x"):
        assert mp3seconds_problem(bad)[0] is None and mp3seconds_problem(bad)[1] is not None
    assert mp3seconds_problem(1e300) == (1e300, None)
    # the cap comes from the bytes: 8 kbit/s is MP3's lowest rate
    assert max_seconds(1000, "mp3") == 2.0 and max_seconds(48_000_000, "mp3") == 48_001.0
    assert CHECK_RATE * 4 * max_seconds(256 << 20, "mp3") < 1.1e9


# VmHWM, this process's own peak (ru_maxrss keeps the high-water mark of
# the process image before exec: a child forked from a large pytest would
# report pytest's size)
_RSS_CHILD = """
import sys
from agl_fast.cli import main
rc = main(sys.argv[1:])
with open("/proc/self/status") as f:
    hwm = next(int(x.split()[1]) for x in f if x.startswith("VmHWM:"))
print("RSS", hwm, rc)
"""


@pytest.mark.slow
def test_a_48_mb_mp3_with_mp3seconds_1e300_peaks_under_300_mb(
    server: Archive, tmp_path: Path
) -> None:
    """The issue's figure: 4.6 GB before (the decode capped at 2 x 1e300 + 60 s)."""
    lo = tmp_path / "lo.mp3"
    # MPEG-2 layer III at 8 kbit/s, 24 kHz: 24 samples a byte, the most MP3 holds
    src = "sine=frequency=440:duration=60:sample_rate=24000"
    enc = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", src, "-ac", "1", "-b:a", "8k",
           "-write_xing", "0", "-id3v2_version", "0", str(lo)]  # fmt: skip
    try:
        subprocess.run(enc, check=True, timeout=120)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("ffmpeg cannot write an 8 kbit/s MP3")
    unit = lo.read_bytes()
    big = unit * (48_000_000 // len(unit) + 1)  # 13 h 20 min of audio
    server.files["/k_big/big.mp3"] = big
    csv_path = write_csv(tmp_path / "m.csv", [("k_big", "big.mp3", 1e300)])
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-c", _RSS_CHILD, "agl1k", "fetch", str(csv_path), "--out", str(out),
           "--base-url", base(server), *FAST, "--read-timeout", "60"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    line = next(x for x in res.stdout.splitlines() if x.startswith("RSS"))
    rss_kib, rc = (int(v) for v in line.split()[1:])
    rec = read_ledger(out)["k_big"]
    assert rc == 0 and rec.status == "ok", (rec, res.stderr[-2000:])
    assert rec.bytes == len(big) and rec.duration_ok is False
    assert rec.seconds == pytest.approx(len(big) / len(unit) * 60.048, rel=1e-3)
    assert rss_kib < 300 * 1024, f"peak RSS {rss_kib / 1024:.0f} MB"


# --- item 5: the manifest CSV ----------------------------------------------------


def test_manifest_csv_big_cells_bom_and_bad_utf8(
    server: Archive, clip: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.files["/k/a.mp3"] = clip
    plain = write_csv(tmp_path / "m.csv", [("k", "a.mp3", 1.0)])
    text = plain.read_text(encoding="utf-8")
    big = tmp_path / "big.csv"
    big.write_text(text.replace(",d,t,", f',"{"description " * 20_000}",t,'), encoding="utf-8")
    assert len(manifest.read_manifest(big).column("description")[0].as_py()) > 200_000
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert manifest.read_manifest(bom).column_names[0] == "key"
    for i, path in enumerate((big, bom)):
        assert run(base(server), path, tmp_path / f"o{i}") == 0
        assert read_ledger(tmp_path / f"o{i}")["k"].status == "ok"
    bad = tmp_path / "bad.csv"
    bad.write_bytes(text.encode("utf-8").replace(b"City", b"Cit\xff\xfe"))
    with pytest.raises(ParameterError, match="not UTF-8 text"):
        manifest.read_manifest(bad)
    capsys.readouterr()
    assert run(base(server), bad, tmp_path / "o_bad") == 2
    assert "not UTF-8 text" in capsys.readouterr().err
    huge = tmp_path / "huge.csv"
    huge.write_text(text.replace(",d,t,", f',"{"x" * (manifest.MAX_CSV_CELL + 1)}",t,'))
    with pytest.raises(ParameterError, match="not a readable CSV"):
        manifest.read_manifest(huge)


# --- item 8: fetch state tells the truth ---------------------------------------------


def test_a_65000_character_final_url_keeps_the_ledger_whole(
    server: Archive, clip: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    far = "/files/" + "a" * 64_990 + ".mp3"
    server.files[far] = clip
    server.always["/k/a.mp3"] = f"redirect:{far}"
    csv_path = write_csv(tmp_path / "m.csv", [("k", "a.mp3", 1.0)])
    out = tmp_path / "out"
    assert run(base(server), csv_path, out) == 0
    lines = (out / "fetch.jsonl").read_bytes().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 1 << 16
    rec = read_ledger(out)["k"]
    full = base(server) + far
    assert rec.status == "ok" and str(rec.final_url).startswith(full[:2048])
    assert f"[{len(full)} chars, sha256 {sha(full.encode())}]" in str(rec.final_url)
    with caplog.at_level("WARNING", logger="agl_fast.dataset"):
        assert run(base(server), csv_path, out) == 0
    assert "damaged" not in caplog.text
    assert server.requests(far) == 1  # kept, not fetched again
    assert json.loads((out / "fetch_summary.json").read_text())["kept"] == 1


def test_a_failed_refetch_sets_the_changed_file_aside(
    server: Archive, clip: bytes, tmp_path: Path
) -> None:
    server.files["/k/STE001.mp3"] = clip
    csv_path = write_csv(tmp_path / "m.csv", [("k", "STE001.mp3", 1.0)])
    out = tmp_path / "out"
    assert run(base(server), csv_path, out) == 0
    assert manifest.resolve_audio(["k"], ["STE001.mp3"], out) == [out / "k.mp3"]
    (out / "k.mp3").write_bytes(b"altered on disk")
    del server.files["/k/STE001.mp3"]  # the refetch fails
    assert run(base(server), csv_path, out) == 1
    assert read_ledger(out)["k"].error_type == "http_404"
    assert not (out / "k.mp3").exists()
    assert (out / ".k.mp3.unverified").read_bytes() == b"altered on disk"  # kept, unused
    assert json.loads((out / "fetch_summary.json").read_text())["set_aside"] == 1
    got = manifest.resolve_audio(["k"], ["STE001.mp3"], out)
    assert got[0] is None or not got[0].exists()


def test_resolve_audio_refuses_what_the_fetch_manifest_does_not_vouch_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "audio"
    with Ledger(out) as led:
        for key, status in (("k_ok", "ok"), ("k_failed", "failed"), ("k_resized", "ok")):
            (out / f"{key}.mp3").write_bytes(b"abc")
            led.append(FetchRecord(key=key, mp3name="a.mp3", url="u", status=status,
                                   path=f"{key}.mp3", bytes=3, error_type=None))  # fmt: skip
    (out / "k_resized.mp3").write_bytes(b"abcd")
    (out / "k_unlisted.mp3").write_bytes(b"abc")
    keys = ["k_ok", "k_failed", "k_resized", "k_unlisted"]
    with caplog.at_level("WARNING", logger="agl_fast.manifest"):
        got = manifest.resolve_audio(keys, ["a.mp3"] * 4, out)
    assert got == [out / "k_ok.mp3", None, None, None]
    assert "3 clip(s) refused" in caplog.text
    assert "the last fetch of k_failed.mp3 failed" in caplog.text
    assert "k_resized.mp3 changed since it was fetched" in caplog.text
    assert "k_unlisted.mp3 has no line in its fetch.jsonl" in caplog.text
    with pytest.raises(ParameterError, match="3 clip"):
        manifest.resolve_audio(keys, ["a.mp3"] * 4, out, strict=True)


def test_resolve_audio_reads_only_inside_the_audio_dir(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    audio = tmp_path / "audio"
    audio.mkdir()
    secret = tmp_path / "secret.mp3"
    secret.write_bytes(b"not yours")
    (audio / "k_link.mp3").symlink_to(secret)
    (audio / "named.mp3").symlink_to(secret)
    (audio / "inner.mp3").write_bytes(b"a")
    (audio / "k_inner.mp3").symlink_to(audio / "inner.mp3")
    keys = ["k_link", "k_cell", "k_up", "k_inner", "k_abs"]
    cells = ["x.mp3", "named.mp3", "../secret.mp3", "x.mp3", str(audio / "inner.mp3")]
    with caplog.at_level("WARNING", logger="agl_fast.manifest"):
        got = manifest.resolve_audio(keys, cells, audio)
    assert got == [None, None, None, audio / "k_inner.mp3", audio / "inner.mp3"]
    assert "3 clip(s) refused" in caplog.text and "leads outside" in caplog.text
    with pytest.raises(ParameterError, match="leads outside"):
        manifest.resolve_audio(keys, cells, audio, strict=True)
    allowed = manifest.resolve_audio(keys, cells, audio, allow_outside=True)
    assert allowed[:3] == [audio / "k_link.mp3", audio / "named.mp3", audio / "../secret.mp3"]
    # without an audio directory there is no root: the cells as written
    assert manifest.resolve_audio(["k"], [str(secret)]) == [secret]


def test_a_refused_redirect_reason_reads_well(server: Archive, tmp_path: Path) -> None:
    server.always["/k/a.mp3"] = "redirect:http://2852039166/latest/meta-data/"
    csv_path = write_csv(tmp_path / "m.csv", [("k", "a.mp3", 1.0)])
    run(base(server), csv_path, tmp_path / "out")
    reason = str(read_ledger(tmp_path / "out")["k"].reason)
    assert reason.startswith("refused a redirect to http://2852039166/latest/meta-data/")
    assert "169.254.169.254 is a link-local address" in reason
