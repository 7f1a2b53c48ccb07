// legorl monitor: live refresh. The server draws every panel; this script
// only asks whether the run has a new manifest version and, when it has,
// fetches the panels again and swaps them in.
(function () {
  "use strict";
  var body = document.body;
  var page = body.dataset.page;
  var run = body.dataset.run;
  var every = Number(body.dataset.refresh) || 2000;
  var version = body.dataset.version;
  var live = document.getElementById("live");
  var lastRuns = null;

  function setLive(on, text) {
    if (!live) return;
    live.dataset.live = on ? "on" : "off";
    live.textContent = text;
  }

  function get(url, json) {
    return fetch(url, { cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error(url + ": HTTP " + r.status);
      return json ? r.json() : r.text();
    });
  }

  function redraw() {
    if (body.dataset.empty) {
      location.reload(); // the first data of a run: draw the whole page
      return new Promise(function () {});
    }
    var sections = document.querySelectorAll("section.panel[data-panel]");
    return Promise.all(Array.prototype.map.call(sections, function (s) {
      var url = "/runs/" + encodeURIComponent(run) + "/panels/" + s.dataset.panel + location.search;
      return get(url, false).then(function (html) {
        var t = document.createElement("template");
        t.innerHTML = html.trim();
        if (t.content.firstElementChild) s.replaceWith(t.content.firstElementChild);
      });
    }));
  }

  function tick() {
    var work;
    if (page === "run") {
      work = get("/api/runs/" + encodeURIComponent(run) + "/status", true).then(function (st) {
        var v = String(st.version);
        var done = v === version ? Promise.resolve() : redraw().then(function () {
          version = v;
          body.dataset.version = v;
        });
        return done.then(function () {
          var t = new Date(st.loaded_at).toLocaleTimeString();
          setLive(!st.error, (st.error ? "● store unreachable, showing v" : "● live · v") + v + " · " + t);
        });
      });
    } else if (page === "index") {
      work = get("/api/runs", false).then(function (text) {
        if (lastRuns !== null && text !== lastRuns) location.reload();
        lastRuns = text;
        setLive(true, "● live");
      });
    } else {
      return;
    }
    work.catch(function (e) {
      setLive(false, "● offline: " + e.message);
    }).then(function () {
      setTimeout(tick, every);
    });
  }
  setTimeout(tick, every);
})();
