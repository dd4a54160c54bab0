// dra-gitops dashboard: live updates where JavaScript runs. Every page reads the same without it.
// Polls /api/version; when the state changed, fetches the page again and swaps its <main> in (server
// rendered, escaped there). Pauses while the tab is hidden or the reader is inside a form or <details>.
(function () {
  "use strict";
  var body = document.body;
  var url = body && body.getAttribute("data-poll");
  var live = document.getElementById("live");
  if (!url || !window.fetch || !window.DOMParser) { return; }
  var every = 5000;
  var seen = null;
  function say(text) { if (live) { live.textContent = text; } }
  function busy() {
    var active = document.activeElement;
    return document.hidden || (active && active.closest && active.closest("form, details[open]"));
  }
  function refresh() {
    return fetch(window.location.href, { credentials: "same-origin" }).then(function (answer) {
      if (!answer.ok) { throw new Error(String(answer.status)); }
      return answer.text();
    }).then(function (text) {
      var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
      var main = document.getElementById("main");
      if (fresh && main) {
        main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
        say("Updated " + new Date().toLocaleTimeString());
      }
    });
  }
  function poll() {
    if (busy()) { window.setTimeout(poll, every); return; }
    fetch(url, { credentials: "same-origin" }).then(function (answer) {
      if (!answer.ok) { throw new Error(String(answer.status)); }
      return answer.json();
    }).then(function (data) {
      if (seen !== null && data.version !== seen) {
        seen = data.version;
        return refresh();
      }
      seen = data.version;
      say("Live");
    }).catch(function () {
      say("Live updates paused (the server did not answer)");
    }).then(function () { window.setTimeout(poll, every); });
  }
  say("Live");
  window.setTimeout(poll, 0);
}());
