// The timeline's live states: the episodes still pending on this page are
// watched through /projects/{id}/events (Server-Sent Events over the
// server's WatchExtractions), and their state badges change in place.
"use strict";
(function () {
  const timeline = document.getElementById("timeline");
  if (!timeline || !window.EventSource) return;
  const project = timeline.dataset.project;
  const JOBS = [["embedding", "embedding_state", "embedding_error"],
                ["extraction", "extraction_state", "extraction_error"],
                ["memory", "memory_state", "memory_error"]];

  function pendingIds() {
    const ids = [];
    document.querySelectorAll("[data-episode]").forEach(function (el) {
      if (el.querySelector(".state.pending")) ids.push(el.dataset.episode);
    });
    return ids;
  }

  function show(state) {
    const el = document.querySelector('[data-episode="' + state.id + '"]');
    if (!el) return;
    JOBS.forEach(function (job) {
      const badge = el.querySelector('[data-job="' + job[0] + '"]');
      if (!badge) return;
      const value = state[job[1]];
      const error = state[job[2]] || "";
      badge.className = "state " + value;
      badge.title = error;
      badge.querySelector("b").textContent = value === "unspecified" ? "n/a" : value;
      let text = badge.querySelector(".error-text");
      if (error) {
        if (!text) { text = document.createElement("span"); text.className = "error-text"; badge.appendChild(text); }
        text.textContent = " — " + (error.length > 120 ? error.slice(0, 119) + "…" : error);
      } else if (text) {
        text.remove();
      }
    });
    el.dataset.updated = "live";
  }

  const ids = pendingIds();
  if (!ids.length) return;
  const source = new EventSource("/projects/" + project + "/events?episodes=" + ids.join(","));
  source.addEventListener("episode", function (event) {
    show(JSON.parse(event.data));
    if (!pendingIds().length) source.close();
  });
  // Refused (the console streams only so many timelines at once) or gone:
  // the page stays as it is, and says its states no longer follow live.
  source.addEventListener("error", function () {
    if (source.readyState !== EventSource.CLOSED) return;
    const note = document.getElementById("live-note");
    if (note) note.textContent = "States no longer follow the server live here (the console" +
      " streams only so many timelines at once); reload the page to see the latest.";
  });
  window.addEventListener("pagehide", function () { source.close(); });
})();
