// Live updates of the dashboard's pages, from the API's stream of runs' changes
// (GET api/v1/stream, Server-Sent Events), not by polling: each part of a page marked
// data-live (an element with an id) is fetched again and swapped in place (unless the
// user is working in it), at most once a second, when a run changes (starts, reports
// progress, ends) or an event is emitted; #live-feed lists the latest changes. The
// stream is narrowed by the page's data-live-filter (a run's id on a message's page).
(function () {
  "use strict";
  var body = document.body;
  if (!window.EventSource || !document.querySelector("[data-live], #live-feed")) {
    return;
  }
  var filter = body.getAttribute("data-live-filter") || "";
  var source = new EventSource(body.getAttribute("data-root") + "/api/v1/stream" +
                               (filter ? "?" + filter : ""));
  var pending = null;
  var last = 0;
  var FEED_MOST = 20;

  // a part the user is working in (a box ticked, a field focused, a form opened) is
  // left as it is until they are done
  function inUse(part) {
    return (part.contains(document.activeElement) && document.activeElement !== body) ||
           part.querySelector("input:checked, details[open]") !== null;
  }

  function refresh() {
    pending = null;
    last = Date.now();
    fetch(window.location.href, {credentials: "same-origin"})
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (part) {
          var next = fresh.getElementById(part.id);
          if (next && !inUse(part)) { part.replaceWith(document.importNode(next, true)); }
        });
        body.setAttribute("data-refreshes",
                          String(Number(body.getAttribute("data-refreshes") || 0) + 1));
      });
  }

  function note(change) {
    var feed = document.getElementById("live-feed");
    if (!feed) { return; }
    var item = document.createElement("li");
    var when = new Date(change.at_ms).toISOString().slice(11, 23);
    var how = change.name ? change.name + " " + change.event : change.event;
    if (change.progress !== null && change.progress !== undefined) {
      how += " " + Math.round(change.progress * 100) + "%" + (change.note ? " " + change.note : "");
    }
    item.textContent = when + " " + change.task + " " + how +
                       " (attempt " + change.attempt + ") ";
    item.setAttribute("data-event", change.event);
    var link = document.createElement("a");
    link.href = body.getAttribute("data-root") + "/message?id=" + encodeURIComponent(change.id);
    link.textContent = change.id;
    item.appendChild(link);
    feed.insertBefore(item, feed.firstChild);
    while (feed.children.length > FEED_MOST) { feed.removeChild(feed.lastChild); }
  }

  source.addEventListener("ready", function () { body.setAttribute("data-stream", "ready"); });
  source.addEventListener("run", function (event) {
    note(JSON.parse(event.data));
    if (pending === null) {
      pending = window.setTimeout(refresh, Math.max(0, last + 1000 - Date.now()));
    }
  });
})();
