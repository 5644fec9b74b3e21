// The curator's screening page: listen to each clip of the pool, accept or
// reject it with a note. The token comes from the URL fragment (#token=...),
// which the browser never sends to the server; the API gets it in a header.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const state = { clips: [], index: 0 };

  async function api(path, body) {
    const headers = { "X-Screening-Token": token };
    const opts = { headers };
    if (body !== undefined) {
      opts.method = "POST";
      headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(path, opts);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
    return data;
  }

  function counts() {
    const n = state.clips.length;
    const acc = state.clips.filter((c) => c.decision === "accept").length;
    const rej = state.clips.filter((c) => c.decision === "reject").length;
    $("progress").textContent =
      `${acc + rej} of ${n} screened: ${acc} accepted, ${rej} rejected`;
    return n - acc - rej;
  }

  function drawTable() {
    const body = document.querySelector("#decisions tbody");
    body.textContent = "";
    state.clips.forEach((c, i) => {
      const tr = document.createElement("tr");
      tr.dataset.key = c.key;
      if (i === state.index) tr.className = "me";
      for (const text of [c.key, c.decision || "—", c.note || ""]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      tr.addEventListener("click", () => show(i));
      body.appendChild(tr);
    });
  }

  function show(i) {
    state.index = Math.max(0, Math.min(i, state.clips.length - 1));
    const c = state.clips[state.index];
    $("clip").hidden = false;
    $("title").textContent = c.title;
    const secs = c.seconds ? `, ${c.seconds.toFixed(1)} s` : "";
    $("meta").textContent = `${c.key}${secs}` + (c.decision ? ` — ${c.decision}ed` : "");
    $("note").value = c.note || "";
    $("audio").src = c.audio;
    $("status").textContent = `Clip ${state.index + 1} of ${state.clips.length}`;
    counts();
    drawTable();
  }

  function nextOpen(from) {
    for (let k = 1; k <= state.clips.length; k++) {
      const j = (from + k) % state.clips.length;
      if (!state.clips[j].decision) return j;
    }
    return -1;
  }

  async function decide(decision) {
    const c = state.clips[state.index];
    const note = $("note").value;
    for (const b of ["accept", "reject"]) $(b).disabled = true;
    try {
      await api("/api/screening", { key: c.key, decision, note });
      c.decision = decision;
      c.note = note;
      const j = nextOpen(state.index);
      if (j < 0) {
        show(state.index);
        $("status").textContent = "Every clip is screened";
      } else {
        show(j);
      }
    } catch (e) {
      $("status").textContent = "Not saved: " + e.message;
    } finally {
      for (const b of ["accept", "reject"]) $(b).disabled = false;
    }
  }

  async function start() {
    if (!token) {
      $("status").textContent = "Open the link printed by 'agl-fast serve --screening' (it carries the token).";
      return;
    }
    try {
      const data = await api("/api/screening");
      state.clips = data.clips;
    } catch (e) {
      $("status").textContent = "Cannot load the pool: " + e.message;
      return;
    }
    if (!state.clips.length) {
      $("status").textContent = "The pool is empty";
      return;
    }
    const first = state.clips.findIndex((c) => !c.decision);
    show(first < 0 ? 0 : first);
    if (first < 0) $("status").textContent = "Every clip is screened";
  }

  $("accept").addEventListener("click", () => decide("accept"));
  $("reject").addEventListener("click", () => decide("reject"));
  $("prev").addEventListener("click", () => show(state.index - 1));
  $("skip").addEventListener("click", () => show(state.index + 1));
  start();
})();
