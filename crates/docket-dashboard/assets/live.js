// Docket dashboard: live refresh. The server sends an event when something may have changed
// (a notification, one of our own actions, or its refresh tick); the page then fetches its
// own URL with X-Docket-Fragment and swaps the <main> content. Nothing is refreshed while
// the operator is typing or has rows selected, so a refresh never throws their work away.
// No build step, no dependency: this file is embedded in the binary as it is.
(function () {
  "use strict";
  var base = document.body.getAttribute("data-base") || "";
  var busy = false;
  var paused = false;
  var last = Date.now();
  function idle() {
    if (paused) return false;
    var a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA")) return false;
    // Keyboard focus inside the page (a link, a button): a swap would throw it to the body.
    var main = document.getElementById("main");
    if (a && main && a !== document.body && main.contains(a)) return false;
    if (document.querySelector("input[type=checkbox][name=ids]:checked")) return false;
    return !document.querySelector("[data-no-refresh]");
  }
  function refresh() {
    if (busy || !idle()) return;
    busy = true;
    fetch(location.href, { headers: { "X-Docket-Fragment": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null && idle()) {
          // Keep the reader where they were: the swap must not scroll rows under them.
          var y = window.scrollY;
          document.getElementById("main").innerHTML = html;
          window.scrollTo(0, y);
          last = Date.now();
          document.body.setAttribute("data-refreshed", String(last));
        }
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  function connect() {
    var live = document.getElementById("live");
    var es = new EventSource(base + "/events");
    es.onopen = function () { if (live) live.className = "badge on"; };
    es.onmessage = refresh;
    es.onerror = function () { if (live) live.className = "badge off"; };
  }
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t && t.id === "select-all") {
      document.querySelectorAll("input[type=checkbox][name=ids]").forEach(function (c) { c.checked = t.checked; });
    }
  });
  document.addEventListener("submit", function (e) {
    var f = e.target;
    var b = e.submitter;
    var msg = (b && b.getAttribute("data-confirm")) || f.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });
  // "/" focuses the first search or filter field, as on most sites.
  document.addEventListener("keydown", function (e) {
    var a = document.activeElement;
    var typing = a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
      var f = document.querySelector("form.filters input, main input[type=search]");
      if (f) { e.preventDefault(); f.focus(); }
    }
  });
  var pause = document.getElementById("pause");
  if (pause) {
    pause.addEventListener("click", function () {
      paused = !paused;
      pause.setAttribute("aria-pressed", String(paused));
      pause.textContent = paused ? "Resume updates" : "Pause updates";
      if (!paused) refresh();
    });
  }
  var updated = document.getElementById("updated");
  if (updated) {
    setInterval(function () {
      var s = Math.round((Date.now() - last) / 1000);
      updated.textContent = paused ? "paused" : "updated " + s + " s ago";
    }, 1000);
  }
  if (window.EventSource) connect();
})();
