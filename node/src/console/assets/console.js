// Ganglion console: follows a running job without reloading the page. The job's
// `job_subscribe` stream arrives as server-sent events from /jobs/{id}/events; on each
// transition the page's live part is fetched again from /jobs/{id}/live (receipts, claims,
// payments and the audit appear with it). While the job runs, the live part is also refreshed
// every 5 s: heartbeats move GPU time without a transition.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) return;
  var job = live.getAttribute("data-job");
  var busy = false, again = false, events = 0, source = null;
  function terminal() {
    var inner = document.getElementById("live-inner");
    return inner && inner.getAttribute("data-terminal") === "true";
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch("/jobs/" + job + "/live", { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        // A transition arrived while this fetch was in flight: what it brought may predate
        // the transition (the badge already shows it), and the fetch that follows replaces it.
        if (again) return;
        live.innerHTML = html;
        live.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  if (terminal()) return;
  var timer = setInterval(function () {
    if (terminal()) { clearInterval(timer); if (source) source.close(); return; }
    refresh();
  }, 5000);
  if (!window.EventSource) return;
  source = new EventSource("/jobs/" + job + "/events");
  source.addEventListener("job_event", function (e) {
    events += 1;
    live.setAttribute("data-events", String(events));
    try {
      var ev = JSON.parse(e.data);
      var badge = live.querySelector('section.record[data-role="' + ev.role + '"] [data-current-state]');
      if (badge) {
        badge.setAttribute("data-current-state", ev.state);
        var span = document.createElement("span");
        span.className = "state s-" + ev.state;
        span.setAttribute("data-state", ev.state);
        span.textContent = ev.state;
        badge.replaceChildren(span);
      }
    } catch (err) { /* a malformed event only skips the quick update */ }
    refresh();
  });
  source.addEventListener("end", function () {
    source.close();
    if (!terminal()) refresh();
  });
})();
