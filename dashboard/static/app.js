// The dashboard's only script besides htmx: keeps live tables bounded and shows the stream's
// state. No inline script anywhere (the pages are served with a strict CSP).
(function () {
  "use strict";

  function trim(body) {
    var max = parseInt(body.getAttribute("data-max-rows") || "0", 10);
    if (!max || !body.rows) return;
    var empty = body.querySelectorAll("tr.empty");
    if (body.rows.length > empty.length) {
      empty.forEach(function (row) { row.remove(); });
    }
    while (body.rows.length > max) body.deleteRow(-1);
  }

  function setStatus(state, text) {
    var el = document.getElementById("live-status");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = text;
  }

  document.addEventListener("htmx:sseOpen", function () { setStatus("live", "live"); });
  document.addEventListener("htmx:sseError", function () { setStatus("down", "reconnecting…"); });
  document.addEventListener("htmx:sseMessage", function (evt) {
    var target = evt.target;
    if (target && target.hasAttribute && target.hasAttribute("data-max-rows")) trim(target);
    document.body.setAttribute("data-last-event", String(Date.now()));
  });

  // Rows of the live feed open their details with the keyboard too.
  document.addEventListener("keydown", function (evt) {
    var row = evt.target;
    if ((evt.key === "Enter" || evt.key === " ") && row && row.matches && row.matches("tr[hx-get]")) {
      evt.preventDefault();
      row.click();
    }
  });
})();
