// Hovering a line marks every line of the same kernel that came from the same equations,
// and scrolls each other listing of the kernel to the first of them.
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
    function reveal(row, hovered) {
      // scroll the listing holding `row` (not the page, not the hovered one) to show it
      var box = row.closest(".listing");
      if (!box || box.contains(hovered) || box.offsetParent === null) { return; }
      var top = row.offsetTop, bottom = top + row.offsetHeight;
      if (top < box.scrollTop + 30 || bottom > box.scrollTop + box.clientHeight) {
        box.scrollTop = Math.max(0, top - box.clientHeight / 3);
      }
    }
    rows.forEach(function (row) {
      row.addEventListener("mouseenter", function () {
        clear();
        var first = new Map();
        row.getAttribute("data-e").split(" ").forEach(function (e) {
          (byEqn[e] || []).forEach(function (r) {
            r.classList.add("linked");
            lit.push(r);
            var box = r.closest(".listing");
            if (box && !first.has(box)) { first.set(box, r); }
          });
        });
        first.forEach(function (r) { reveal(r, row); });
      });
      row.addEventListener("mouseleave", clear);
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
