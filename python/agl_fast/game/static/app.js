// The listening game's player page. No external code: the map is drawn from
// /static/world.json (plate carree: x = longitude, y = -latitude).
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"];
  const $ = (id) => document.getElementById(id);
  const map = $("map"), overlay = $("overlay"), audio = $("audio");
  const state = { round: null, index: 0, guess: null, cursor: { lat: 0, lon: 0 }, done: false };

  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function cell(row, text) {
    const td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
    return td;
  }
  function fmtLat(lat) { return Math.abs(lat).toFixed(2) + "°" + (lat >= 0 ? "N" : "S"); }
  function fmtLon(lon) { return Math.abs(lon).toFixed(2) + "°" + (lon >= 0 ? "E" : "W"); }
  function fmtKm(d) { return Math.round(d).toLocaleString("en") + " km"; }
  function place(p) { return [p.city, p.country].filter(Boolean).join(", "); }

  async function api(path, body) {
    const opts = body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    };
    const r = await fetch(path, opts);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
    return data;
  }

  async function drawMap() {
    const g = $("graticule");
    for (let lon = -150; lon <= 150; lon += 30) el("line", { x1: lon, y1: -90, x2: lon, y2: 90 }, g);
    for (let lat = -60; lat <= 60; lat += 30) el("line", { x1: -180, y1: lat, x2: 180, y2: lat }, g);
    const world = await api("/static/world.json");
    const c = $("countries");
    for (const country of world.countries) {
      const p = el("path", { d: country.d }, c);
      el("title", {}, p).textContent = country.name;
    }
  }

  function marker(cls, lat, lon, r) {
    return el("circle", { class: cls, cx: lon, cy: -lat, r: r || 2.2 }, overlay);
  }
  function drawCursor() {
    overlay.querySelectorAll(".cursor").forEach((e) => e.remove());
    const { lat, lon } = state.cursor;
    el("line", { class: "cursor", x1: lon - 5, y1: -lat, x2: lon + 5, y2: -lat }, overlay);
    el("line", { class: "cursor", x1: lon, y1: -lat - 5, x2: lon, y2: -lat + 5 }, overlay);
  }
  function setGuess(lat, lon) {
    if (state.done) return;
    lat = Math.max(-90, Math.min(90, lat));
    lon = Math.max(-180, Math.min(180, lon));
    state.guess = { lat, lon };
    overlay.querySelectorAll(".guess").forEach((e) => e.remove());
    marker("guess", lat, lon);
    $("coords").textContent = "Your guess: " + fmtLat(lat) + ", " + fmtLon(lon) + ". Press Submit.";
    $("submit").disabled = false;
  }

  map.addEventListener("click", (ev) => {
    const pt = map.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    const p = pt.matrixTransform(map.getScreenCTM().inverse());
    if (p.x < -180 || p.x > 180 || p.y < -90 || p.y > 90) return;
    state.cursor = { lat: -p.y, lon: p.x };
    setGuess(-p.y, p.x);
  });
  map.addEventListener("focus", () => { if (!state.done) drawCursor(); });
  map.addEventListener("keydown", (ev) => {
    if (state.done) return;
    const step = ev.shiftKey ? 1 : 5;
    const c = state.cursor;
    const moves = { ArrowUp: [step, 0], ArrowDown: [-step, 0], ArrowLeft: [0, -step], ArrowRight: [0, step] };
    if (ev.key in moves) {
      c.lat = Math.max(-90, Math.min(90, c.lat + moves[ev.key][0]));
      c.lon = c.lon + moves[ev.key][1];
      if (c.lon > 180) c.lon -= 360;
      if (c.lon < -180) c.lon += 360;
      drawCursor();
      $("coords").textContent = "Cursor: " + fmtLat(c.lat) + ", " + fmtLon(c.lon) + ". Enter places your guess.";
      ev.preventDefault();
    } else if (ev.key === "Enter" || ev.key === " ") {
      setGuess(c.lat, c.lon);
      ev.preventDefault();
    }
  });

  function showScore(score, n, maxScore) {
    $("score").textContent = "Round score: " + Math.round(score) + " / " + maxScore;
  }

  function loadClip() {
    const clip = state.round.clips[state.index];
    state.guess = null; state.done = false; state.cursor = { lat: 0, lon: 0 };
    overlay.replaceChildren();
    audio.src = clip.audio;
    $("status").textContent = "Clip " + (state.index + 1) + " of " + state.round.clips.length +
      ": listen, then place your guess on the map.";
    $("coords").textContent = "No guess placed yet.";
    $("submit").disabled = true;
    $("next").hidden = true;
    $("result").hidden = true;
  }

  function showReveal(rv) {
    state.done = true;
    overlay.replaceChildren();
    const t = rv.truth;
    el("line", { class: "link", x1: rv.guess.lon, y1: -rv.guess.lat, x2: t.lon, y2: -t.lat }, overlay);
    rv.models.forEach((m, i) => {
      if (m.lat === null || m.lon === null) return;
      const r = el("rect", { class: "model", x: m.lon - 1.6, y: -m.lat - 1.6, width: 3.2, height: 3.2,
        fill: COLORS[i % COLORS.length] }, overlay);
      el("title", {}, r).textContent = m.model;
    });
    marker("guess", rv.guess.lat, rv.guess.lon);
    marker("truth", t.lat, t.lon, 2.8);
    $("coords").textContent = "On the map: your guess (blue dot), the recording place (green dot), " +
      "the models' guesses (squares).";
    $("answer").textContent = "Recorded in " + (place(t) || "an unnamed place") + " (" + fmtLat(t.lat) +
      ", " + fmtLon(t.lon) + "). Your guess was " + fmtKm(rv.distance_km) + " away: GeoScore " +
      Math.round(rv.geoscore) + ".";
    const tb = $("models").querySelector("tbody");
    tb.replaceChildren();
    rv.models.forEach((m, i) => {
      const tr = document.createElement("tr");
      const name = cell(tr, "");
      const sw = document.createElement("span");
      sw.className = "swatch"; sw.style.background = COLORS[i % COLORS.length];
      name.append(sw, m.model);
      const g = cell(tr, m.lat === null ? "no answer" : (place(m) || (fmtLat(m.lat) + ", " + fmtLon(m.lon))));
      if (m.reasoning) {
        const d = document.createElement("details");
        const s = document.createElement("summary"); s.textContent = "reasoning";
        const p = document.createElement("p"); p.textContent = m.reasoning;
        d.append(s, p); g.appendChild(d);
      }
      cell(tr, fmtKm(m.distance_km));
      cell(tr, String(Math.round(m.geoscore)));
      tb.appendChild(tr);
    });
    if (!rv.models.length) {
      const tr = document.createElement("tr"); cell(tr, "no model answers for this clip"); tb.appendChild(tr);
    }
    $("result").hidden = false;
    $("submit").disabled = true;
    const last = state.index + 1 >= state.round.clips.length;
    $("next").hidden = last;
    if (last) finishRound(); else $("next").focus();
  }

  async function submit() {
    if (!state.guess) return;
    $("submit").disabled = true;
    const clip = state.round.clips[state.index];
    try {
      const rv = await api("/api/guesses", {
        round_id: state.round.round_id, key: clip.key, lat: state.guess.lat, lon: state.guess.lon,
      });
      showScore(rv.round.score, rv.round.n, rv.round.max_score);
      $("status").textContent = "Clip " + (state.index + 1) + " of " + state.round.clips.length + ": answer.";
      showReveal(rv);
    } catch (e) {
      $("status").textContent = "Could not submit: " + e.message;
      $("submit").disabled = false;
    }
  }

  async function finishRound() {
    $("status").textContent = "Round complete.";
    const b = await api("/api/leaderboard?round_id=" + encodeURIComponent(state.round.round_id));
    const tb = $("leaders").querySelector("tbody");
    tb.replaceChildren();
    let rank = 0;
    b.entries.forEach((e) => {
      const tr = document.createElement("tr");
      // guesses made after the answer was shown are listed, unranked
      tr.className = [e.me ? "me" : "", e.after_reveal ? "late" : ""].join(" ").trim();
      cell(tr, e.after_reveal ? "\u2013" : String(++rank));
      cell(tr, e.name + (e.kind === "model" ? " (model)" : ""));
      cell(tr, String(e.n));
      cell(tr, fmtKm(e.distance_km));
      cell(tr, String(Math.round(e.geoscore)));
      tb.appendChild(tr);
    });
    $("board").hidden = false;
    $("newround").hidden = false;
    $("newround").focus();
  }

  async function newRound() {
    $("board").hidden = true;
    $("newround").hidden = true;
    state.round = await api("/api/rounds", {});
    state.index = 0;
    showScore(0, state.round.clips.length, state.round.max_score);
    loadClip();
  }

  $("submit").addEventListener("click", submit);
  $("next").addEventListener("click", () => { state.index += 1; loadClip(); map.focus(); });
  $("newround").addEventListener("click", newRound);

  drawMap().then(newRound).catch((e) => { $("status").textContent = "Could not start: " + e.message; });
})();
