// Refreshes the status page in place every few seconds: fetches the same
// content from `?part=main` (rendered and escaped by the dispatcher) and
// swaps it in, keeping which sections are open or closed. Says so in the
// header when the dispatcher cannot be reached; skips refreshes while the
// tab is hidden. Without JavaScript a <noscript> meta refresh reloads it.
(function () {
  "use strict";
  var PERIOD_MS = Number(document.body.getAttribute("data-refresh-ms")) || 5000;
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  var liveText = document.getElementById("live-text");
  var refreshes = 0;

  function openSections() {
    var open = {};
    main.querySelectorAll("details[id]").forEach(function (d) { open[d.id] = d.open; });
    return open;
  }

  function show(html) {
    var open = openSections();
    main.innerHTML = html;
    main.querySelectorAll("details[id]").forEach(function (d) {
      if (Object.prototype.hasOwnProperty.call(open, d.id)) { d.open = open[d.id]; }
    });
    var titled = main.querySelector("[data-title]");
    if (titled) { document.title = titled.getAttribute("data-title"); }
    refreshes += 1;
    document.body.setAttribute("data-refreshes", String(refreshes));
    live.className = "live";
    liveText.textContent = "live · refreshes every " + PERIOD_MS / 1000 + " s";
  }

  function refresh() {
    if (document.hidden) {
      setTimeout(refresh, PERIOD_MS);
      return;
    }
    fetch("?part=main", { cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (response) {
        // 503: the dispatcher is replaying its journal; its notice is shown.
        if (!response.ok && response.status !== 503) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(show)
      .catch(function (error) {
        live.className = "live down";
        liveText.textContent = "dispatcher unreachable (" + error.message + "); showing the last figures";
      })
      .then(function () { setTimeout(refresh, PERIOD_MS); });
  }

  setTimeout(refresh, PERIOD_MS);
})();
