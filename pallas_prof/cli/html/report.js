// Hovering a line marks every line of the same kernel that came from the same equations.
(function () {
  "use strict";
  document.querySelectorAll("section.kernel").forEach(function (section) {
    var rows = Array.prototype.slice.call(section.querySelectorAll("tr[data-e], li.diagnosis[data-e]"));
    var byEqn = {};
    rows.forEach(function (row) {
      row.getAttribute("data-e").split(" ").forEach(function (e) {
        (byEqn[e] = byEqn[e] || []).push(row);
      });
    });
    var lit = [];
    function clear() { lit.forEach(function (r) { r.classList.remove("linked"); }); lit = []; }
    rows.forEach(function (row) {
      row.addEventListener("mouseenter", function () {
        clear();
        row.getAttribute("data-e").split(" ").forEach(function (e) {
          (byEqn[e] || []).forEach(function (r) { r.classList.add("linked"); lit.push(r); });
        });
      });
      row.addEventListener("mouseleave", clear);
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
