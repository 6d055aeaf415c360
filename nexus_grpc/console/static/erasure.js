// An erasure's page, live: its progress streams through
// /erasures/{id}/events (Server-Sent Events over the server's WatchErasure)
// and the page's figures change in place until the receipt. When the console
// does not stream it (it holds only so many live streams), the page reloads
// itself every few seconds instead, as it does without JavaScript.
"use strict";
(function () {
  const root = document.getElementById("erasure");
  if (!root || root.dataset.state === "done") return;
  const RELOAD_MS = 3000;

  function text(id, value) {
    const el = document.getElementById(id);
    if (el) el.textContent = value;
  }
  function when(value) { return (value || "").replace("T", " ").replace("Z", " UTC"); }
  function n(value) { return Number(value || 0).toLocaleString("en-US"); }

  function show(e) {
    root.dataset.state = e.state;
    const state = document.getElementById("erasure-state");
    if (state) {
      state.className = "state " + (e.finished ? "done" : "pending");
      state.querySelector("b").textContent = e.state;
    }
    text("erasure-phase", e.phase);
    text("erasure-end", e.end_time ? when(e.end_time) : "not yet");
    const bar = document.getElementById("erasure-bar");
    if (bar) { bar.value = e.percent; bar.textContent = e.percent + "%"; }
    text("erasure-percent", e.percent + "%");
    e.progress.forEach(function (p) {
      const row = document.querySelector('#erasure-progress tr[data-kind="' + p.kind + '"]');
      if (!row) return;
      row.querySelector(".done").textContent = n(p.done);
      row.querySelector(".planned").textContent = n(p.planned);
    });
    e.receipt.forEach(function (r) {
      const cell = document.querySelector('#receipt tr[data-kind="' + r.kind + '"] td.num');
      if (cell) cell.textContent = n(r.count);
    });
    if (e.finished) {
      text("receipt-caption", "The receipt: what went, by kind (counts only, never content)");
      text("live-note", "Done: no byte of the erased text is left in any file the service" +
        " writes (docs/privacy.md, \"Gone from disk\").");
    }
  }

  function reloadLater(why) {
    text("live-note", why + " This page reloads itself every few seconds until the erasure is done.");
    window.setTimeout(function () { window.location.reload(); }, RELOAD_MS);
  }

  if (!window.EventSource) { reloadLater("This browser cannot follow the erasure live."); return; }
  const source = new EventSource("/erasures/" + root.dataset.erasure + "/events");
  let finished = false;
  source.addEventListener("erasure", function (event) {
    const e = JSON.parse(event.data);
    show(e);
    if (e.finished) { finished = true; source.close(); }
  });
  source.addEventListener("ended", function () {
    source.close();
    reloadLater("The live stream of this erasure ended.");
  });
  // Refused (the console streams only so many pages at once) or gone.
  source.addEventListener("error", function () {
    if (finished || source.readyState !== EventSource.CLOSED) return;
    reloadLater("The console does not follow this erasure live here (it streams only so" +
      " many pages at once).");
  });
  window.addEventListener("pagehide", function () { source.close(); });
})();
