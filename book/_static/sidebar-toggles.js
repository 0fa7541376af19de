// The chapter list and page-contents toggles open their panels on a phone and a tablet.
//
// pydata-sphinx-theme 0.17 binds its handlers (move the sidebar into a <dialog>, open it)
// to the first .primary-toggle and the first .secondary-toggle of the page only:
// document.querySelector. sphinx-book-theme 1.3 puts those first buttons in a header it
// hides, and shows its own buttons in the article header, which no handler listens to, so
// below 992 px neither toggle did anything (pydata-sphinx-theme #2451, sphinx-book-theme
// #988). Here every other toggle of the same kind passes its click to the first one, whose
// handlers then do what they were written to do (sphinx-book-theme's own, at 992 px and
// wider, hides and shows the chapter list; pydata's opens the dialog below that).
// tests/test_browser.py opens both panels at 400 and 800 px.
(function () {
  "use strict";

  function forward(kind) {
    const toggles = document.querySelectorAll("." + kind);
    const bound = toggles[0];
    for (const toggle of Array.prototype.slice.call(toggles, 1)) {
      toggle.addEventListener(
        "click",
        (event) => {
          event.preventDefault();
          event.stopImmediatePropagation();
          toggle.blur();
          bound.click();
        },
        true,
      );
    }
  }

  function start() {
    forward("primary-toggle");
    forward("secondary-toggle");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
